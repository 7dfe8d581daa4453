"""`agentstream config check FILE`: is the file valid, and what configuration does it make with the environment.

The effective configuration is the file, the `AGENTSTREAM__*` environment over it and the defaults
under it (docs/configuration.md). Secrets are never values in it (the file names the environment
variables that hold them, `*_env`), but URLs may carry credentials (`user:password@`, tokens in
paths or queries): those are masked. The variables the `*_env` keys name are reported as set or
not, never shown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from agentstream_stack.cli_support import JsonOpt, load_or_exit, out, print_json

config_app = typer.Typer(no_args_is_help=True, add_completion=False)
ENV_KEY_SUFFIX = "_env"


def masked_config(doc: Any) -> Any:
    """`doc` (a settings dump) with every credential inside a string masked."""
    from agentstream.secrets_mask import mask_url

    if isinstance(doc, dict):
        return {k: masked_config(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [masked_config(v) for v in doc]
    return mask_url(doc) if isinstance(doc, str) else doc


def named_env_vars(doc: Any, path: str = "") -> dict[str, str]:
    """Every `*_env` key (by its path) that names an environment variable, and the name."""
    found: dict[str, str] = {}
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and key.endswith(ENV_KEY_SUFFIX) and isinstance(value, str):
            found[where] = value
        else:
            found.update(named_env_vars(value, where))
    return found


@config_app.command("check")
def config_check(
    file: Annotated[Path, typer.Argument(help="The YAML config file.")],
    as_json: JsonOpt = False,
) -> None:
    """Validate FILE and print the effective configuration (file + environment + defaults), secrets masked.

    Exit 2 with each invalid key's path when it is not valid.
    """
    import yaml

    settings = load_or_exit(file)
    effective = masked_config(settings.model_dump(mode="json"))
    env = {key: {"name": name, "set": bool(os.environ.get(name))} for key, name in named_env_vars(effective).items()}
    if as_json:
        print_json({"file": str(file), "valid": True, "config": effective, "env": env})
        return
    out.print(f"[green]{file}: valid[/]; the effective configuration (file + environment + defaults):", highlight=False)
    out.print(yaml.safe_dump(effective, sort_keys=False, allow_unicode=True), highlight=False, markup=False, end="")
    for key, var in env.items():
        state = "set" if var["set"] else "[yellow]NOT set[/]"
        out.print(f"env {var['name']} ({key}): {state}", highlight=False)
