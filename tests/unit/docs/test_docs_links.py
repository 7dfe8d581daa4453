"""Links in the README and docs/*.md stay inside the repository and point at something real.

A relative link must resolve to a file or directory inside the repository tree (the design once lived
in a file beside it, which a clone does not have), and an anchor must name a heading of its target.
Links with a scheme (https:, mailto:) are external references, not files, and are left alone; a
`file:` link or an absolute path is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def link_targets(markdown: str) -> list[str]:
    """Every link target of a Markdown text, code blocks and code spans excluded."""
    prose = CODE_SPAN.sub("", FENCE.sub("", markdown))
    return [*INLINE_LINK.findall(prose), *REFERENCE_DEF.findall(prose)]


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces → '-',
    repeated headings numbered (-1, -2, …)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for title in HEADING.findall(FENCE.sub("", markdown)):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def problem(source: Path, target: str) -> str | None:
    """Why a link target of `source` is not acceptable, or None when it is."""
    if target.lower().startswith("file:"):
        return "a file: link points outside the repository"
    if SCHEME.match(target):
        return None  # an external reference (https:, mailto:), not a file of the tree
    path_part, _, fragment = target.partition("#")
    if path_part.startswith("/"):
        return "an absolute path is not inside the repository"
    resolved = (source.parent / unquote(path_part)).resolve() if path_part else source
    if not resolved.is_relative_to(ROOT):
        return f"leaves the repository ({resolved})"
    if not resolved.exists():
        return f"no such file in the repository ({resolved.relative_to(ROOT)})"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text(encoding="utf-8")):
        return f"no heading #{fragment} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_stays_in_the_repository_and_resolves(doc: Path) -> None:
    bad = [
        f"{target}: {why}"
        for target in link_targets(doc.read_text(encoding="utf-8"))
        if (why := problem(doc, target)) is not None
    ]
    assert not bad, f"{doc.relative_to(ROOT)}: " + "; ".join(bad)


def test_readme_links_the_design_documents() -> None:
    targets = set(link_targets((ROOT / "README.md").read_text(encoding="utf-8")))
    assert {"docs/architecture.md", "docs/code-map.md", "docs/decisions.md"} <= targets


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("../shared/ARCHITECTURE.md", "leaves the repository"),
        ("/etc/passwd", "absolute path"),
        ("file:///etc/passwd", "file: link"),
        ("docs/no-such-file.md", "no such file"),
        ("docs/topics.md#no-such-heading", "no heading"),
    ],
)
def test_a_link_outside_or_to_nothing_is_refused(target: str, why: str) -> None:
    reason = problem(ROOT / "README.md", target)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "target", ["docs/topics.md", "docs/topics.md#keys-and-co-partitioning", "#where-things-are", "https://x.test/"]
)
def test_a_link_inside_the_repository_passes(target: str) -> None:
    assert problem(ROOT / "README.md", target) is None


def test_links_in_code_are_not_links() -> None:
    text = "see [a](docs/a.md)\n\n```md\n[b](../b.md)\n```\n\nand `[c](../c.md)` and [d][ref]\n\n[ref]: ../d.md\n"
    assert link_targets(text) == ["docs/a.md", "../d.md"]


def test_anchors_follow_the_github_rules() -> None:
    text = "# A `code` title: (with) punctuation\n## Same\n## Same\n```\n# not a heading\n```\n"
    assert anchors(text) == {"a-code-title-with-punctuation", "same", "same-1"}
