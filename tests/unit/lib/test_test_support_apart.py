"""Test support (`agentstream_testing`: the pytest plugin, brokers for tests, the fakes) is a
workspace package of its own, a development dependency: no production package may import it, and
the library no longer carries pytest (docs/code-map.md § libs/agentstream-testing)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TEST_ONLY = ("agentstream_testing", "pytest", "_pytest", "testcontainers")


def production_roots() -> list[Path]:
    return [ROOT / "libs" / "agentstream" / "src", *sorted((ROOT / "services").glob("*/src"))]


def imported_modules(source: str) -> set[str]:
    """Every module a source imports, at any depth (a function's lazy import counts too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
    return found


def is_test_support(module: str) -> bool:
    return module.split(".")[0] in TEST_ONLY or module.startswith("agentstream.testing")


def test_production_code_imports_no_test_support() -> None:
    roots = production_roots()
    assert len(roots) >= 7  # the library and every service
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for root in roots
        for path in sorted(root.rglob("*.py"))
        for module in sorted(imported_modules(path.read_text(encoding="utf-8")))
        if is_test_support(module)
    ]
    assert offenders == []


def test_the_library_has_no_testing_package_left() -> None:
    assert not (ROOT / "libs" / "agentstream" / "src" / "agentstream" / "testing").exists()


def test_an_import_of_test_support_is_seen_wherever_it_is() -> None:
    source = "import os\n\ndef f():\n    from agentstream_testing.fake_openai import FakeOpenAI\n    import pytest\n"
    assert {m for m in imported_modules(source) if is_test_support(m)} == {"agentstream_testing.fake_openai", "pytest"}
    assert not is_test_support("agentstream.kafka") and is_test_support("agentstream.testing.fixtures")
