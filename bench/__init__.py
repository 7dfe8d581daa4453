"""Benchmarks. Run from the repository root: `uv run python -m bench.<name>` (see bench/README.md)."""
