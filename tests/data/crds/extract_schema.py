"""Turn a CRD's openAPIV3Schema into a small, strict JSON schema (descriptions dropped).

    uv run python tests/data/crds/extract_schema.py CRD.yaml VERSION OUT.json

Run once per CRD listed in README.md when a newer operator release is vendored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def strict(node: Any) -> Any:
    if isinstance(node, list):
        return [strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if k != "description"}
    preserves = out.get("x-kubernetes-preserve-unknown-fields")
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out and not preserves:
        out["additionalProperties"] = False  # the API server prunes unknown fields: report them instead
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    return out


def extract(crd_file: Path, version: str) -> dict[str, Any]:
    crd = yaml.safe_load(crd_file.read_text())
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version}"}
    schema["properties"]["kind"] = {"const": kind}
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: names are checked by the tests
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


if __name__ == "__main__":
    crd_file, version, out = sys.argv[1:4]
    Path(out).write_text(json.dumps(extract(Path(crd_file), version), sort_keys=True, separators=(",", ":")) + "\n")
