"""The `/docs` page of every service's HTTP API: Swagger UI with the OpenAPI document inlined.

Served only to a valid credential, like `/openapi.json`. The document is inlined, not fetched by
the page, because a browser's second request would carry no `Authorization` header; its server is
the URL the page was asked for, so "Try it out" reaches the same service (after "Authorize").
"""

from __future__ import annotations

import html
import json
from typing import Any

# Swagger UI's assets come from a CDN, pinned to one exact version of the npm package
# `swagger-ui-dist` and checked by the browser against these hashes (Subresource Integrity): a changed
# file is refused, not run with the page's credential in reach. To upgrade: `npm pack
# swagger-ui-dist@<version>`, then `openssl dgst -sha384 -binary <file> | base64` for both files.
SWAGGER_UI_VERSION = "5.35.0"
SWAGGER_UI = f"https://cdn.jsdelivr.net/npm/swagger-ui-dist@{SWAGGER_UI_VERSION}"
SWAGGER_UI_CSS_SRI = "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I"
SWAGGER_UI_JS_SRI = "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9"

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<link rel="stylesheet" href="{ui}/swagger-ui.css" integrity="{css_sri}" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ui}/swagger-ui-bundle.js" integrity="{js_sri}" crossorigin="anonymous"></script>
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
    return PAGE.format(title=title, ui=SWAGGER_UI, css_sri=SWAGGER_UI_CSS_SRI, js_sri=SWAGGER_UI_JS_SRI, spec=inlined)
