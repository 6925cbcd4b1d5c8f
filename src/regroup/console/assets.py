"""The dashboard's static files: the files of this package's ``assets/`` directory, read through
``importlib.resources`` (so an installed wheel serves them too), each with its content type. A name is one plain
file name (letters, digits, ``.``, ``-``, ``_``; not starting with a dot): no directories, so no path leaves the
directory. A missing directory or file is a 404."""

from __future__ import annotations

import importlib.resources
import re
from typing import Final

from regroup.console.http import Response, text

__all__ = ["INDEX", "asset"]

INDEX: Final = "index.html"
_NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".woff2": "font/woff2",
}
SECURITY_HEADERS: Final = (("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-cache"))


def asset(name: str) -> Response:
    """The file ``name`` of the assets directory, or a 404."""
    if not _NAME.fullmatch(name) or ".." in name:
        return text(404, "no such asset")
    try:
        resource = importlib.resources.files(__package__ or "regroup.console").joinpath("assets").joinpath(name)
        if not resource.is_file():
            return text(404, "no such asset")
        body = resource.read_bytes()
    except (OSError, ValueError):
        return text(404, "no such asset")
    suffix = name[name.rfind(".") :] if "." in name else ""
    content_type = CONTENT_TYPES.get(suffix.lower(), "application/octet-stream")
    return Response(200, body, content_type, SECURITY_HEADERS)
