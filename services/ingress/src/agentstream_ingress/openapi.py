"""Write the ingress OpenAPI document: `python -m agentstream_ingress.openapi docs/openapi-ingress.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentstream.config import Settings


def document() -> dict[str, Any]:
    from agentstream_ingress.bootstrap import bootstrap

    return bootstrap(Settings()).http.openapi()


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/openapi-ingress.json")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
