"""Length splitting measured the platform's way; fences closed and reopened; unsplit restores the text."""

from __future__ import annotations

from agentstream_delivery.splitting import cut, open_fence, safe_limit, split_text, unsplit, utf16_len


def test_utf16_counts_astral_characters_twice():
    assert utf16_len("🚀") == 2 and utf16_len("aé") == 2 and len("🚀") == 1


def test_safe_limit_leaves_room_for_cursor_and_margin():
    assert safe_limit(4096) == 4096 - 2 - 100
    assert safe_limit(300) == 500


def test_rockets_split_under_telegram_limit_in_utf16():
    text = "🚀" * 2200  # 4,400 UTF-16 units
    pieces = split_text(text, 4096, utf16_len)
    assert len(pieces) == 2
    assert all(utf16_len(p) <= 4096 for p in pieces)
    assert "".join(pieces) == text


def test_cut_prefers_paragraph_then_line_then_space():
    para = "a" * 600 + "\n\n" + "b" * 600
    c = cut(para, 1000, len)
    assert c is not None and c.head == "a" * 600 + "\n\n" and c.carry == ""
    line = "a" * 600 + "\n" + "b" * 300 + " " + "c" * 600
    c = cut(line, 1000, len)
    assert c is not None and c.head == "a" * 600 + "\n"  # a line beats a later space
    c = cut("a" * 600 + " " + "b" * 600, 1000, len)
    assert c is not None and c.head == "a" * 600 + " "
    nospace = "x" * 1500
    c = cut(nospace, 1000, len)
    assert c is not None and len(c.head) <= 1000 and c.consumed == len(c.head)


def test_never_cuts_inside_inline_code():
    text = "word " * 150 + "`inline code span that is long` " + "tail " * 200
    for piece in split_text(text, 1000, len):
        for line in piece.split("\n"):
            assert line.count("`") % 2 == 0, piece


def test_fenced_block_across_the_limit_is_closed_and_reopened():
    code = "\n".join(f"print({i})  # line {i}" for i in range(600))
    answer = "Here is the program:\n\n```python\n" + code + "\n```\n\nThat's it. " + "More prose. " * 300
    assert len(answer) > 9000
    pieces = split_text(answer, 4096, utf16_len)
    assert len(pieces) >= 3
    for piece in pieces:
        assert open_fence(piece) is None, "every message has balanced fences"
        assert utf16_len(piece) <= 4096
    assert pieces[1].startswith("```python\n")
    assert unsplit(pieces) == answer


def test_unsplit_of_plain_pieces_is_concatenation():
    assert unsplit(["ab ", "cd"]) == "ab cd"


def test_an_answer_that_ends_with_a_code_fence_unsplits_to_itself():
    code = "\n".join(f"x_{i} = {i}" for i in range(300))
    answer = "Here:\n\n```py\n" + code + "\n```"
    pieces = split_text(answer, 1000, len)
    assert len(pieces) >= 3 and pieces[-1].endswith("```") and pieces[1].startswith("```py\n")
    assert unsplit(pieces) == answer
    assert unsplit(["```py\nx = 1\n```"]) == "```py\nx = 1\n```"
