"""OpenAPI v3 documents: ``/openapi/v3`` (the index) and one document per group/version.

kubectl reads these to decide how to validate and patch:

* ``kubectl apply|create|replace`` validate strictly by default. They look, in the group/version
  document, for the PATCH operation carrying the kind's ``x-kubernetes-group-version-kind`` and a
  ``fieldValidation`` query parameter; finding it, they leave validation to the server
  (``?fieldValidation=Strict``) instead of validating against the schema themselves.
* ``kubectl apply`` (client-side) builds a strategic merge patch from the OpenAPI schema only when
  the PATCH operation accepts ``application/strategic-merge-patch+json``. The built-in schemas here
  are deliberately permissive (no patch merge keys), so the PATCH operations do not advertise it:
  kubectl then derives the strategic merge patch from its compiled-in types, which carry the exact
  merge keys, and uses a JSON merge patch for custom kinds, as it does against kube-apiserver.

Invariants: a document is built from one view of the registry and cached, encoded, until
``registry.revision`` changes; the index's ``?hash=`` is the hash of exactly the bytes served for that
group/version, so a client's cache keyed on the URL never serves a stale schema.

``/openapi/v2`` serves an empty Swagger 2.0 document (protobuf when asked, as kubectl does, else JSON):
no definitions and no paths. kubectl needs it to exist only for files of ``kind: List``, which it
validates client-side through v2; finding no model there it skips that step, and the server still
validates every item strictly (``?fieldValidation=Strict``). With no PATCH consumes listed, client-side
apply keeps deriving strategic merge patches from kubectl's compiled-in types.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from kinformer.server.discovery import GIT_VERSION, subresource_verbs
from kinformer.server.protobuf import len_field

if TYPE_CHECKING:
    from kinformer.server.registry import Registry, ResourceInfo

__all__ = ["OpenAPIDocuments", "definition_name", "routes"]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
WATCH_EVENT = META + "WatchEvent"
SCALE = "io.k8s.api.autoscaling.v1.Scale"

_PRESERVE = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_INT32 = {"type": "integer", "format": "int32"}
_INT64 = {"type": "integer", "format": "int64"}
_TIME = {"type": "string", "format": "date-time"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
_BYTES_MAP = {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}}
_STRING_LIST = {"type": "array", "items": {"type": "string", "default": ""}}
_OBJECTS = {"type": "array", "items": _PRESERVE}

# Top-level fields (besides apiVersion, kind and metadata) of the built-in kinds, keyed by (group, kind).
# Values whose shape is not modelled field by field preserve unknown fields, so any valid object passes.
_BUILTIN_FIELDS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "ConfigMap"): {"data": _STRING_MAP, "binaryData": _BYTES_MAP, "immutable": _BOOL},
    ("", "Secret"): {"data": _BYTES_MAP, "stringData": _STRING_MAP, "type": _STRING, "immutable": _BOOL},
    ("", "ServiceAccount"): {"secrets": _OBJECTS, "imagePullSecrets": _OBJECTS,
                             "automountServiceAccountToken": _BOOL},
    ("", "Endpoints"): {"subsets": _OBJECTS},
    ("", "Event"): {
        "involvedObject": _PRESERVE, "reason": _STRING, "message": _STRING, "source": _PRESERVE,
        "firstTimestamp": _TIME, "lastTimestamp": _TIME, "count": _INT32, "type": _STRING,
        "eventTime": {"type": "string", "format": "date-time"}, "series": _PRESERVE, "action": _STRING,
        "related": _PRESERVE, "reportingComponent": _STRING, "reportingInstance": _STRING,
    },
    ("events.k8s.io", "Event"): {
        "eventTime": _TIME, "series": _PRESERVE, "reportingController": _STRING, "reportingInstance": _STRING,
        "action": _STRING, "reason": _STRING, "regarding": _PRESERVE, "related": _PRESERVE, "note": _STRING,
        "type": _STRING, "deprecatedSource": _PRESERVE, "deprecatedFirstTimestamp": _TIME,
        "deprecatedLastTimestamp": _TIME, "deprecatedCount": _INT32,
    },
    ("coordination.k8s.io", "Lease"): {"spec": _PRESERVE},
}
_SPEC_STATUS = {"spec": _PRESERVE, "status": _PRESERVE}

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


def _meta_schemas() -> dict[str, Any]:
    """The apimachinery schemas every group/version document references."""
    owner_ref = {
        "type": "object", "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {"apiVersion": _STRING, "kind": _STRING, "name": _STRING, "uid": _STRING,
                       "controller": _BOOL, "blockOwnerDeletion": _BOOL},
        "x-kubernetes-map-type": "atomic",
    }
    managed = {
        "type": "object",
        "properties": {"manager": _STRING, "operation": _STRING, "apiVersion": _STRING, "time": _TIME,
                       "fieldsType": _STRING, "fieldsV1": _PRESERVE, "subresource": _STRING},
    }
    object_meta = {
        "type": "object",
        "properties": {
            "name": _STRING, "generateName": _STRING, "namespace": _STRING, "selfLink": _STRING, "uid": _STRING,
            "resourceVersion": _STRING, "generation": _INT64, "creationTimestamp": _TIME,
            "deletionTimestamp": _TIME, "deletionGracePeriodSeconds": _INT64, "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
            "ownerReferences": {"type": "array", "items": {"allOf": [_ref(META + "OwnerReference")], "default": {}},
                                "x-kubernetes-list-map-keys": ["uid"], "x-kubernetes-list-type": "map",
                                "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
            "finalizers": {**_STRING_LIST, "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
            "managedFields": {"type": "array", "items": {"allOf": [_ref(META + "ManagedFieldsEntry")],
                                                         "default": {}}},
        },
    }
    list_meta = {"type": "object", "properties": {"continue": _STRING, "remainingItemCount": _INT64,
                                                   "resourceVersion": _STRING, "selfLink": _STRING}}
    status = {
        "type": "object",
        "properties": {"apiVersion": _STRING, "kind": _STRING, "metadata": {"allOf": [_ref(LIST_META)], "default": {}},
                       "status": _STRING, "message": _STRING, "reason": _STRING, "details": _PRESERVE,
                       "code": _INT32},
        "x-kubernetes-group-version-kind": [_gvk("", "v1", "Status")],
    }
    delete_options = {
        "type": "object",
        "properties": {"apiVersion": _STRING, "kind": _STRING, "dryRun": _STRING_LIST,
                       "gracePeriodSeconds": _INT64, "orphanDependents": _BOOL, "preconditions": _PRESERVE,
                       "propagationPolicy": _STRING},
    }
    watch_event = {"type": "object", "required": ["type", "object"],
                   "properties": {"type": _STRING, "object": _PRESERVE}}
    scale = {
        "type": "object",
        "properties": {"apiVersion": _STRING, "kind": _STRING, "metadata": {"allOf": [_ref(OBJECT_META)],
                                                                            "default": {}},
                       "spec": {"type": "object", "properties": {"replicas": _INT32}},
                       "status": {"type": "object", "properties": {"replicas": _INT32, "selector": _STRING}}},
        "x-kubernetes-group-version-kind": [_gvk("autoscaling", "v1", "Scale")],
    }
    return {
        OBJECT_META: object_meta, LIST_META: list_meta, META + "OwnerReference": owner_ref,
        META + "ManagedFieldsEntry": managed, STATUS: status, DELETE_OPTIONS: delete_options,
        PATCH: {"type": "object"}, WATCH_EVENT: watch_event, SCALE: scale,
    }


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
    if not info.builtin:
        return {"type": "object", "properties": meta_props, "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-group-version-kind": gvk}
    fields = _BUILTIN_FIELDS.get((info.group, info.kind), _SPEC_STATUS)
    return {"type": "object", "properties": {**meta_props, **_plain(fields)}, "x-kubernetes-group-version-kind": gvk}


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

    def add(self, info: ResourceInfo, kind_name: str, list_name: str) -> None:
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
        self.paths[item] = self._item_ops(info, gvk, item, scope, kind_name, "", body, write_params, scope_params)
        for sub in info.subresources:
            sub_kind = SCALE if sub == "scale" else kind_name
            sub_gvk = _gvk("autoscaling", "v1", "Scale") if sub == "scale" else gvk
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
        if "get" in verbs:
            ops["get"] = self._op("get", f"read{name}", gvk, (), _response("200", kind_name))
        if "update" in verbs:
            ops["put"] = self._op("put", f"replace{name}", gvk, write_params,
                                  {**_response("200", kind_name), **_response("201", kind_name, "Created")}, body)
        if "patch" in verbs:
            patch_schema = {"schema": _ref(PATCH)}
            content = {"application/json-patch+json": patch_schema, "application/merge-patch+json": patch_schema,
                       "application/apply-patch+yaml": patch_schema}
            ops["patch"] = self._op("patch", f"patch{name}", gvk, (*write_params, "force"),
                                    {**_response("200", kind_name), **_response("201", kind_name, "Created")},
                                    {"content": content, "required": True})
        if "delete" in verbs and not suffix:
            ops["delete"] = self._op("delete", f"delete{name}", gvk,
                                     ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"),
                                     {**_response("200", STATUS), **_response("202", STATUS, "Accepted")},
                                     {"content": _json_content(_ref(DELETE_OPTIONS))})
        return ops


def build_group_version_document(group: str, version: str, resources: list[ResourceInfo]) -> dict[str, Any]:
    """The OpenAPI v3 document of one group/version: its paths and the schemas they reference."""
    schemas = _meta_schemas()
    paths = _PathBuilder(group, version)
    for info in sorted(resources, key=lambda i: i.plural):
        kind_name = definition_name(info.group, info.version, info.kind, info.builtin)
        list_name = kind_name + "List"
        if kind_name not in schemas:
            schemas[kind_name] = _kind_schema(info)
            schemas[list_name] = _list_schema(info, kind_name)
        paths.add(info, kind_name, list_name)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths.paths,
        "components": {"schemas": schemas},
    }


class OpenAPIDocuments:
    """The index and every group/version document, encoded and cached per ``registry.revision``.

    When the revision moves, only the group/versions whose resources changed are re-encoded: a cached
    document is reused while its resources are the very same (immutable) ``ResourceInfo`` objects.
    """

    __slots__ = ("_docs", "_index", "_registry", "_revision")

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._revision: int | None = None
        # "api/v1" | "apis/<g>/<v>" -> (resources it was built from, body, hash)
        self._docs: dict[str, tuple[tuple[ResourceInfo, ...], bytes, str]] = {}
        self._index: bytes = b""

    def _refresh(self) -> None:
        revision = self._registry.revision
        if revision == self._revision:
            return
        by_gv: dict[tuple[str, str], list[ResourceInfo]] = {}
        for info in self._registry.resources():
            by_gv.setdefault((info.group, info.version), []).append(info)
        docs: dict[str, tuple[tuple[ResourceInfo, ...], bytes, str]] = {}
        for (group, version), infos in sorted(by_gv.items()):
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            members = tuple(sorted(infos, key=lambda i: i.plural))
            old = self._docs.get(key)
            if old is not None and len(old[0]) == len(members) and all(
                    a is b for a, b in zip(old[0], members, strict=True)):
                docs[key] = old
                continue
            body = orjson.dumps(build_group_version_document(group, version, list(members)))
            docs[key] = (members, body, hashlib.sha512(body).hexdigest().upper())
        index = {"paths": {key: {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
                           for key, (_, _, digest) in docs.items()}}
        self._docs, self._index, self._revision = docs, orjson.dumps(index), revision

    def index(self) -> bytes:
        """The ``/openapi/v3`` discovery index."""
        self._refresh()
        return self._index

    def document(self, key: str) -> tuple[bytes, str] | None:
        """(body, hash) of ``api/v1`` or ``apis/<group>/<version>``, or None when not served."""
        self._refresh()
        found = self._docs.get(key)
        return None if found is None else found[1:]


V2_PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# gnostic openapi_v2.Document{swagger: "2.0", info: {title, version}, paths: {}}
_V2_PROTOBUF = (len_field(1, b"2.0")
                + len_field(2, len_field(1, b"Kubernetes") + len_field(2, GIT_VERSION.encode()))
                + len_field(8, b""))
_V2_JSON = orjson.dumps({"swagger": "2.0", "info": {"title": "Kubernetes", "version": GIT_VERSION},
                         "paths": {}, "definitions": {}})


def _not_found() -> web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "the server could not find the requested resource", "reason": "NotFound",
              "details": {}, "code": 404}
    return web.Response(status=404, body=orjson.dumps(status), content_type="application/json")


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

    async def get_v2(request: web.Request) -> web.Response:
        if "protobuf" in request.headers.get("Accept", ""):
            return web.Response(body=_V2_PROTOBUF, headers={"Content-Type": V2_PROTOBUF_TYPE})
        return web.Response(body=_V2_JSON, content_type="application/json")

    return [
        web.get("/openapi/v3", get_index, allow_head=True),
        web.get("/openapi/v3/", get_index, allow_head=True),
        web.get("/openapi/v3/{path:.+}", get_document, allow_head=True),
        web.get("/openapi/v2", get_v2, allow_head=True),
    ]
