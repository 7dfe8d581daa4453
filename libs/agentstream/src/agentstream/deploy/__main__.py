"""Regenerate the generated k8s files: `uv run python -m agentstream.deploy [--check]`.

- k8s/overlays/<name>/kafka.yaml: KafkaTopics and ScaledObjects from that overlay's config;
- k8s/base/prometheus-rule.yaml: the PrometheusRule from monitoring/alerts.yml.

`--check` writes nothing and exits 1 when a file differs from what would be written. An overlay whose
config cannot be read is reported in one line and skipped (the others are still written); exit 2 then.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentstream.deploy.files import BadOverlay, generated_files
from agentstream.deploy.prometheus_rule import NotARuleFile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstream.deploy", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository root")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    stale = []
    errors: list[BadOverlay] = []
    try:
        files = generated_files(args.root, errors)
    except NotARuleFile as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path, text in files.items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(args.root)}")
    for bad in errors:
        print(f"error: {bad}", file=sys.stderr)
    if errors:
        return 2
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
