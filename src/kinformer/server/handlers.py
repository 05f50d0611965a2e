"""HTTP handlers of the resource API: ``/api/v1/...`` and ``/apis/<group>/<version>/...``.

Parses the path and query into a :class:`Target`, then serves get/list/watch from the watch cache
(or storage history when a request needs an older consistent snapshot) and the writes through
:class:`~kinformer.server.objects.ObjectStore`. Every failure is a :class:`StatusError`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import yaml
from aiohttp import web

from ..clock import Clock
from ..errors import SelectorError
from ..selectors import (
    FieldSelector,
    LabelSelector,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
)
from . import status as st
from . import tables
from .apply import update_managed_fields
from .objects import MAX_RETRIES, ObjectStore, parse_rv, served, timestamp, validate
from .registry import Registry, ResourceInfo
from .storage.base import Compacted, FutureRevision, KeyNotFound, RevisionMismatch, Storage, WatcherTooSlow
from .validation import unknown_fields
from .watchcache import CachedEvent, CachedObject, WatchCache, Watcher, decode

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
RV_WAIT_SECONDS = 3.0
DEFAULT_WATCH_TIMEOUT = 1800.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_FALSE = ("0", "false", "False", "FALSE")
# Bodies sent without a meaningful type (no header, or a client's default) are sniffed: JSON, else YAML.
_GENERIC_TYPES = ("application/octet-stream", "*/*", "text/plain")
_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")
_BUILTIN_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
}


def truthy(value: str | None) -> bool:
    return value is not None and value not in _FALSE


@dataclass(slots=True)
class Target:
    """What a request addresses: a resource, optionally a namespace, an object and a subresource."""

    info: ResourceInfo
    namespace: str
    name: str
    subresource: str
    watch: bool


# ------------------------------------------------------------------------------------------ selectors


class Filter:
    """Label + field selector of a list or watch; ``None`` members mean "match everything"."""

    __slots__ = ("fields", "labels")

    def __init__(self, labels: LabelSelector | None, fields: FieldSelector | None) -> None:
        self.labels = labels
        self.fields = fields

    @property
    def empty(self) -> bool:
        return self.labels is None and self.fields is None

    def __call__(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.labels is not None and not self.labels.matches(meta.get("labels") or {}):
            return False
        if self.fields is not None:
            values = {}
            for req in self.fields.requirements:
                values[req.field] = field_value(obj, req.field)
            if not self.fields.matches(values):
                return False
        return True


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of the value at a dotted ``path`` ("" when absent), as field selectors compare it."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def make_filter(info: ResourceInfo, query: Mapping[str, str]) -> Filter:
    """Parse ``labelSelector``/``fieldSelector``; 400 when either is malformed or names an unsupported field."""
    labels = fields = None
    try:
        text = query.get("labelSelector", "")
        if text:
            labels = parse_label_selector(text)
            if labels.empty():
                labels = None
        text = query.get("fieldSelector", "")
        if text:
            fields = parse_field_selector(text)
            if fields.empty():
                fields = None
    except SelectorError as e:
        raise st.bad_request(f"unable to parse requirement: {e}" if "requirement" not in str(e) else str(e)) from None
    if fields is not None:
        allowed = {"metadata.name", "metadata.namespace"}
        allowed.update(f.lstrip(".") for f in info.selectable_fields)
        if info.builtin:
            allowed.update(_BUILTIN_FIELDS.get((info.group, info.plural), ()))
        for req in fields.requirements:
            if req.field not in allowed:
                raise st.bad_request(f'field label not supported: {req.field}')
    return Filter(labels, fields)


# ------------------------------------------------------------------------------------------ continue tokens


def encode_continue(rv: int, key: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        pad = "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(token + pad))
        rv, start = data["rv"], data["start"]
        if not isinstance(rv, int) or isinstance(rv, bool) or not isinstance(start, str):
            raise TypeError("continue token fields have the wrong types")
    except Exception:
        raise st.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                             "meta.k8s.io/v1)") from None
    if data.get("v") != "meta.k8s.io/v1" or ".." in start or start.startswith("/"):
        raise st.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                             "meta.k8s.io/v1)")
    return rv, start


# ------------------------------------------------------------------------------------------ bodies


def _content_type(request: web.Request) -> str:
    raw = request.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


async def read_body(request: web.Request) -> bytes:
    """The request body; 413 when it exceeds 3 MiB."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}") from None


class _JSONYamlLoader(yaml.SafeLoader):
    """A safe YAML loader that, like sigs.k8s.io/yaml, leaves unquoted dates and times as strings."""


_JSONYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class _NotJSON(ValueError):
    """A YAML value with no JSON equivalent."""


def _yaml_key(key: Any) -> str:
    """A mapping key as JSON sees it: scalars are stringified (``true``/``false``/``null`` spelled the YAML way)."""
    if isinstance(key, str):
        return _json_string(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return str(key)
    raise _NotJSON(f"unsupported map key of type {type(key).__name__}")


def _json_string(text: str) -> str:
    """``text`` with escaped UTF-16 surrogate pairs joined; a lone surrogate is not valid JSON text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            raise _NotJSON("invalid Unicode: unpaired surrogate in string") from None
    return text


def _to_json_value(value: Any) -> Any:
    """A YAML document as JSON data (kube converts YAML to JSON before decoding); :class:`_NotJSON` otherwise."""
    if isinstance(value, str):
        return _json_string(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _NotJSON(f"unsupported value: {value}")
        return value
    if isinstance(value, dict):
        return {_yaml_key(k): _to_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json_value(v) for v in value]
    raise _NotJSON(f"unsupported value of type {type(value).__name__}")


def parse_document(body: bytes, content_type: str) -> Any:
    """Decode a JSON / YAML / Kubernetes-protobuf body; 400 on malformed input, 415 on an unknown type."""
    if not body.strip():
        raise st.bad_request("the body of the request was empty")
    if content_type in _GENERIC_TYPES:
        content_type = ""
    if content_type in ("", "application/json") or content_type.endswith("+json"):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as e:
            if content_type.endswith("+json") or content_type == "application/json":
                raise st.bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    if content_type in ("", "application/yaml", "application/x-yaml", "text/yaml") or content_type.endswith("+yaml"):
        try:
            return _to_json_value(yaml.load(body, Loader=_JSONYamlLoader))
        except (yaml.YAMLError, _NotJSON, RecursionError) as e:
            raise st.bad_request(f"error converting YAML to JSON: {e}") from None
    if content_type == "application/vnd.kubernetes.protobuf":
        from .protobuf import decode_k8s_protobuf

        try:
            return decode_k8s_protobuf(body)
        except Exception as e:
            raise st.bad_request(f"unable to decode protobuf body: {e}") from None
    raise st.unsupported_media_type(content_type)


_QUOTE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _quote_warning(text: str) -> str:
    """``text`` as the quoted-string of a Warning header, escaped as Go's strconv.Quote does (kube's form).

    The result holds no control characters, so a client-chosen field name can never break the header.
    """
    out = ['"']
    for ch in text:
        esc = _QUOTE_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _object(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise st.bad_request("Object 'Kind' is missing in the request body: expected a JSON object")
    meta = doc.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise st.bad_request("json: cannot unmarshal into Go struct field Object.metadata of type v1.ObjectMeta")
    return doc


def _check_kind(info: ResourceInfo, obj: Mapping[str, Any]) -> None:
    """400 when the body names another kind/version, or (built-ins) has a non-object spec or status."""
    if info.builtin:
        for part in ("spec", "status"):
            value = obj.get(part)
            if value is not None and not isinstance(value, dict):
                raise st.bad_request(f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                                     f"{info.kind}.{part}")
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind and kind != info.kind:
        raise st.bad_request(f"the kind of the object ({kind}) does not match the expected kind ({info.kind})")
    if api_version and api_version != info.api_version:
        raise st.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                             f"version ({info.api_version})")


def _check_delete_options(opts: Mapping[str, Any]) -> None:
    """400 when DeleteOptions fields do not have their Go types (kube fails to decode such a body)."""
    pre = opts.get("preconditions")
    if pre is not None:
        if not isinstance(pre, dict):
            raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.preconditions of type "
                                 "v1.Preconditions")
        for field in ("uid", "resourceVersion"):
            if pre.get(field) is not None and not isinstance(pre[field], str):
                raise st.bad_request(f"json: cannot unmarshal into Go struct field Preconditions.preconditions."
                                     f"{field} of type string")
    policy = opts.get("propagationPolicy")
    if policy is not None and not isinstance(policy, str):
        raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.propagationPolicy of type "
                             "v1.DeletionPropagation")
    orphan = opts.get("orphanDependents")
    if orphan is not None and not isinstance(orphan, bool):
        raise st.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.orphanDependents of type bool")


def scale_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of a workload object."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    try:
        sel_text = str(label_selector_from_dict(selector)) if isinstance(selector, Mapping) else ""
    except SelectorError:
        sel_text = ""
    smeta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta}
    status: dict[str, Any] = {"replicas": (obj.get("status") or {}).get("replicas", 0)}
    if sel_text:
        status["selector"] = sel_text
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": smeta,
            "spec": {"replicas": spec.get("replicas", 0)}, "status": status}


def json_response(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return web.Response(status=status, body=data, content_type="application/json", headers=headers)


def _reencode(co: CachedObject, api_version: str) -> bytes:
    """Object bytes served under another version of the same resource (CRD "None" conversion)."""
    if co.obj.get("apiVersion") == api_version:
        return co.raw
    obj = dict(co.obj)
    obj["apiVersion"] = api_version
    return orjson.dumps(obj)


def _at_revision(obj: Mapping[str, Any], rev: int, api_version: str) -> bytes:
    """``obj`` (left untouched) served under ``api_version`` with ``metadata.resourceVersion`` set to ``rev``."""
    out = dict(obj)
    out["apiVersion"] = api_version
    meta = out.get("metadata")
    out["metadata"] = {**(meta if isinstance(meta, dict) else {}), "resourceVersion": str(rev)}
    return orjson.dumps(out)


# ------------------------------------------------------------------------------------------ the API


class ResourceAPI:
    """Request handling for every resource in the registry."""

    def __init__(self, storage: Storage, registry: Registry, cache: WatchCache, store: ObjectStore, clock: Clock,
                 *, bookmark_interval: float = 60.0) -> None:
        self.storage = storage
        self.registry = registry
        self.cache = cache
        self.store = store
        self.clock = clock
        self.bookmark_interval = bookmark_interval
        self.rv_wait = RV_WAIT_SECONDS
        self.closing = asyncio.Event()
        self.prepare_hooks: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, Any] | None], None]] = {}

    # -------------------------------------------------------------------------- routing

    def resolve(self, group: str, version: str, rest: str) -> Target:
        parts = rest.split("/")
        if parts and parts[-1] == "":
            parts.pop()
        watch = False
        if parts and parts[0] == "watch":
            watch = True
            parts = parts[1:]
        if not parts or any(p == "" for p in parts):
            raise st.route_not_found()
        namespace = ""
        ns_info = self.registry.get(group, version, "namespaces") if not group else None
        if parts[0] == "namespaces" and len(parts) >= 3 and not (ns_info and len(parts) == 3
                                                                 and parts[2] in ns_info.subresources):
            namespace = parts[1]
            parts = parts[2:]
            info = self.registry.get(group, version, parts[0])
            if info is None or not info.namespaced:
                raise st.route_not_found()
        else:
            info = self.registry.get(group, version, parts[0])
            if info is None:
                raise st.route_not_found()
            if info.namespaced and len(parts) > 1:
                raise st.route_not_found()
        if len(parts) > 3:
            raise st.route_not_found()
        name = parts[1] if len(parts) > 1 else ""
        sub = parts[2] if len(parts) > 2 else ""
        if sub and sub not in info.subresources:
            raise st.route_not_found()
        return Target(info, namespace, name, sub, watch)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        mi = request.match_info
        group = mi.get("group", "")
        version = mi.get("version", "v1")
        t = self.resolve(group, version, mi["rest"])
        method = request.method
        q = request.query
        if method == "GET" and not t.subresource:
            table_version = tables.negotiate_table(request.headers.get("Accept", ""))
            if table_version is not None:
                return await self.serve_table(request, t, table_version)
        if not t.name:
            if method == "GET":
                if t.watch or truthy(q.get("watch")):
                    return await self.watch(request, t)
                return await self.list(request, t)
            if method == "POST" and (t.namespace or not t.info.namespaced):
                return await self.create(request, t)
            if method == "DELETE":
                return await self.delete_collection(request, t)
            raise st.method_not_allowed()
        if t.watch:
            return await self.watch(request, t)
        if t.subresource == "scale":
            return await self.scale(request, t)
        if method in ("GET", "HEAD"):
            return await self.get(request, t)
        if method == "PUT":
            return await self.update(request, t)
        if method == "PATCH":
            return await self.patch(request, t)
        if method == "DELETE" and not t.subresource:
            return await self.delete(request, t)
        raise st.method_not_allowed()

    # -------------------------------------------------------------------------- reads

    async def _wait_rv(self, rv: int) -> None:
        """Wait (bounded) until the cache has reached ``rv``; 504 ResourceVersionTooLarge otherwise."""
        if self.cache.revision >= rv:
            return
        if not await self.cache.wait_fresh(rv, self.rv_wait):
            raise st.too_large_rv(rv)

    async def get(self, request: web.Request, t: Target) -> web.Response:
        rv_text = request.query.get("resourceVersion", "")
        info = t.info
        key = ObjectStore.key(info, t.namespace, t.name)
        if rv_text == "":
            kv = await self.storage.get(key)
            if kv is None:
                raise st.not_found(info, t.name)
            obj = served(kv)
            if obj.get("apiVersion") != info.api_version:
                obj["apiVersion"] = info.api_version
            return json_response(obj)
        rv = parse_rv(rv_text)
        if rv:
            await self._wait_rv(rv)
        co = self.cache.bucket(info.storage_prefix).objects.get(key)
        if co is None:
            raise st.not_found(info, t.name)
        return json_response(_reencode(co, info.api_version))

    async def list(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        info = t.info
        flt = make_filter(info, q)
        rv_text = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        token = q.get("continue", "")
        limit_text = q.get("limit", "")
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError:
            raise st.bad_request(f'invalid limit: "{limit_text}"') from None
        limit = max(limit, 0)
        if match not in ("", "Exact", "NotOlderThan"):
            raise st.invalid(info, "", [{"reason": "FieldValueNotSupported", "field": "resourceVersionMatch",
                                         "message": f'Unsupported value: "{match}": supported values: "Exact", '
                                                    '"NotOlderThan"'}])
        if match and not rv_text:
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                                         "message": "Forbidden: resourceVersionMatch is forbidden unless "
                                                    "resourceVersion is provided"}])
        if token:
            if rv_text:
                raise st.bad_request("specifying resource version is not allowed when using continue")
            rv, start = decode_continue(token)
            return await self._list_storage(t, flt, rv, limit, start, from_token=True)
        if match == "Exact" and rv_text == "0":
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
                                         "message": "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                                                    "resourceVersion \"0\""}])
        if rv_text == "0":
            return self._list_cache(t, flt)
        if rv_text == "":
            if limit:
                return await self._list_storage(t, flt, 0, limit, "")
            await self._sync()
            return self._list_cache(t, flt)
        rv = parse_rv(rv_text)
        if match == "Exact" or (limit and match != "NotOlderThan"):
            return await self._list_storage(t, flt, rv, limit, "")
        await self._wait_rv(rv)
        return self._list_cache(t, flt)

    async def _sync(self) -> None:
        try:
            await self.cache.sync(timeout=max(self.rv_wait, 3.0))
        except TimeoutError:
            raise st.StatusError(504, "Timeout", "Timeout: watch cache did not catch up with storage",
                                 headers={"Retry-After": "1"}) from None

    def _list_cache(self, t: Target, flt: Filter) -> web.Response:
        info = t.info
        rev = self.cache.revision
        objs = self.cache.bucket(info.storage_prefix).snapshot(t.namespace)
        av = info.api_version
        if flt.empty:
            items = [co.raw if co.obj.get("apiVersion") == av else _reencode(co, av) for co in objs]
        else:
            items = [_reencode(co, av) for co in objs if flt(co.obj)]
        return json_response(self._list_bytes(info, rev, items))

    @staticmethod
    def _list_bytes(info: ResourceInfo, rev: int, items: list[bytes], cont: str = "",
                    remaining: int | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rev)}
        if cont:
            meta["continue"] = cont
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = orjson.dumps({"kind": info.list_kind, "apiVersion": info.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(items) + b"]}"

    async def _list_storage(self, t: Target, flt: Filter, rev: int, limit: int, start: str, *,
                            from_token: bool = False) -> web.Response:
        """A (paginated) list at a fixed revision, read from storage history."""
        info = t.info
        prefix = info.storage_prefix + (f"{t.namespace}/" if t.namespace else "")
        start_key = prefix + start if start else ""
        items: list[bytes] = []
        last = start_key
        more = False
        read_rev = max(rev, 0)
        av = info.api_version
        while True:
            want = 0 if not limit else (limit - len(items) if flt.empty else max(limit, 256))
            res = await self._storage_list(prefix, read_rev, last, want, from_token=from_token)
            read_rev = res.revision
            kvs = res.kvs
            for i, kv in enumerate(kvs):
                last = kv.key
                obj = served(kv)
                if not flt.empty and not flt(obj):
                    continue
                if obj.get("apiVersion") != av:
                    obj["apiVersion"] = av
                items.append(orjson.dumps(obj))
                if limit and len(items) >= limit:
                    more = i + 1 < len(kvs) or res.more
                    break
            else:
                more = res.more
                if more and (not limit or len(items) < limit):
                    continue
            break
        cont = ""
        remaining = None
        if more:
            cont = encode_continue(read_rev, last[len(prefix):])
            if flt.empty:
                remaining = await self.storage.count(prefix, read_rev, last)
        return json_response(self._list_bytes(info, read_rev, items, cont, remaining))

    async def _storage_list(self, prefix: str, read_rev: int, last: str, want: int, *, from_token: bool) -> Any:
        """One storage page; 410 (with a fresh continue token for pagination) when compacted, 504 when ahead."""
        for _ in range(2):
            try:
                return await self.storage.list(prefix, read_rev, last, want)
            except Compacted as e:
                if from_token:
                    raise st.expired(_CONTINUE_TOO_OLD, continue_token=self._fresh_token(prefix, last)) from None
                raise st.expired(f"too old resource version: {read_rev} ({e.compacted})") from None
            except FutureRevision:
                if not await self.cache.wait_for(read_rev, self.rv_wait):
                    raise st.too_large_rv(read_rev) from None
        raise st.too_large_rv(read_rev)

    @staticmethod
    def _fresh_token(prefix: str, last: str) -> str:
        """A continue token that resumes after ``last`` at the latest revision (an inconsistent continuation)."""
        return encode_continue(-1, last[len(prefix):]) if last else ""

    # -------------------------------------------------------------------------- tables (kubectl get)

    async def serve_table(self, request: web.Request, t: Target, version: str) -> web.StreamResponse:
        """A get, list or watch answered as ``meta.k8s.io/<version>`` Tables (the client asked for ``as=Table``).

        The plain JSON answer is built as usual and then printed, so selectors, pagination, resource
        versions and errors behave exactly as for JSON; ``includeObject`` (Metadata by default, Object,
        None) picks what each row carries. A watch streams one single-row Table per event.
        """
        include = request.query.get("includeObject", "") or "Metadata"
        if include not in tables.INCLUDE_OBJECT_VALUES:
            raise st.bad_request(f'unrecognized includeObject value: "{include}"')
        table = TableRequest(version, include, await self._printer(t.info))
        if t.watch or (not t.name and truthy(request.query.get("watch"))):
            request[TABLE_WATCH_KEY] = table
            return await self.watch(request, t)
        plain = await (self.get(request, t) if t.name else self.list(request, t))
        body = plain.body
        doc = orjson.loads(body if isinstance(body, bytes) else b"{}")
        out = tables.to_table(table.printer, doc, now=self.clock.wall(), version=version, include_object=include)
        return web.Response(status=plain.status, body=orjson.dumps(out),
                            headers={"Content-Type": tables.table_content_type(version)})

    async def _printer(self, info: ResourceInfo) -> tables.Printer:
        """kube's printer for a built-in resource; for a custom one, its CRD version's printer columns."""
        if info.builtin:
            return tables.builtin_printer(info.group, info.plural)
        crd_info = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        kv = await self.storage.get(ObjectStore.key(crd_info, "", info.crd_name)) if crd_info else None
        crd = orjson.loads(kv.value) if kv is not None else {}
        return tables.custom_resource_printer(tables.crd_printer_columns(crd, info.version))

    # -------------------------------------------------------------------------- watch

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        info = t.info
        flt = make_filter(info, q)
        if t.name:
            name_flt = parse_field_selector(f"metadata.name={t.name}")
            flt = Filter(flt.labels, name_flt if flt.fields is None else
                         FieldSelector(flt.fields.requirements + name_flt.requirements))
        rv_text = q.get("resourceVersion", "")
        bookmarks = truthy(q.get("allowWatchBookmarks"))
        initial = q.get("sendInitialEvents")
        send_initial = truthy(initial) if initial is not None else None
        timeout_text = q.get("timeoutSeconds", "")
        timeout = DEFAULT_WATCH_TIMEOUT
        if timeout_text:
            if not timeout_text.isascii() or not timeout_text.lstrip("+").isdigit():
                raise st.bad_request(f'invalid timeoutSeconds: "{timeout_text}": must be a non-negative integer')
            timeout = float(int(timeout_text)) or DEFAULT_WATCH_TIMEOUT
        if send_initial and not bookmarks:
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "allowWatchBookmarks",
                                         "message": "Forbidden: allowWatchBookmarks required when "
                                                    "sendInitialEvents is true"}])
        prefix = info.storage_prefix
        ns = t.namespace
        start_lines: list[bytes] = []
        if send_initial or (send_initial is None and rv_text in ("", "0")):
            if rv_text == "":
                await self._sync()
            elif rv_text != "0":
                await self._wait_rv(parse_rv(rv_text))
            w, objs, rev = self.cache.subscribe_snapshot(prefix, ns)
            av = info.api_version
            for co in objs:
                if flt.empty or flt(co.obj):
                    start_lines.append(b'{"type":"ADDED","object":' + _reencode(co, av) + b"}\n")
            if send_initial:
                start_lines.append(self._bookmark(info, rev, initial_end=True))
            return await self._stream(request, t, w, start_lines, [], flt, bookmarks, timeout)
        rv = parse_rv(rv_text) if rv_text not in ("", "0") else self.cache.revision
        if rv > self.cache.revision:
            await self._wait_rv(rv)
        sub = self.cache.subscribe(prefix, rv, ns)
        if sub is None:
            return await self._stream_storage(request, t, rv, flt, bookmarks, timeout)
        w, replay = sub
        return await self._stream(request, t, w, start_lines, replay, flt, bookmarks, timeout)

    @staticmethod
    def _bookmark(info: ResourceInfo, rev: int, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rev)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + orjson.dumps(obj) + b"}\n"

    @staticmethod
    def _render(ev: CachedEvent, flt: Filter, av: str) -> bytes | None:
        if flt.empty:
            if ev.cur.obj.get("apiVersion") == av:
                return ev.line
            return b'{"type":"' + ev.type.encode() + b'","object":' + _reencode(ev.cur, av) + b"}\n"
        cur_ok = flt(ev.cur.obj)
        if ev.type == "ADDED":
            typ = "ADDED" if cur_ok else None
        elif ev.type == "DELETED":
            typ = "DELETED" if cur_ok else None
        else:
            prev_ok = ev.prev is not None and flt(ev.prev.obj)
            typ = ("MODIFIED" if prev_ok else "ADDED") if cur_ok else ("DELETED" if prev_ok else None)
        if typ is None:
            return None
        if typ == ev.type and ev.cur.obj.get("apiVersion") == av:
            return ev.line
        if typ == "DELETED" and ev.type == "MODIFIED":
            # Leaving the selector: kube sends the last version the watcher saw match, at this event's RV.
            assert ev.prev is not None
            return b'{"type":"DELETED","object":' + _at_revision(ev.prev.obj, ev.rev, av) + b"}\n"
        return b'{"type":"' + typ.encode() + b'","object":' + _reencode(ev.cur, av) + b"}\n"

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        table: TableRequest | None = request.get(TABLE_WATCH_KEY)
        resp = web.StreamResponse(status=200, headers=headers) if table is None else \
            TableWatchResponse(table, self.clock, headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        return resp

    def _timers(self, request: web.Request, w: Watcher, timeout: float, bookmarks: bool,
                state: dict[str, bool]) -> list[asyncio.Task[None]]:
        """Tasks that flag the watch's end (deadline, server shutdown, client gone) and bookmark ticks on ``state``.

        Each one wakes the writer; the client-gone check runs once a second so an idle watch whose client
        disconnected does not linger until its timeout.
        """
        clock = self.clock

        async def deadline() -> None:
            if bookmarks and timeout > 4:
                await clock.sleep(timeout - 2)
                state["bookmark"] = True
                w.wake.set()
                await clock.sleep(2)
            else:
                await clock.sleep(timeout)
            state["done"] = True
            w.wake.set()

        async def ticker() -> None:
            while True:
                await clock.sleep(self.bookmark_interval)
                state["bookmark"] = True
                w.wake.set()

        async def closing() -> None:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.closing.wait(), 1.0)
                transport = request.transport
                if self.closing.is_set() or transport is None or transport.is_closing():
                    break
            state["done"] = True
            w.wake.set()

        tasks = [asyncio.create_task(deadline()), asyncio.create_task(closing())]
        if bookmarks:
            tasks.append(asyncio.create_task(ticker()))
        return tasks

    async def _stream(self, request: web.Request, t: Target, w: Watcher, start_lines: list[bytes],
                      replay: list[CachedEvent], flt: Filter, bookmarks: bool, timeout: float) -> web.StreamResponse:
        """Write a cache-backed watch: initial lines, ring replay, then live events until timeout or close."""
        info = t.info
        av = info.api_version
        state = {"done": False, "bookmark": False}
        tasks: list[asyncio.Task[None]] = []
        resp: web.StreamResponse | None = None
        try:
            resp = await self._open_stream(request)
            for i in range(0, len(start_lines), 512):
                await resp.write(b"".join(start_lines[i:i + 512]))
            lines = [line for line in (self._render(ev, flt, av) for ev in replay) if line is not None]
            if lines:
                await resp.write(b"".join(lines))
            tasks = self._timers(request, w, timeout, bookmarks, state)
            buf = w.buf
            render = self._render
            while True:
                w.wake.clear()
                lines = []
                while buf:
                    line = render(buf.popleft(), flt, av)
                    if line is not None:
                        lines.append(line)
                if state["bookmark"] and not w.closed:
                    state["bookmark"] = False
                    if bookmarks:
                        lines.append(self._bookmark(info, self.cache.revision))
                if lines:
                    await resp.write(b"".join(lines))
                if state["done"] or w.closed:
                    break
                if not buf:
                    await w.wake.wait()
        except ConnectionResetError:
            pass
        finally:
            self.cache.unsubscribe(info.storage_prefix, w)
            for task in tasks:
                task.cancel()
        if resp is not None:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await resp.write_eof()
        return resp if resp is not None else web.Response(status=200)

    async def _stream_storage(self, request: web.Request, t: Target, rv: int, flt: Filter, bookmarks: bool,
                              timeout: float) -> web.StreamResponse:
        """A watch from an RV older than the cache window, served from storage history (or 410 ERROR)."""
        info = t.info
        av = info.api_version
        prefix = info.storage_prefix + (f"{t.namespace}/" if t.namespace else "")
        resp = await self._open_stream(request)
        w = Watcher("", 1)  # only used as a wake-up target by the timers
        state = {"done": False, "bookmark": False}
        tasks = self._timers(request, w, timeout, bookmarks, state)
        # (revision, line) per storage event; an empty line only advances the revision (filtered out).
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(maxsize=10_000)

        async def pump() -> None:
            last = rv
            try:
                async for ev in self.storage.watch(prefix, rv + 1):
                    cur = decode(ev.kv.key, ev.kv.value, ev.kv.mod_revision)
                    prev = decode(ev.prev_kv.key, ev.prev_kv.value, ev.prev_kv.mod_revision) if ev.prev_kv else None
                    typ = "DELETED" if ev.type == "DELETE" else ("MODIFIED" if prev is not None else "ADDED")
                    last = ev.revision
                    await queue.put((last, self._render(CachedEvent(typ, cur, prev), flt, av) or b""))
            except Compacted as e:
                oldest = max(e.compacted, await self.storage.compacted_revision())
                await queue.put((last, self._error_line(rv, oldest)))
            except WatcherTooSlow:
                log.info("storage-history watch of %s fell behind at %d", prefix, last)
            await queue.put(None)

        pump_task = asyncio.create_task(pump())
        last_rv = rv
        try:
            while not state["done"]:
                w.wake.clear()
                if state["bookmark"]:
                    state["bookmark"] = False
                    if bookmarks:
                        await resp.write(self._bookmark(info, last_rv))
                getter = asyncio.ensure_future(queue.get())
                waker = asyncio.ensure_future(w.wake.wait())
                done, _ = await asyncio.wait({getter, waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                if getter not in done:
                    getter.cancel()
                    continue
                item = getter.result()
                if item is None:
                    break
                last_rv, line = item
                if line:
                    await resp.write(line)
        except ConnectionResetError:
            pass
        finally:
            pump_task.cancel()
            for task in tasks:
                task.cancel()
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    @staticmethod
    def _error_line(rv: int, oldest: int) -> bytes:
        err = st.expired(f"too old resource version: {rv} ({oldest})").status()
        return b'{"type":"ERROR","object":' + orjson.dumps(err) + b"}\n"

    # -------------------------------------------------------------------------- writes

    async def _decode(self, request: web.Request) -> dict[str, Any]:
        body = await read_body(request)
        return _object(parse_document(body, _content_type(request)))

    @staticmethod
    def _dry_run(request: web.Request) -> bool:
        values = request.query.getall("dryRun", [])
        for v in values:
            if v != "All":
                raise st.bad_request(f'Invalid dry run value: "{v}"; supported values: "All"')
        return bool(values)

    def _field_validation(self, request: web.Request, info: ResourceInfo, obj: Mapping[str, Any]) -> dict[str, str]:
        """Apply ``fieldValidation``: Strict -> 400 on unknown fields; Warn -> Warning headers."""
        mode = request.query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            raise st.bad_request(f'fieldValidation "{mode}" is not a valid value; valid values are '
                                 '"Strict", "Warn" and "Ignore"')
        if mode == "Ignore":
            return {}
        unknown = unknown_fields(info, obj)
        if not unknown:
            return {}
        if mode == "Strict":
            msg = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise st.bad_request(f"strict decoding error: {msg}")
        warnings = ", ".join("299 - " + _quote_warning(f'unknown field "{u}"') for u in unknown)
        return {"Warning": warnings}

    def _prepare_custom(self, info: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
        """Prune and default a custom resource by its structural schema."""
        if info.builtin or not info.schema:
            return obj
        from .validation import apply_defaults, prune

        pruned, _ = prune(info.schema, obj)
        return apply_defaults(info.schema, pruned)

    def _hook(self, info: ResourceInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        hook = self.prepare_hooks.get((info.group, info.plural))
        if hook is not None:
            hook(obj, old)

    @staticmethod
    def _manager(request: web.Request) -> str:
        fm = request.query.get("fieldManager", "")
        if fm:
            return fm
        agent = request.headers.get("User-Agent", "unknown")
        return agent.split("/", 1)[0] or "unknown"

    def _managed(self, info: ResourceInfo, old: dict[str, Any] | None, new: dict[str, Any], manager: str,
                 subresource: str = "") -> dict[str, Any]:
        """``new`` with ``metadata.managedFields`` recording a non-apply write by ``manager``."""
        return update_managed_fields(old, new, manager=manager, operation="Update", info=info,
                                     subresource=subresource or None, now=timestamp(self.clock))

    async def create(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        dry = self._dry_run(request)
        obj = await self._decode(request)
        _check_kind(info, obj)
        headers = self._field_validation(request, info, obj)
        obj = self._prepare_custom(info, obj)
        obj = self.store.prepare_create(info, t.namespace, obj)
        self._hook(info, obj, None)
        validate(info, obj)
        obj = self._managed(info, None, obj, self._manager(request))
        created = await self.store.create(info, t.namespace, obj, dry_run=dry)
        return json_response(created, 201, headers)

    async def update(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        dry = self._dry_run(request)
        new = await self._decode(request)
        _check_kind(info, new)
        headers = self._field_validation(request, info, new)
        new = self._prepare_custom(info, new)
        meta = new.get("metadata") or {}
        want = meta.get("resourceVersion") or ""
        if not isinstance(want, str):
            raise st.bad_request("json: cannot unmarshal into Go struct field ObjectMeta.metadata.resourceVersion "
                                 "of type string")
        want_rv = parse_rv(want) if want else 0
        manager = self._manager(request)
        for attempt in range(MAX_RETRIES):
            old, kv = await self.store.read(info, t.namespace, t.name, cached=attempt == 0, want_rv=want_rv)
            if want_rv and want_rv != kv.mod_revision:
                raise st.conflict(info, t.name)
            result = self.store.prepare_update(info, old, copy.deepcopy(new), subresource=t.subresource)
            if not t.subresource:
                self._hook(info, result, old)
            validate(info, result, old)
            result = self._managed(info, old, result, manager, t.subresource)
            try:
                out = await self.store.write_update(info, kv, result, dry_run=dry)
            except RevisionMismatch:
                if want_rv:
                    raise st.conflict(info, t.name) from None
                continue
            except KeyNotFound:
                raise st.not_found(info, t.name) from None
            return json_response(out, 200, headers)
        raise st.conflict(info, t.name)

    async def patch(self, request: web.Request, t: Target) -> web.Response:
        from .patch import PatchError, json_merge_patch, json_patch, strategic_merge_patch

        info = t.info
        dry = self._dry_run(request)
        ctype = _content_type(request)
        body = await read_body(request)
        if ctype == "application/apply-patch+yaml":
            return await self._apply(request, t, body, dry)
        kinds = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
                 "application/strategic-merge-patch+json": "strategic"}
        kind = kinds.get(ctype)
        if kind is None or (kind == "strategic" and not info.builtin):
            raise st.StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                 f"accepted media types include: application/json-patch+json, "
                                 f"application/merge-patch+json, application/apply-patch+yaml (got {ctype})")
        try:
            doc = orjson.loads(body) if body.strip() else None
        except orjson.JSONDecodeError as e:
            raise st.bad_request(f"error decoding patch: {e}") from None
        if kind == "json" and not isinstance(doc, list):
            raise st.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        if kind != "json" and not isinstance(doc, dict):
            raise st.bad_request("error decoding patch: the patch must be a JSON object")
        manager = self._manager(request)
        headers: dict[str, str] = {}
        for attempt in range(MAX_RETRIES):
            old, kv = await self.store.read(info, t.namespace, t.name, cached=attempt == 0)
            try:
                if kind == "json":
                    new = json_patch(old, doc)
                elif kind == "merge":
                    new = json_merge_patch(old, doc)
                else:
                    new = strategic_merge_patch(old, doc, info)
            except PatchError as e:
                if attempt == 0:
                    continue  # the cached copy may be stale: judge the patch against storage
                raise st.StatusError(e.code, e.reason, e.message,
                                     details={"causes": e.causes} if e.causes else None) from None
            new = _object(new)
            want = (new.get("metadata") or {}).get("resourceVersion")
            if want and str(want) != old["metadata"]["resourceVersion"]:
                if attempt == 0:
                    continue
                raise st.conflict(info, t.name)
            headers = self._field_validation(request, info, new)
            new = self._prepare_custom(info, new)
            result = self.store.prepare_update(info, old, new, subresource=t.subresource)
            if not t.subresource:
                self._hook(info, result, old)
            validate(info, result, old)
            result = self._managed(info, old, result, manager, t.subresource)
            try:
                out = await self.store.write_update(info, kv, result, dry_run=dry)
            except RevisionMismatch:
                continue
            except KeyNotFound:
                raise st.not_found(info, t.name) from None
            return json_response(out, 200, headers)
        raise st.conflict(info, t.name)

    async def _apply(self, request: web.Request, t: Target, body: bytes, dry: bool) -> web.Response:
        from .apply import ApplyConflict, server_side_apply
        from .patch import PatchError

        info = t.info
        manager = request.query.get("fieldManager", "")
        if not manager:
            raise st.bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
        force = truthy(request.query.get("force"))
        applied = _object(parse_document(body, "application/yaml"))
        _check_kind(info, applied)
        ameta = applied.get("metadata") or {}
        if ameta.get("name") and ameta["name"] != t.name:
            raise st.bad_request(f'the name of the object ({ameta["name"]}) does not match the name on the URL '
                                 f"({t.name})")
        headers = self._field_validation(request, info, applied)
        for _ in range(MAX_RETRIES):
            kv = await self.storage.get(ObjectStore.key(info, t.namespace, t.name))
            live = served(kv) if kv is not None else None
            want = ameta.get("resourceVersion")
            if want and (live is None or str(want) != live["metadata"]["resourceVersion"]):
                raise st.conflict(info, t.name)
            try:
                merged = server_side_apply(live, applied, manager=manager, force=force, info=info,
                                           subresource=t.subresource or None, now=timestamp(self.clock))
            except ApplyConflict as e:
                raise st.StatusError(409, "Conflict", e.message, details={
                    "name": t.name, "group": info.group, "kind": info.plural, "causes": list(e.causes)}) from None
            except PatchError as e:
                raise st.StatusError(e.code, e.reason, e.message,
                                     details={"causes": e.causes} if e.causes else None) from None
            merged = self._prepare_custom(info, merged)
            if live is None:
                merged.setdefault("metadata", {})["name"] = t.name
                merged["metadata"].pop("resourceVersion", None)
                obj = self.store.prepare_create(info, t.namespace, merged)
                self._hook(info, obj, None)
                validate(info, obj)
                try:
                    created = await self.store.create(info, t.namespace, obj, dry_run=dry)
                except st.StatusError as e:
                    if e.reason == "AlreadyExists":
                        continue
                    raise
                return json_response(created, 201, headers)
            assert kv is not None
            result = self.store.prepare_update(info, live, merged, subresource=t.subresource)
            if not t.subresource:
                self._hook(info, result, live)
            validate(info, result, live)
            try:
                out = await self.store.write_update(info, kv, result, dry_run=dry)
            except (RevisionMismatch, KeyNotFound):
                continue
            return json_response(out, 200, headers)
        raise st.conflict(info, t.name)

    async def scale(self, request: web.Request, t: Target) -> web.Response:
        """The ``/scale`` subresource of built-in workloads: an autoscaling/v1 Scale view of spec.replicas."""
        from .patch import PatchError, json_merge_patch, json_patch

        info = t.info
        if request.method in ("GET", "HEAD"):
            obj, _ = await self.store.read(info, t.namespace, t.name)
            return json_response(scale_of(obj))
        if request.method not in ("PUT", "PATCH"):
            raise st.method_not_allowed()
        dry = self._dry_run(request)
        ctype = _content_type(request)
        body = await read_body(request)
        for attempt in range(MAX_RETRIES):
            old, kv = await self.store.read(info, t.namespace, t.name, cached=attempt == 0)
            current = scale_of(old)
            try:
                if request.method == "PUT":
                    wanted = _object(parse_document(body, ctype))
                elif ctype == "application/json-patch+json":
                    wanted = json_patch(current, orjson.loads(body))
                elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                    wanted = json_merge_patch(current, orjson.loads(body))
                else:
                    raise st.unsupported_media_type(ctype)
            except orjson.JSONDecodeError as e:
                raise st.bad_request(f"error decoding patch: {e}") from None
            except PatchError as e:
                if attempt == 0:
                    continue
                raise st.StatusError(e.code, e.reason, e.message) from None
            want = (wanted.get("metadata") or {}).get("resourceVersion")
            if want and str(want) != current["metadata"]["resourceVersion"]:
                if attempt == 0:
                    continue
                raise st.conflict(info, t.name)
            wanted_spec = wanted.get("spec")
            if wanted_spec is not None and not isinstance(wanted_spec, dict):
                raise st.bad_request(f"json: cannot unmarshal {type(wanted_spec).__name__} into Go struct field "
                                     "Scale.spec of type v1.ScaleSpec")
            replicas = (wanted_spec or {}).get("replicas", 0)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise st.invalid(info, t.name, [{"reason": "FieldValueInvalid", "field": "spec.replicas",
                                                 "message": f"Invalid value: {replicas!r}: must be greater than or "
                                                            "equal to 0"}])
            result = copy.deepcopy(old)
            result.setdefault("spec", {})["replicas"] = replicas
            result = self.store.prepare_update(info, old, result)
            validate(info, result, old)
            try:
                out = await self.store.write_update(info, kv, result, dry_run=dry)
            except RevisionMismatch:
                continue
            except KeyNotFound:
                raise st.not_found(info, t.name) from None
            return json_response(scale_of(out))
        raise st.conflict(info, t.name)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await read_body(request)
        opts: dict[str, Any] = {}
        if body.strip():
            doc = parse_document(body, _content_type(request))
            if not isinstance(doc, dict):
                raise st.bad_request("DeleteOptions must be a JSON object")
            opts.update(doc)
        q = request.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "orphanDependents" in q:
            opts["orphanDependents"] = truthy(q["orphanDependents"])
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = q["gracePeriodSeconds"]
        if "dryRun" in opts and opts["dryRun"] not in ([], ["All"], None):
            raise st.bad_request(f'Invalid dry run value: "{opts["dryRun"]}"; supported values: "All"')
        _check_delete_options(opts)
        return opts

    async def delete(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        opts = await self._delete_options(request)
        dry = self._dry_run(request) or opts.get("dryRun") == ["All"]
        obj, deleted = await self.store.delete(info, t.namespace, t.name, opts, dry_run=dry)
        if deleted and not (info.builtin and not info.group and info.plural == "pods"):
            return json_response(st.success(info, t.name, obj["metadata"].get("uid")))
        code = 202 if (not deleted and opts.get("orphanDependents") is False) else 200
        return json_response(obj, code)

    async def delete_collection(self, request: web.Request, t: Target) -> web.Response:
        info = t.info
        if info.namespaced and not t.namespace:
            raise st.method_not_allowed()
        flt = make_filter(info, request.query)
        opts = await self._delete_options(request)
        dry = self._dry_run(request) or opts.get("dryRun") == ["All"]
        await self._sync()
        objs = [co for co in self.cache.bucket(info.storage_prefix).snapshot(t.namespace)
                if flt.empty or flt(co.obj)]
        items: list[bytes] = []
        for co in objs:
            try:
                obj, _ = await self.store.delete(info, co.namespace, co.name, opts, dry_run=dry)
            except st.StatusError as e:
                if e.code == 404:
                    continue
                raise
            items.append(orjson.dumps(obj))
        return json_response(self._list_bytes(info, self.cache.revision, items))


# ------------------------------------------------------------------------------------------ table watch

@dataclass(frozen=True, slots=True)
class TableRequest:
    """A negotiated Table answer: ``meta.k8s.io`` version, ``includeObject`` mode and the printer to use."""

    version: str
    include_object: str
    printer: tables.Printer


# The request storage key that turns a watch into a Table watch (typed where aiohttp has RequestKey).
TABLE_WATCH_KEY: Any = (web.RequestKey("kinformer.table_watch", TableRequest) if hasattr(web, "RequestKey")
                        else "kinformer.table_watch")


class TableWatchResponse(web.StreamResponse):
    """A watch stream that rewrites each event's object into a one-row Table as it is written.

    Every write carries whole event lines (the watch writers never split one). Column definitions
    go with the first object event only; later events leave them empty, as kube does to save
    bandwidth (kubectl reuses the last header). BOOKMARK objects become row-less Tables carrying the
    resourceVersion; ERROR events pass unchanged.
    """

    def __init__(self, table: TableRequest, clock: Clock, *, headers: Mapping[str, str]) -> None:
        super().__init__(status=200, headers=headers)
        self._table = table
        self._clock = clock
        self._headers_sent = False

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        converted = self._convert(bytes(data))
        if converted:
            await super().write(converted)

    def _convert(self, data: bytes) -> bytes:
        table = self._table
        out: list[bytes] = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            ev = orjson.loads(line)
            typ, obj = ev.get("type"), ev.get("object")
            if typ in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                ev["object"] = tables.to_table(table.printer, obj, now=self._clock.wall(), version=table.version,
                                               include_object=table.include_object, headers=not self._headers_sent)
                self._headers_sent = True
            elif typ == "BOOKMARK" and isinstance(obj, dict):
                rv = (obj.get("metadata") or {}).get("resourceVersion", "")
                ev["object"] = {"kind": "Table", "apiVersion": f"{tables.TABLE_GROUP}/{table.version}",
                                "metadata": {"resourceVersion": rv}, "columnDefinitions": [], "rows": []}
            out.append(orjson.dumps(ev))
        return b"\n".join(out) + b"\n" if out else b""
