"""The Dockerfile builds the one image every deployment runs, from the lock file."""

from __future__ import annotations

import tomllib

from tests.unit.deploy.conftest import ROOT


def test_dockerfile_builds_one_image_from_the_lock_file() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    assert "uv sync --frozen --no-dev" in text
    assert 'ENTRYPOINT ["agentstream"]' in text
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    members = [p for pattern in root["tool"]["uv"]["workspace"]["members"] for p in sorted(ROOT.glob(pattern))]
    assert members
    for member in members:
        manifest = (member / "pyproject.toml").relative_to(ROOT).as_posix()
        assert f"COPY {manifest} {manifest}" in text, f"Dockerfile does not copy {manifest}"


def test_dockerignore_keeps_what_the_build_needs() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    for needed in ("pyproject.toml", "uv.lock", "libs/", "services/"):
        assert f"!{needed}" in lines
