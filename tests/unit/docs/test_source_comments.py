"""Source comments say why, or name a doc in docs/: never an issue number, an acceptance item or a
section of a design file outside the repository, which a reader of the code cannot open."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCE_TREES = ("libs", "services", "bench", "mutate", "tests")

NUMBERED = re.compile(r"\bissues?\s*#?\d+|\bacceptance\s*#?\d+", re.IGNORECASE)
# In capitals: the design file that lived outside the repository (docs/architecture.md is the one to cite).
OUTSIDE_DESIGN = re.compile(r"\bARCHITECTURE\b")


def _is_citation(text: str) -> bool:
    return bool(NUMBERED.search(text) or OUTSIDE_DESIGN.search(text))


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring."""
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None and node.body:
                found.append((node.body[0].lineno, doc))
    return found


def citations(source: str) -> list[tuple[int, str]]:
    # A comment or docstring is a piece of the source: a file whose text cites nothing needs no
    # tokenizing or parsing (the scan stays well inside its timeout on a loaded machine).
    if not _is_citation(source):
        return []
    return [
        (line, text.strip().splitlines()[0]) for line, text in comments_and_docstrings(source) if _is_citation(text)
    ]


def source_files() -> list[Path]:
    return sorted(
        p
        for tree in SOURCE_TREES
        for p in (ROOT / tree).rglob("*.py")
        if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(ROOT).parts)
    )


def test_the_source_trees_are_scanned() -> None:
    files = {str(p.relative_to(ROOT)) for p in source_files()}
    assert "libs/agentstream/src/agentstream/service.py" in files
    assert any(f.startswith("services/agent-runner/") for f in files)
    assert any(f.startswith("bench/") for f in files)
    assert any(f.startswith("tests/chaos/") for f in files)


def test_no_comment_cites_an_issue_an_acceptance_item_or_the_outside_design() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in source_files()
        for line, text in citations(path.read_text(encoding="utf-8"))
    ]
    assert not found, "cite docs/<file>.md or say why instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "# fixed in issue 5\nx = 1\n",
        "# see issue #12\nx = 1\n",
        '"""Acceptance 10: closes within 500 ms."""\n',
        "def f():\n    '''The run pipeline (ARCHITECTURE §3).'''\n",
        "class C:\n    # per ARCHITECTURE.md\n    pass\n",
    ],
)
def test_a_citation_in_a_comment_or_docstring_is_found(source: str) -> None:
    assert citations(source)


@pytest.mark.parametrize(
    "source",
    [
        "# the design: docs/architecture.md\nx = 1\n",
        '# see docs/decisions.md, "Broker loss"\nx = 1\n',
        "def issue(n: int) -> str:\n    '''Issue a pairing code.'''\n    return 'issue 5'\n",
        "x = 'acceptance 5'  # a value, not a comment\n",
    ],
)
def test_ordinary_words_and_doc_references_pass(source: str) -> None:
    assert not citations(source)
