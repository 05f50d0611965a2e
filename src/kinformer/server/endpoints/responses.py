"""Response bodies: JSON responses and objects re-served under another version or revision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from ..machinery.status import json_body
from ..schema.builtin_conversion import served_as
from ..storage.watchcache import CachedObject

# A response copies the headers it is given; from a CIMultiDict that copy is about half the cost of
# having aiohttp set the content type itself.
JSON_HEADERS = CIMultiDict({"Content-Type": "application/json"})


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """``body`` (a document, or its JSON bytes) as a JSON response ending with a newline, as kube's are."""
    if not isinstance(body, bytes):
        data = json_body(body)
    elif body.endswith(b"\n"):
        data = body
    else:
        data = body + b"\n"
    if headers:
        return web.Response(status=status, body=data, content_type="application/json", headers=headers)
    return web.Response(status=status, body=data, headers=JSON_HEADERS)


def reencode(co: CachedObject, api_version: str) -> bytes:
    """Object bytes served under another version of the same resource (CRD "None" conversion; a built-in
    kind stored in another version is converted, see :func:`.schema.builtin_conversion.served_as`)."""
    if co.api_version == api_version:
        return co.raw
    return orjson.dumps(served_as(co.obj, api_version))


def at_revision(obj: Mapping[str, Any], rev: int, api_version: str) -> bytes:
    """``obj`` (left untouched) served under ``api_version`` with ``metadata.resourceVersion`` set to ``rev``."""
    out = served_as(dict(obj), api_version) if obj.get("apiVersion") != api_version else dict(obj)
    meta = out.get("metadata")
    out["metadata"] = {**(meta if isinstance(meta, dict) else {}), "resourceVersion": str(rev)}
    return orjson.dumps(out)
