"""OpenAPI documents: ``/openapi/v3`` (the index), one v3 document per group/version, and ``/openapi/v2``.

Built-in kinds are described by kube 1.32's own definitions (:mod:`kinformer.server.schema.apidefs`): descriptions for
``kubectl explain`` at any depth, and the ``x-kubernetes-patch-merge-key``/``-patch-strategy`` and
``x-kubernetes-list-type``/``-list-map-keys`` extensions kubectl reads to build strategic merge patches and that
server-side apply follows. Custom kinds are described by their CRD version's schema (or preserve unknown fields).

kubectl reads these to decide how to validate and patch:

* ``kubectl apply|create|replace`` validate strictly by default. They look, in the group/version
  document, for the PATCH operation carrying the kind's ``x-kubernetes-group-version-kind`` and a
  ``fieldValidation`` query parameter; finding it, they leave validation to the server
  (``?fieldValidation=Strict``) instead of validating against the schema themselves.
* client-side ``kubectl apply`` builds a strategic merge patch from the schema when the PATCH operation accepts
  ``application/strategic-merge-patch+json`` (built-ins, as kube-apiserver), and a JSON merge patch otherwise
  (custom kinds).

Invariants: a document is built from one view of the registry and cached, encoded, until
``registry.revision`` changes; the index's ``?hash=`` is the hash of exactly the bytes served for that
group/version, so a client's cache keyed on the URL never serves a stale schema. Nothing is built (and the
definitions are not read) before a client asks for a document.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from kinformer.server.endpoints.discovery import GIT_VERSION, subresource_kind, subresource_verbs
from kinformer.server.machinery.status import json_body
from kinformer.server.registry.resources import KUBELET_SUBRESOURCES
from kinformer.server.schema import apidefs
from kinformer.server.schema.openapi_v2 import V2_PROTOBUF_TYPE, SwaggerDocument

if TYPE_CHECKING:
    from kinformer.server.registry.resources import Registry, ResourceInfo

__all__ = ["OpenAPIDocuments", "definition_name", "group_version_parts", "routes"]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
WATCH_EVENT = META + "WatchEvent"
SCALE = "io.k8s.api.autoscaling.v1.Scale"

_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}

# Groups whose Go package path differs from "io.k8s.api.<first label>".
_PACKAGE_PREFIX = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
    "apiregistration.k8s.io": "io.k8s.kube-aggregator.pkg.apis.apiregistration",
}

_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    "allowWatchBookmarks": _BOOL, "continue": _STRING, "fieldSelector": _STRING, "labelSelector": _STRING,
    "limit": {"type": "integer"}, "resourceVersion": _STRING, "resourceVersionMatch": _STRING,
    "sendInitialEvents": _BOOL, "timeoutSeconds": {"type": "integer"}, "watch": _BOOL, "dryRun": _STRING,
    "fieldManager": _STRING, "fieldValidation": _STRING, "force": _BOOL, "gracePeriodSeconds": {"type": "integer"},
    "propagationPolicy": _STRING, "orphanDependents": _BOOL, "pretty": _STRING,
}
_PARAM_DESCRIPTIONS = {
    "fieldValidation": "instructs the server on how to handle objects in the request containing unknown or "
                       "duplicate fields: Ignore, Warn or Strict (the default).",
    "dryRun": "when present, modifications are not persisted; the only valid value is All.",
    "fieldManager": "a name associated with the actor or entity making these changes.",
    "force": "force apply requests: re-acquire conflicting fields owned by other managers.",
}


def definition_name(group: str, version: str, kind: str, builtin: bool = True) -> str:
    """The OpenAPI definition name kube-apiserver uses for a kind.

    Built-ins follow their Go package (``io.k8s.api.core.v1.ConfigMap``, ``io.k8s.api.apps.v1.Deployment``);
    custom kinds reverse the group's DNS labels (``example.com`` -> ``com.example.v1.Foo``).
    """
    if builtin or group in _PACKAGE_PREFIX:
        prefix = _PACKAGE_PREFIX.get(group) or f"io.k8s.api.{group.split('.', 1)[0]}"
        return f"{prefix}.{version}.{kind}"
    return ".".join([*reversed(group.split(".")), version, kind])


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _operation_prefix(group: str, version: str) -> str:
    """``CoreV1``, ``AppsV1``, ``CoordinationV1``, ``ExampleComV1``: kube's operationId prefix."""
    if not group:
        return f"Core{version.capitalize()}"
    name = group.removesuffix(".k8s.io")
    return "".join(part.capitalize() for part in name.replace("-", ".").split(".")) + version.capitalize()


_META_DEFINITIONS = (OBJECT_META, LIST_META, STATUS, DELETE_OPTIONS, PATCH, WATCH_EVENT)
V3_REF = "#/components/schemas/"


def _definitions(names: set[str], ref_prefix: str = V3_REF, wrap_refs: bool = True) -> dict[str, Any]:
    """``names`` and every definition they refer to, in OpenAPI form (shared, read-only values)."""
    return {name: apidefs.openapi_definition(name, ref_prefix, wrap_refs) for name in apidefs.closure(names)}


def _builtin_name(group: str, version: str, kind: str) -> str | None:
    return apidefs.definition_name(group, version, kind)


def _plain(value: Any) -> Any:
    """A deep copy of a schema made only of dicts, lists and scalars (registry schemas may be Mappings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return copy.copy(value)


def _kind_schema(info: ResourceInfo) -> dict[str, Any]:
    """The schema of one kind: its CRD schema, or a typed-but-permissive schema for a built-in."""
    gvk = [_gvk(info.group, info.version, info.kind)]
    meta_props = {
        "apiVersion": {"type": "string", "description": "the versioned schema of this representation of an object"},
        "kind": {"type": "string", "description": "the REST resource this object represents"},
        "metadata": {"allOf": [_ref(OBJECT_META)], "default": {}},
    }
    if info.schema is not None:
        schema = _plain(info.schema)
        schema.setdefault("type", "object")
        props = schema.setdefault("properties", {})
        for name, value in meta_props.items():
            if name == "metadata" or name not in props:
                props[name] = value
        schema["x-kubernetes-group-version-kind"] = gvk
        return schema
    return {"type": "object", "properties": meta_props, "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": gvk}


def _list_schema(info: ResourceInfo, item_name: str) -> dict[str, Any]:
    return {
        "type": "object", "required": ["items"],
        "properties": {"apiVersion": _STRING, "kind": _STRING,
                       "items": {"type": "array", "items": {"allOf": [_ref(item_name)], "default": {}}},
                       "metadata": {"allOf": [_ref(LIST_META)], "default": {}}},
        "x-kubernetes-group-version-kind": [_gvk(info.group, info.version, info.kind + "List")],
    }


def _query(name: str) -> dict[str, Any]:
    param: dict[str, Any] = {"name": name, "in": "query", "schema": dict(_PARAM_SCHEMAS[name])}
    if name in _PARAM_DESCRIPTIONS:
        param["description"] = _PARAM_DESCRIPTIONS[name]
    param["uniqueItems"] = True
    return param


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "uniqueItems": True,
            "description": f"{name} of the object"}


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}, "application/yaml": {"schema": schema}}


def _response(code: str, schema_name: str, description: str = "OK") -> dict[str, Any]:
    return {code: {"description": description, "content": _json_content(_ref(schema_name))}}


class _PathBuilder:
    """Builds the ``paths`` of one group/version from its resources."""

    __slots__ = ("base", "group", "paths", "prefix", "version")

    def __init__(self, group: str, version: str) -> None:
        self.group, self.version = group, version
        self.base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        self.prefix = _operation_prefix(group, version)
        self.paths: dict[str, dict[str, Any]] = {}

    def _op(self, action: str, op_id: str, gvk: dict[str, str], params: tuple[str, ...], responses: dict[str, Any],
            body: dict[str, Any] | None = None) -> dict[str, Any]:
        op: dict[str, Any] = {"operationId": op_id, "parameters": [_query(p) for p in params],
                              "responses": {**responses, "401": {"description": "Unauthorized"}},
                              "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
        if body is not None:
            op["requestBody"] = body
        return op

    def add(self, info: ResourceInfo, kind_name: str, list_name: str, names: dict[str, str]) -> None:
        """Paths of ``info``; ``names`` maps a subresource to the definition its objects use (default: the kind)."""
        verbs = set(info.verbs)
        gvk = _gvk(info.group, info.version, info.kind)
        scope = "Namespaced" if info.namespaced else ""
        collection = (f"{self.base}/namespaces/{{namespace}}/{info.plural}" if info.namespaced
                      else f"{self.base}/{info.plural}")
        item = collection + "/{name}"
        scope_params = [_path_param("namespace")] if info.namespaced else []
        body = {"content": _json_content(_ref(kind_name)), "required": True}
        write_params = ("dryRun", "fieldManager", "fieldValidation")

        coll: dict[str, Any] = {"parameters": [*scope_params, _query("pretty")]}
        if "list" in verbs:
            coll["get"] = self._op("list", f"list{self.prefix}{scope}{info.kind}", gvk, _LIST_PARAMS,
                                   _response("200", list_name))
        if "create" in verbs:
            coll["post"] = self._op("post", f"create{self.prefix}{scope}{info.kind}", gvk, write_params,
                                    {**_response("200", kind_name), **_response("201", kind_name, "Created"),
                                     **_response("202", kind_name, "Accepted")}, body)
        if "deletecollection" in verbs:
            coll["delete"] = self._op("deletecollection", f"deletecollection{self.prefix}{scope}{info.kind}", gvk,
                                      (*_LIST_PARAMS, "dryRun", "gracePeriodSeconds", "propagationPolicy"),
                                      _response("200", STATUS),
                                      {"content": _json_content(_ref(DELETE_OPTIONS))})
        self.paths[collection] = coll
        if info.namespaced and "list" in verbs:
            self.paths[f"{self.base}/{info.plural}"] = {
                "parameters": [_query("pretty")],
                "get": self._op("list", f"list{self.prefix}{info.kind}ForAllNamespaces", gvk, _LIST_PARAMS,
                                _response("200", list_name)),
            }
        if verbs & {"get", "update", "patch", "delete"}:
            self.paths[item] = self._item_ops(info, gvk, item, scope, kind_name, "", body, write_params,
                                              scope_params)
        for sub in info.subresources:
            if sub in KUBELET_SUBRESOURCES:
                continue  # connect operations: nothing a client reads a schema for
            sub_kind = names.get(sub, kind_name)
            sub_gvk = _gvk(*subresource_kind(info, sub))
            sub_body = {"content": _json_content(_ref(sub_kind)), "required": True}
            self.paths[f"{item}/{sub}"] = self._item_ops(
                info, sub_gvk, f"{item}/{sub}", scope, sub_kind, sub.capitalize(), sub_body, write_params,
                scope_params, verbs=set(subresource_verbs(info, sub)))

    def _item_ops(self, info: ResourceInfo, gvk: dict[str, str], path: str, scope: str, kind_name: str,
                  suffix: str, body: dict[str, Any], write_params: tuple[str, ...],
                  scope_params: list[dict[str, Any]], verbs: set[str] | None = None) -> dict[str, Any]:
        verbs = set(info.verbs) if verbs is None else verbs
        name = f"{self.prefix}{scope}{info.kind}{suffix}"
        ops: dict[str, Any] = {"parameters": [_path_param("name"), *scope_params, _query("pretty")]}
        if "create" in verbs:  # eviction, binding, token
            ops["post"] = self._op("post", f"create{name}", gvk, write_params,
                                   {**_response("200", kind_name), **_response("201", kind_name, "Created"),
                                    **_response("202", kind_name, "Accepted")}, body)
        if "get" in verbs:
            ops["get"] = self._op("get", f"read{name}", gvk, (), _response("200", kind_name))
        if "update" in verbs:
            ops["put"] = self._op("put", f"replace{name}", gvk, write_params,
                                  {**_response("200", kind_name), **_response("201", kind_name, "Created")}, body)
        if "patch" in verbs:
            patch_schema = {"schema": _ref(PATCH)}
            content = {"application/apply-patch+yaml": patch_schema, "application/json-patch+json": patch_schema,
                       "application/merge-patch+json": patch_schema}
            if info.builtin:
                content["application/strategic-merge-patch+json"] = patch_schema
            ops["patch"] = self._op("patch", f"patch{name}", gvk, (*write_params, "force"),
                                    {**_response("200", kind_name), **_response("201", kind_name, "Created")},
                                    {"content": content, "required": True})
        if "delete" in verbs and not suffix:
            ops["delete"] = self._op("delete", f"delete{name}", gvk,
                                     ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"),
                                     {**_response("200", STATUS), **_response("202", STATUS, "Accepted")},
                                     {"content": _json_content(_ref(DELETE_OPTIONS))})
        return ops


def _subresource_names(info: ResourceInfo, kind_name: str) -> dict[str, str]:
    """Subresource -> the definition its objects use (Scale, Eviction, Binding, TokenRequest, or the kind)."""
    names = {}
    for sub in info.subresources:
        group, version, kind = subresource_kind(info, sub)
        if (group, version, kind) != (info.group, info.version, info.kind):
            names[sub] = _builtin_name(group, version, kind) or SCALE
        else:
            names[sub] = kind_name
    return names


def group_version_parts(group: str, version: str, resources: list[ResourceInfo]
                        ) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    """(paths, names of the kube definitions they reference, schemas of custom kinds) of one group/version."""
    own: dict[str, Any] = {}
    wanted = set(_META_DEFINITIONS)
    paths = _PathBuilder(group, version)
    for info in sorted(resources, key=lambda i: i.plural):
        kind_name = _builtin_name(info.group, info.version, info.kind) if info.builtin else None
        list_name = _builtin_name(info.group, info.version, info.kind + "List") if kind_name else None
        if kind_name is None or list_name is None:
            kind_name = definition_name(info.group, info.version, info.kind, info.builtin)
            list_name = kind_name + "List"
            own[kind_name] = _kind_schema(info)
            own[list_name] = _list_schema(info, kind_name)
        else:
            wanted |= {kind_name, list_name}
        names = _subresource_names(info, kind_name)
        wanted |= {n for n in names.values() if n not in own}
        paths.add(info, kind_name, list_name, names)
    return paths.paths, wanted, own


def build_group_version_document(group: str, version: str, resources: list[ResourceInfo]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group/version: its paths and the schemas they reference."""
    paths, wanted, own = group_version_parts(group, version, resources)
    schemas = _definitions(wanted)
    schemas.update(own)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class OpenAPIDocuments:
    """The index and every group/version document, cached per ``registry.revision``.

    A document is built and encoded only when a client asks for it. Its hash is computed from what the
    document is built from (the kube release and the group/version's immutable ``ResourceInfo`` objects,
    CRD schemas included), so the index needs no document built, and an unchanged group/version keeps its
    hash (and its cached body) when the registry moves.
    """

    __slots__ = ("_bodies", "_index", "_members", "_registry", "_revision")

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._revision: int | None = None
        # "api/v1" | "apis/<g>/<v>" -> (resources, hash); built bodies by hash
        self._members: dict[str, tuple[tuple[ResourceInfo, ...], str]] = {}
        self._bodies: dict[str, bytes] = {}
        self._index: bytes = b""

    def _refresh(self) -> None:
        revision = self._registry.revision
        if revision == self._revision:
            return
        by_gv: dict[tuple[str, str], list[ResourceInfo]] = {}
        for info in self._registry.resources():
            by_gv.setdefault((info.group, info.version), []).append(info)
        members: dict[str, tuple[tuple[ResourceInfo, ...], str]] = {}
        for (group, version), infos in sorted(by_gv.items()):
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            sorted_infos = tuple(sorted(infos, key=lambda i: i.plural))
            seed = repr((GIT_VERSION, apidefs.KUBE_RELEASE, sorted_infos)).encode()
            members[key] = (sorted_infos, hashlib.sha512(seed).hexdigest().upper())
        live = {digest for _, digest in members.values()}
        self._bodies = {d: b for d, b in self._bodies.items() if d in live}
        index = {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
                           for key, (_, digest) in members.items()}}
        self._members, self._index, self._revision = members, orjson.dumps(index), revision

    def index(self) -> bytes:
        """The ``/openapi/v3`` discovery index."""
        self._refresh()
        return self._index

    def document(self, key: str) -> tuple[bytes, str] | None:
        """(body, hash) of ``api/v1`` or ``apis/<group>/<version>``, or None when not served."""
        self._refresh()
        found = self._members.get(key)
        if found is None:
            return None
        infos, digest = found
        body = self._bodies.get(digest)
        if body is None:
            doc = build_group_version_document(infos[0].group, infos[0].version, list(infos))
            body = self._bodies[digest] = orjson.dumps(doc)
        return body, digest


def _not_found() -> web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "the server could not find the requested resource", "reason": "NotFound",
              "details": {}, "code": 404}
    return web.Response(status=404, body=json_body(status), content_type="application/json")


def routes(registry: Registry) -> list[web.RouteDef]:
    """aiohttp route definitions for ``/openapi/v3``, its per-group/version documents and ``/openapi/v2``."""
    docs = OpenAPIDocuments(registry)

    async def get_index(request: web.Request) -> web.Response:
        return web.Response(body=docs.index(), content_type="application/json",
                            headers={"Cache-Control": "no-cache, private"})

    async def get_document(request: web.Request) -> web.Response:
        found = docs.document(request.match_info["path"].strip("/"))
        if found is None:
            return _not_found()
        body, digest = found
        etag = f'"{digest}"'
        headers = {"ETag": etag, "Vary": "Accept"}
        if request.query.get("hash") == digest:
            headers["Cache-Control"] = "public, immutable, max-age=31536000"
        else:
            headers["Cache-Control"] = "no-cache, private"
        if etag in (request.headers.get("If-None-Match") or ""):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, content_type="application/json", headers=headers)

    v2 = SwaggerDocument(registry, group_version_parts)

    async def get_v2(request: web.Request) -> web.Response:
        if "protobuf" in request.headers.get("Accept", ""):
            return web.Response(body=v2.protobuf(), headers={"Content-Type": V2_PROTOBUF_TYPE})
        return web.Response(body=v2.json(), content_type="application/json")

    return [
        web.get("/openapi/v3", get_index, allow_head=True),
        web.get("/openapi/v3/", get_index, allow_head=True),
        web.get("/openapi/v3/{path:.+}", get_document, allow_head=True),
        web.get("/openapi/v2", get_v2, allow_head=True),
    ]
