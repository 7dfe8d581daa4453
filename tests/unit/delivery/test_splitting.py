"""Length splitting measured the platform's way; fences closed and reopened; unsplit restores the text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstream_delivery.splitting import (
    _cut_point,
    _settled_cut_point,
    cut,
    open_fence,
    safe_limit,
    split_text,
    unsplit,
    utf16_len,
    whole_character_start,
)


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


def test_utf16_counts_exactly_the_characters_beyond_the_bmp_twice():
    assert utf16_len("\uffff") == 1 and utf16_len("\U00010000") == 2


def test_a_text_that_fills_the_safe_length_exactly_is_not_cut():
    assert cut("x" * 1000, 1000, len) is None and cut("x" * 1000, 1000, utf16_len) is None
    assert cut("x" * 1001, 1000, len) is not None


def test_a_hard_cut_fills_the_room_left_for_a_fence_closer_in_either_measure():
    for measure in (len, utf16_len):
        c = cut("x" * 1500, 1000, measure)
        assert c is not None and c.head == "x" * 996 and c.consumed == 996


def test_a_cut_always_takes_at_least_one_character():
    c = cut("abc", 2, len)
    assert c is not None and (c.head, c.consumed) == ("a", 1)


def test_a_separator_in_the_first_half_of_the_window_is_not_used():
    c = cut("a" * 400 + " " + "b" * 1000, 1000, len)
    assert c is not None and c.head == ("a" * 400 + " " + "b" * 1000)[:996]


def test_a_paragraph_beats_a_later_line_and_the_last_space_wins():
    text = "a" * 600 + "\n\n" + "b" * 100 + "\n" + "c" * 600
    assert cut(text, 1000, len).head == "a" * 600 + "\n\n"  # type: ignore[union-attr]
    words = "w" * 598 + " " + "w" * 199 + " " + "w" * 600
    assert cut(words, 1000, len).head == "w" * 598 + " " + "w" * 199 + " "  # type: ignore[union-attr]


def test_a_code_span_across_the_window_is_cut_before_it():
    text = "w " * 350 + "`" + "code with spaces " * 20 + "`" + " tail" * 100 + "\nmore lines"
    c = cut(text, 1000, len)
    assert c is not None and c.head == "w " * 350


def test_code_spans_are_counted_on_the_cut_line_only():
    # an odd backtick ending the previous line does not make the next line a code span
    text = "say `\n" + "v " * 700
    c = cut(text, 1000, len)
    assert c is not None and c.head == text[:996]
    # two closed spans before the cut leave it outside any span
    text = "`a` `b` " + "v " * 700
    assert cut(text, 1000, len).head == text[:996]  # type: ignore[union-attr]
    # a line that starts with a span
    text = "intro\n`a` " + "v " * 700
    assert cut(text, 1000, len).head == text[:996]  # type: ignore[union-attr]


def test_backticks_inside_a_fenced_block_are_not_code_spans():
    text = "```\n" + "x = `a\n" * 200 + "```"
    c = cut(text, 1000, len)
    assert c is not None and c.head.endswith("x = `a\n```") and c.carry == "```\n"


def test_a_fence_without_a_language_is_reopened_without_one():
    assert open_fence("```\nword\n") == "" and open_fence("```py\nword\n") == "py"


def test_inside_a_fenced_block_only_whole_lines_are_cut():
    text = "```\n" + "word " * 300 + "\n```"
    c = cut(text, 1000, len)
    assert c is not None and c.head == text[:996] + "\n```" and c.consumed == 996 and c.carry == "```\n"


def test_split_text_leaves_room_for_the_cursor_it_is_given():
    assert len(split_text("x" * 3995, 4096, cursor="")) == 1
    assert len(split_text("x" * 3995, 4096)) == 2


def test_an_empty_text_is_one_empty_message():
    assert split_text("", 4096) == [""]


def test_a_genuine_closing_fence_ending_a_message_stays_when_the_next_does_not_reopen_it():
    assert unsplit(["```\ncode\n```", "more"]) == "```\ncode\n```more"
    assert unsplit(["intro ```", "```\ncode"]) == "intro ``````\ncode"


def test_a_hard_cut_never_splits_a_character_the_reader_sees_as_one():
    # Flags (two regional indicators), skin tones, ZWJ families, combining accents: each stays whole.
    for unit in (
        "🇩🇪",
        "👍🏽",
        "👨\u200d👩\u200d👧",
        "e\u0301",
        "❤\ufe0f",
        "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    ):
        for lead in ("", "a", "ab", "abc"):
            text = lead + unit * 400
            for measure in (len, utf16_len):
                pieces = split_text(text, 600, measure)
                assert len(pieces) >= 2 and "".join(pieces) == text
                for piece in pieces[1:]:
                    assert piece.startswith(unit), (unit, lead, measure, piece[:8])


def test_whole_character_start_backs_off_to_the_start_of_the_cluster():
    text = "a🇩🇪🇩🇪b"
    assert [whole_character_start(text, i) for i in range(len(text) + 1)] == [0, 1, 1, 3, 3, 5, 6]
    assert whole_character_start("👍🏽", 1) == 1  # a cut that cannot keep it whole takes the first part
    assert whole_character_start("x👨\u200d👩", 3) == 1 and whole_character_start("x👨\u200d👩", 2) == 1
    assert whole_character_start("ab", 1) == 1 and whole_character_start("", 0) == 0


@pytest.mark.parametrize(
    "text",
    [
        "aa bbccccc`d e f g`" + "h" * 20,  # the only space outside the span is below half the room
        "intro\n`a b c d e`" + "z" * 20,  # the span opens the line
        "`a`xxxxxxx`b c d e f`" + "z" * 20,  # a closed span before the open one
    ],
)
def test_a_space_inside_a_code_span_is_no_cut_point_and_the_cut_falls_at_the_hard_limit(text: str):
    c = cut(text, 24, len)  # room 20: cut points are looked for from 10 to 20
    assert c is not None and (c.head, c.consumed, c.carry) == (text[:20], 20, "")


def test_a_piece_loses_its_start_only_when_the_piece_before_closed_a_fence_it_reopens():
    assert unsplit(["XXXX first ", "XXXX second ", "```py\nx = 1\n```", "XXXX last"]) == (
        "XXXX first XXXX second ```py\nx = 1\n```XXXX last"
    )


def escaped_len(text: str) -> int:
    """A measure that is neither len nor UTF-16: an ampersand counts as its HTML entity."""
    return len(text) + 4 * text.count("&")


@pytest.mark.parametrize("text", ["&" * 100, "ab&" * 40, "a" * 30 + "&" * 30, "&" + "a" * 80])
def test_under_any_measure_a_hard_cut_takes_the_longest_head_that_fits_the_room(text: str):
    c = cut(text, 50, escaped_len)  # room 46: 50 less the fence closer's
    assert c is not None and c.head == text[: c.consumed] and c.carry == ""
    assert escaped_len(c.head) <= 46 < escaped_len(text[: c.consumed + 1])


# The first and last code point of every range that joins the character before it, and one just outside.
JOINING = [
    "\u0301",
    "\u20dd",
    "\u0903",
    "\u200d",
    "\ufe00",
    "\ufe0f",
    "\U0001f3fb",
    "\U0001f3ff",
    "\U000e0020",
    "\U000e007f",
]
NOT_JOINING = ["\ufdff", "\ufe10", "\U0001f3fa", "\U0001f400", "\U000e001f", "\U000e0080", "x"]


@pytest.mark.parametrize("mark", JOINING)
def test_a_combining_mark_selector_skin_tone_zwj_or_tag_stays_with_the_character_before_it(mark: str):
    assert whole_character_start("ab" + mark, 2) == 1


@pytest.mark.parametrize("other", NOT_JOINING)
def test_a_character_outside_the_joining_ranges_starts_a_cluster_of_its_own(other: str):
    assert whole_character_start("ab" + other, 2) == 2


@pytest.mark.parametrize(("first", "second"), [("\U0001f1e6", "\U0001f1ff"), ("\U0001f1ff", "\U0001f1e6")])
def test_regional_indicators_at_both_ends_of_their_range_pair_into_a_flag(first: str, second: str):
    assert whole_character_start("ab" + first + second, 3) == 2


def test_characters_just_outside_the_regional_range_make_no_flag():
    assert whole_character_start("ab\U0001f1e5\U0001f1e6", 3) == 3
    assert whole_character_start("ab\U0001f1ff\U0001f200", 3) == 3


def test_a_lone_regional_indicator_does_not_pull_the_next_character_into_it():
    assert whole_character_start("a\U0001f1e9b", 2) == 2


def test_a_cluster_that_reaches_the_start_of_the_text_is_cut_where_asked():
    assert whole_character_start("e\u0301\u0301\u0301", 3) == 3
    assert whole_character_start("\u0301a", 0) == 0


# Pieces that make paragraph, line and word separators, code spans and fences in every arrangement.
SPLIT_PIECES = ["\n\n", "\n", " ", "word", "`", "```", "```py\n", "x"]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(SPLIT_PIECES), max_size=40).map("".join),
    st.integers(0, 200),
    st.integers(0, 200),
)
def test_a_cut_point_said_settled_for_a_range_of_hard_limits_is_the_cut_point_of_each(
    text: str, lo: int, width: int
) -> None:
    # A split takes the cut point without bisecting where it is the same for every hard limit its range holds.
    lo = min(lo, len(text))
    hi = min(len(text), lo + width)

    def in_fence(pos: int) -> bool:
        return open_fence(text[:pos]) is not None

    settled = _settled_cut_point(text, lo, hi, in_fence)
    if settled is not None:
        assert all(_cut_point(text, hard, in_fence) == settled for hard in range(lo, hi + 1)), (lo, hi)


class SpanningMeasure:
    """`escaped_len` with a range to bisect given, as a rendered measure gives one from the blocks it keeps."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self.probes = 0

    def __call__(self, text: str) -> int:
        self.probes += 1
        return escaped_len(text)

    def span(self, text: str, room: int) -> tuple[int, int]:
        return self.lo, self.hi


def longest_fitting(text: str, room: int) -> int:
    return max(n for n in range(len(text) + 1) if escaped_len(text[:n]) <= room)


def test_a_cut_whose_point_is_settled_by_its_range_measures_no_prefix_inside_it() -> None:
    text = "para one & more\n\n" * 6 + "a last paragraph & then some words to cut"
    room = 100 - 4  # `cut(text, 100, ...)`: the room less the fence closer's
    hard = longest_fitting(text, room)
    start = text.rfind("\n\n", 0, hard) + 2  # the closed prefixes around the answer
    end = text.find("\n\n", hard)
    end = len(text) if end == -1 else end + 1
    measure = SpanningMeasure(start, end)
    c = cut(text, 100, measure)
    assert c is not None and c == cut(text, 100, escaped_len)
    assert measure.probes == 2  # the whole text, then the head: no prefix inside the range


def test_a_bisection_stops_where_the_range_left_settles_the_cut_point() -> None:
    # The range holds a paragraph break (a list's end, which closes no prefix): a probe or two put the answer
    # on one side of it, and the rest of the range then cuts at the same place.
    text = "intro & words\n\n- item & one\n- item two\n\n" + "a paragraph & then words " * 4
    room = 70 - 4
    measure = SpanningMeasure(0, len(text))
    c = cut(text, 70, measure)
    assert c is not None and c == cut(text, 70, escaped_len)
    hard = longest_fitting(text, room)
    assert c.consumed == text.rfind("\n\n", 0, hard) + 2
    assert measure.probes == 5  # the whole text, three probes (a bisection of the whole range: seven), the head
