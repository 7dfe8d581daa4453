"""The `/docs` page of every service's HTTP API: Swagger UI with the OpenAPI document inlined.

Served only to a valid credential, like `/openapi.json`. The document is inlined, not fetched by
the page, because a browser's second request would carry no `Authorization` header; its server is
the URL the page was asked for, so "Try it out" reaches the same service (after "Authorize").
"""

from __future__ import annotations

import html
import json
from typing import Any

SWAGGER_UI = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5"

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<link rel="stylesheet" href="{ui}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ui}/swagger-ui-bundle.js"></script>
<script>
SwaggerUIBundle({{spec: {spec}, dom_id: "#swagger-ui", deepLinking: true, persistAuthorization: false}});
</script>
</body>
</html>
"""


def docs_page(openapi: dict[str, Any], base_url: str) -> str:
    """The page for `openapi`, its requests sent to `base_url`."""
    spec = {**openapi, "servers": [{"url": base_url.rstrip("/")}]}
    # Inside <script>: no `</script>` or `<!--` may appear, so every `<` is escaped.
    inlined = json.dumps(spec).replace("<", "\\u003c")
    title = html.escape(str(openapi.get("info", {}).get("title", "API")))
    return PAGE.format(title=title, ui=SWAGGER_UI, spec=inlined)
