"""``/openapi/v2``: the whole API as one Swagger 2.0 document, as JSON and as gnostic protobuf.

The document is derived from the v3 group/version documents (:mod:`kinformer.server.schema.openapi`): the same
paths, each operation rewritten in Swagger 2.0 form (a ``body`` parameter, typed query parameters, response
schemas, ``consumes``/``produces``), and every definition they reference under ``#/definitions/``. kubectl asks
for the protobuf form (``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``: gnostic's
``openapi_v2.Document``), which carries the definitions (what ``kubectl explain --output plaintext-openapiv2``
and client-side validation read) with their vendor extensions as YAML; its paths are left empty.

Invariants: both encodings are built on first request and cached until ``registry.revision`` changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from kinformer.server.endpoints.discovery import GIT_VERSION
from kinformer.server.schema import apidefs
from kinformer.server.schema.protobuf import len_field, varint_field

if TYPE_CHECKING:
    from kinformer.server.registry.resources import Registry, ResourceInfo

__all__ = ["V2_PROTOBUF_TYPE", "SwaggerDocument", "build_swagger"]

#: (group, version, its resources) -> (paths, names of the kube definitions they reference, custom kinds'
#: schemas), written with v3 references: :func:`kinformer.server.schema.openapi.group_version_parts`.
GroupVersionParts = Callable[[str, str, "list[ResourceInfo]"], tuple[dict[str, Any], set[str], dict[str, Any]]]

V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
V2_REF = "#/definitions/"
_V3_REF = "#/components/schemas/"


def _v2_parameter(param: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in param.items() if k != "schema"}
    out.update(param.get("schema") or {})
    return out


def _v2_operation(op: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in op.items() if k not in ("parameters", "requestBody", "responses")}
    params = [_v2_parameter(p) for p in op.get("parameters") or ()]
    body = op.get("requestBody")
    if body:
        content = body.get("content") or {}
        first: dict[str, Any] = next(iter(content.values()), {})
        schema = first.get("schema", {})
        params.append({"name": "body", "in": "body", "required": bool(body.get("required")), "schema": schema})
        out["consumes"] = list(content)
    out["parameters"] = params
    responses: dict[str, Any] = {}
    produces: list[str] = []
    for code, response in (op.get("responses") or {}).items():
        entry = {"description": response.get("description", "")}
        content = response.get("content") or {}
        if content:
            entry["schema"] = next(iter(content.values())).get("schema", {})
            produces += [m for m in content if m not in produces]
        responses[code] = entry
    out["responses"] = responses
    if produces:
        out["produces"] = produces
    out["schemes"] = ["https"]
    return out


def _v2_paths(paths: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, item in paths.items():
        converted: dict[str, Any] = {}
        for key, value in item.items():
            if key == "parameters":
                converted[key] = [_v2_parameter(p) for p in value]
            else:
                converted[key] = _v2_operation(value)
        out[path] = converted
    return out


def build_swagger(resources: list[ResourceInfo], group_version_parts: GroupVersionParts) -> bytes:
    """The Swagger 2.0 document of ``resources``, encoded as JSON, from their v3 ``group_version_parts``."""
    by_gv: dict[tuple[str, str], list[ResourceInfo]] = {}
    for info in resources:
        by_gv.setdefault((info.group, info.version), []).append(info)
    paths: dict[str, Any] = {}
    wanted: set[str] = set()
    own: dict[str, Any] = {}
    for (group, version), infos in sorted(by_gv.items()):
        gv_paths, gv_wanted, gv_own = group_version_parts(group, version, infos)
        paths.update(_v2_paths(gv_paths))
        wanted |= gv_wanted
        own.update(gv_own)
    definitions: dict[str, Any] = {
        name: apidefs.openapi_definition(name, V2_REF, False) for name in apidefs.closure(wanted)}
    definitions.update(own)
    doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": GIT_VERSION}, "paths": paths,
           "definitions": definitions}
    # paths and custom kinds' schemas were written with v3 references
    return orjson.dumps(doc).replace(_V3_REF.encode(), V2_REF.encode())


# ------------------------------------------------------------------------------- gnostic protobuf encoding

def _named(number: int, name: str, value: bytes) -> bytes:
    return len_field(number, len_field(1, name.encode()) + len_field(2, value))


def _any_yaml(value: Any) -> bytes:
    """gnostic ``Any`` with its ``yaml`` field: JSON text is YAML."""
    return len_field(2, orjson.dumps(value))


_SCALAR_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13, "discriminator": 26}
_SCALAR_INTS = {"maxLength": 11, "minLength": 12, "maxItems": 14, "minItems": 15, "maxProperties": 17,
                "minProperties": 18}


def _schema(schema: dict[str, Any]) -> bytes:
    """gnostic ``openapi_v2.Schema`` of one JSON schema node."""
    out = bytearray()
    for key, value in schema.items():
        if key in _SCALAR_STRINGS and isinstance(value, str):
            out += len_field(_SCALAR_STRINGS[key], value.encode())
        elif key in _SCALAR_INTS and isinstance(value, int):
            out += varint_field(_SCALAR_INTS[key], value)
        elif key == "required":
            out += b"".join(len_field(19, str(v).encode()) for v in value)
        elif key == "enum":
            out += b"".join(len_field(20, _any_yaml(v)) for v in value)
        elif key == "default":
            out += len_field(5, _any_yaml(value))
        elif key == "additionalProperties":
            item = len_field(1, _schema(value)) if isinstance(value, dict) else varint_field(2, int(bool(value)))
            out += len_field(21, item)
        elif key == "type":
            types = value if isinstance(value, list) else [value]
            out += len_field(22, b"".join(len_field(1, str(t).encode()) for t in types))
        elif key == "items" and isinstance(value, dict):
            out += len_field(23, len_field(1, _schema(value)))
        elif key == "allOf":
            out += b"".join(len_field(24, _schema(v)) for v in value)
        elif key == "properties":
            out += len_field(25, b"".join(_named(1, name, _schema(sub)) for name, sub in value.items()))
        elif key == "readOnly":
            out += varint_field(27, int(bool(value)))
        elif key.startswith("x-"):
            out += _named(31, key, _any_yaml(value))
    return bytes(out)


def encode_document(doc: dict[str, Any]) -> bytes:
    """gnostic ``openapi_v2.Document`` with swagger, info and definitions (paths left empty)."""
    info = len_field(1, doc["info"]["title"].encode()) + len_field(2, doc["info"]["version"].encode())
    definitions = b"".join(_named(1, name, _schema(schema)) for name, schema in doc["definitions"].items())
    return len_field(1, doc["swagger"].encode()) + len_field(2, info) + len_field(8, b"") + len_field(9, definitions)


class SwaggerDocument:
    """The ``/openapi/v2`` document of a registry, in both encodings, cached per ``registry.revision``."""

    __slots__ = ("_cache", "_parts", "_registry", "_revision")

    def __init__(self, registry: Registry, group_version_parts: GroupVersionParts) -> None:
        self._registry = registry
        self._parts = group_version_parts
        self._revision: int | None = None
        self._cache: dict[str, bytes] = {}

    def _get(self, key: str) -> bytes:
        if self._registry.revision != self._revision:
            self._cache, self._revision = {}, self._registry.revision
        body = self._cache.get(key)
        if body is None:
            if "json" not in self._cache:
                self._cache["json"] = build_swagger(self._registry.resources(), self._parts)
            if key == "protobuf":
                self._cache["protobuf"] = encode_document(orjson.loads(self._cache["json"]))
            body = self._cache[key]
        return body

    def json(self) -> bytes:
        return self._get("json")

    def protobuf(self) -> bytes:
        return self._get("protobuf")
