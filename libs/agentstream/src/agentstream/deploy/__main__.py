"""Regenerate the generated k8s files: `uv run python -m agentstream.deploy [--check]`.

- k8s/overlays/<name>/kafka.yaml: KafkaTopics and ScaledObjects from that overlay's config;
- k8s/base/prometheus-rule.yaml: the PrometheusRule from monitoring/alerts.yml.

`--check` writes nothing and exits 1 when a file differs from what would be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentstream.deploy.files import generated_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstream.deploy", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository root")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generated_files(args.root).items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(args.root)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
