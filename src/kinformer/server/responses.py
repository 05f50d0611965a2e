"""Response bodies: JSON responses and objects re-served under another version or revision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from .watchcache import CachedObject

# A response copies the headers it is given; from a CIMultiDict that copy is about half the cost of
# having aiohttp set the content type itself.
JSON_HEADERS = CIMultiDict({"Content-Type": "application/json"})


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    if headers:
        return web.Response(status=status, body=data, content_type="application/json", headers=headers)
    return web.Response(status=status, body=data, headers=JSON_HEADERS)


def reencode(co: CachedObject, api_version: str) -> bytes:
    """Object bytes served under another version of the same resource (CRD "None" conversion)."""
    if co.obj.get("apiVersion") == api_version:
        return co.raw
    obj = dict(co.obj)
    obj["apiVersion"] = api_version
    return orjson.dumps(obj)


def at_revision(obj: Mapping[str, Any], rev: int, api_version: str) -> bytes:
    """``obj`` (left untouched) served under ``api_version`` with ``metadata.resourceVersion`` set to ``rev``."""
    out = dict(obj)
    out["apiVersion"] = api_version
    meta = out.get("metadata")
    out["metadata"] = {**(meta if isinstance(meta, dict) else {}), "resourceVersion": str(rev)}
    return orjson.dumps(out)
