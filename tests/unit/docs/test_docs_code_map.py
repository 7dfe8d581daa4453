"""docs/code-map.md names every source module, so it cannot drift from the tree.

A module is named under its package's section (`## libs/agentstream …`, `## ingress`, …) as its path
relative to the package root (`conversations/owner.py`), or as its file name beside a code span that
names its directory in the same section (the `metrics/` bullet lists `registry.py`; the
`agentstream/kafka/` table lists `commits.py`; a row of `adapters/telegram.py`, `slack.py`). The failure lists exactly the paths that are missing, so a new module is one row away.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CODE_MAP = ROOT / "docs" / "code-map.md"
NOT_MODULES = {"__init__.py", "__main__.py"}
# Alembic revisions are listed by alembic itself; the code map names their directory (`migrations/`).
DESCRIBED_AS_A_WHOLE = ("db/migrations/",)

CODE_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Package:
    section: str  # the `## ` heading's first word
    root: Path  # the package's source root
    shown_as: str  # how a failure names the root (relative to the repository)


def packages() -> list[Package]:
    roots = [
        ("libs/agentstream", ROOT / "libs" / "agentstream" / "src" / "agentstream"),
        ("libs/agentstream-testing", ROOT / "libs" / "agentstream-testing" / "src" / "agentstream_testing"),
    ]
    for service in sorted((ROOT / "services").iterdir()):
        roots += [(service.name, src) for src in sorted(service.glob("src/agentstream_*")) if src.is_dir()]
    return [Package(section, root, root.relative_to(ROOT).as_posix()) for section, root in roots]


def modules(package: Package) -> list[str]:
    paths = (p.relative_to(package.root).as_posix() for p in package.root.rglob("*.py"))
    return sorted(p for p in paths if Path(p).name not in NOT_MODULES and not p.startswith(DESCRIBED_AS_A_WHOLE))


def sections(text: str) -> dict[str, str]:
    """The text under each `## ` heading, by the heading's first word."""
    found: dict[str, str] = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        found[heading.split()[0]] = body
    return found


def is_named(module: str, spans: set[str]) -> bool:
    if any(span == module or span.endswith("/" + module) for span in spans):
        return True
    directory, _, name = module.rpartition("/")
    if not directory:
        return name in spans
    return name in spans and any(names_directory(span, directory) for span in spans)


def names_directory(span: str, directory: str) -> bool:
    """`kafka/`, `agentstream/kafka/` and `adapters/http.py` each name a directory (`kafka`, `adapters`);
    `fake_platforms/` names `agentstream_testing/fake_platforms` (the section's bullet says where it is)."""
    named = span.rpartition("/")[0]
    return bool(named) and (f"/{named}".endswith(f"/{directory}") or f"/{directory}".endswith(f"/{named}"))


def spans_of(body: str) -> set[str]:
    # `a.py`, `b.py` inside one span and `render.py`, `splitting.py` as a row's names both count.
    return {name.strip() for span in CODE_SPAN.findall(body) for name in span.split(",")}


def missing_modules(text: str, found: list[Package]) -> list[str]:
    by_section = sections(text)
    missing: list[str] = []
    for package in found:
        spans = spans_of(by_section.get(package.section, ""))
        missing += [f"{package.shown_as}/{m}" for m in modules(package) if not is_named(m, spans)]
    return missing


def test_every_source_module_is_in_the_code_map() -> None:
    missing = missing_modules(CODE_MAP.read_text(encoding="utf-8"), packages())
    assert not missing, "docs/code-map.md does not name these modules (add a row under their package):\n" + "\n".join(
        missing
    )


def test_every_package_has_a_section() -> None:
    by_section = sections(CODE_MAP.read_text(encoding="utf-8"))
    assert [p.section for p in packages() if p.section not in by_section] == []


def test_a_module_named_nowhere_is_reported_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "src" / "pkg"
    for path in ("app.py", "__init__.py", "kafka/commits.py", "kafka/new_thing.py", "sub/deep/x.py", "gone.py"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")
    text = (
        "## pkg\n\n| `app.py` | … |\n\nKafka (`pkg/kafka/`): `commits.py`\n\n`sub/deep/x.py`\n\n## other\n\n`gone.py`\n"
    )
    # gone.py is named only under another package's section; new_thing.py nowhere.
    assert missing_modules(text, [Package("pkg", root, "src/pkg")]) == ["src/pkg/gone.py", "src/pkg/kafka/new_thing.py"]


def test_a_file_name_needs_its_directory_beside_it(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "metrics").mkdir(parents=True)
    (root / "metrics" / "registry.py").write_text("")
    package = Package("pkg", root, "pkg")
    assert missing_modules("## pkg\n\n`registry.py`\n", [package]) == ["pkg/metrics/registry.py"]
    assert missing_modules("## pkg\n\n`metrics/` — `registry.py`, `lag.py`\n", [package]) == []
