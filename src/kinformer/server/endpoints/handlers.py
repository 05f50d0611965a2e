"""HTTP handlers of the resource API: ``/api/v1/...`` and ``/apis/<group>/<version>/...``.

Parses the path into a :class:`~kinformer.server.endpoints.routing.Target`, then dispatches: get/list
(:mod:`.reads`), watch (:mod:`.watch`), writes through :class:`~kinformer.server.registry.objects.ObjectStore`
(:mod:`.writes`, the pod subresources in :mod:`.podsubresources`), and Table answers for kubectl (here).
Every failure is a :class:`StatusError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import orjson
from aiohttp import web

from ...clock import Clock
from ..machinery import status as st
from ..registry.objects import ObjectStore
from ..registry.resources import Registry, ResourceInfo
from ..storage.base import Storage
from ..storage.watchcache import WatchCache
from . import tables
from .bodies import MAX_BODY
from .partial_metadata import negotiate_partial
from .partial_metadata import serve as serve_partial
from .podlog import PodLogSource, pod_log_response
from .podsubresources import PodSubresources
from .query import truthy
from .reads import RV_WAIT_SECONDS
from .routing import Target, check_verb, request_verb, resolve_target
from .table_watch import TABLE_WATCH_KEY, TableRequest
from .watch import WatchHandlers

__all__ = ["MAX_BODY", "ResourceAPI", "truthy"]

_LOG = frozenset({"log"})
TARGET_MEMO = 4096  # resolved paths ResourceAPI remembers
_ASK = object()  # a remembered target whose storage target is asked of the conversion at each request


class ResourceAPI(WatchHandlers, PodSubresources):
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
        #: the simulated kubelets' logs (``APIServer(nodes=N)``); None: pods/log is not served
        self.pod_logs: PodLogSource | None = None
        self._targets: dict[tuple[str, str, str, bool], tuple[Target, Any, Any]] = {}  # see _resolved
        # (group, version, plural, subresource, logs) -> (resource, storage resource or None or _ASK, conversion)
        self._named: dict[tuple[str, str, str, str, bool], tuple[ResourceInfo, Any, Any]] = {}  # see _resolved_named
        self._targets_revision = registry.revision

    def resolve(self, group: str, version: str, rest: str) -> Target:
        """The :class:`Target` of a path (:func:`.routing.resolve_target`); a path that does not resolve raises."""
        return self._resolved(group, version, rest)[0]

    def _resolved(self, group: str, version: str, rest: str) -> tuple[Target, Any]:
        """(the :class:`Target` of a path, its storage target): remembered for the registry's revision (at most
        :data:`TARGET_MEMO` paths, forgotten all at once beyond), as a path resolves the same way until a CRD
        comes or goes. A path that does not resolve raises each time, never remembered.

        The storage target (:meth:`.schema.conversion.Conversion.storage_target`, None: served as stored) is
        remembered with a built-in resource's target, for the conversion it was asked of; :data:`_ASK` for
        a custom resource's, whose conversion webhook its CRD's object decides at each request."""
        logs = self.pod_logs is not None
        targets = self._targets
        if self._targets_revision != self.registry.revision:
            targets.clear()
            self._named.clear()
            self._targets_revision = self.registry.revision
        parts = rest.split("/")
        if 4 <= len(parts) <= 5 and parts[0] == "namespaces" and "" not in parts:
            return self._resolved_named(group, version, rest, parts, logs)
        key = (group, version, rest, logs)
        found = targets.get(key)
        if found is None or found[2] is not self.conversion:
            t = resolve_target(self.registry, group, version, rest, _LOG if logs else frozenset())
            storage_t = self._storage_target(t)
            if len(targets) >= TARGET_MEMO:
                targets.clear()
            found = targets[key] = (t, storage_t, self.conversion)
        return found[0], found[1]

    def _resolved_named(self, group: str, version: str, rest: str, parts: list[str],
                        logs: bool) -> tuple[Target, Any]:
        """:meth:`_resolved` of a path naming an object of a namespace (``namespaces/<ns>/<plural>/<name>`` and
        a subresource of it: ``parts``, none empty), which each object has its own of: what it resolves to is
        remembered by the resource and subresource alone (the namespace and name are taken as they are, as
        :func:`.routing.resolve_target` takes them), at most :data:`TARGET_MEMO`, forgotten all at once beyond."""
        sub = parts[4] if len(parts) == 5 else ""
        key = (group, version, parts[2], sub, logs)
        found = self._named.get(key)
        if found is None or found[2] is not self.conversion:
            t = resolve_target(self.registry, group, version, rest, _LOG if logs else frozenset())
            storage_t = self._storage_target(t)
            if len(self._named) >= TARGET_MEMO:
                self._named.clear()
            found = self._named[key] = (t.info, storage_t if storage_t is None or storage_t is _ASK
                                        else storage_t.info, self.conversion)
            return t, storage_t
        info, storage, _ = found
        t = Target(info, parts[1], parts[3], sub, False)
        if storage is None or storage is _ASK:
            return t, storage
        return t, Target(storage, parts[1], parts[3], sub, False)

    def _storage_target(self, t: Target) -> Any:
        """The storage target of ``t`` (None: served as stored); :data:`_ASK` for a custom resource's."""
        conversion = self.conversion
        if not t.info.builtin:
            return _ASK
        return conversion.storage_target(t) if conversion is not None else None

    def handle(self, request: web.Request) -> Awaitable[web.StreamResponse]:
        """The resource API's handler (behind the handler chain, which awaits what it returns): a plain
        function, so a request awaits the serving handler's coroutine only, not one of this one around it."""
        mi = request.match_info
        group = mi.get("group", "")
        version = mi.get("version", "v1")
        t, storage_t = self._resolved(group, version, mi["rest"])
        method = request.method
        if t.watch and method != "GET":
            # kube-apiserver serves only GET under /watch/; authorization sees the verb watch there whatever
            # the method, so without this rule a user allowed only to watch could create or delete through it
            raise st.method_not_allowed()
        q = request.query
        check_verb(t, request_verb(method, t, truthy(q.get("watch"))))
        conversion = self.conversion
        if storage_t is _ASK:
            storage_t = conversion.storage_target(t) if conversion is not None else None
        if conversion is not None and storage_t is not None:
            return conversion.serve(request, t, storage_t, self._dispatch, self.update, self._current)
        return self._dispatch(request, t)

    async def _current(self, t: Target) -> dict[str, Any]:
        obj, _ = await self.store.read(t.info, t.namespace, t.name)
        return obj

    def _dispatch(self, request: web.Request, t: Target) -> Awaitable[web.StreamResponse]:
        """The handler serving ``request`` for the resolved target ``t`` (verbs already authorized), called: a
        plain function, so a request awaits the handler's coroutine only, not one of this choice around it."""
        method = request.method
        q = request.query
        accept = request.headers.get("Accept", "") if method == "GET" else ""
        if "=" in accept:  # a Table or partial metadata is asked for by a media type parameter (as=...)
            if t.subresource in ("", "status", "scale"):
                table_version = tables.negotiate_table(accept)
                if table_version is not None:
                    return self.serve_table(request, t, table_version)
            if not t.subresource:
                partial = negotiate_partial(accept)
                if partial is not None:
                    return serve_partial(self, request, t, partial)
        if not t.name:
            if method == "GET":
                if t.watch or truthy(q.get("watch")):
                    return self.watch(request, t)
                return self.list(request, t)
            if method == "POST" and (t.namespace or not t.info.namespaced):
                return self.create(request, t)
            if method == "DELETE":
                return self.delete_collection(request, t)
            raise st.method_not_allowed()
        if t.watch:
            return self.watch(request, t)
        if t.subresource == "scale":
            return self.scale(request, t)
        if t.subresource == "binding":
            return self.binding(request, t)
        if t.subresource == "eviction":
            return self.eviction(request, t)
        if t.subresource == "log":
            return self.pod_log(request, t)
        if method in ("GET", "HEAD"):
            return self.get(request, t)
        if method == "PUT":
            return self.update(request, t)
        if method == "PATCH":
            return self.patch(request, t)
        if method == "DELETE" and not t.subresource:
            return self.delete(request, t)
        raise st.method_not_allowed()

    async def pod_log(self, request: web.Request, t: Target) -> web.Response:
        """GET ``pods/<name>/log`` (:mod:`.podlog`)."""
        if request.method not in ("GET", "HEAD"):
            raise st.method_not_allowed()
        pod, _ = await self.store.read(t.info, t.namespace, t.name)
        return pod_log_response(pod, request.query, self.pod_logs, t.info)

    # -------------------------------------------------------------------------- tables (kubectl get)

    async def serve_table(self, request: web.Request, t: Target, version: str) -> web.StreamResponse:
        """A get, list or watch answered as ``meta.k8s.io/<version>`` Tables (the client asked for ``as=Table``).

        The plain JSON answer is built as usual and then printed, so selectors, pagination, resource
        versions and errors behave exactly as for JSON (``/status`` prints as the object, ``/scale`` as kube
        prints a Scale); ``includeObject`` (Metadata by default, Object,
        None) picks what each row carries. A watch streams one single-row Table per event.
        """
        include = request.query.get("includeObject", "") or "Metadata"
        if include not in tables.INCLUDE_OBJECT_VALUES:
            raise st.bad_request(f'unrecognized includeObject value: "{include}"')
        scale = t.subresource == "scale"
        table = TableRequest(version, include, tables.scale_printer() if scale else await self._printer(t.info))
        if t.watch or (not t.name and truthy(request.query.get("watch"))):
            request[TABLE_WATCH_KEY] = table
            return await self.watch(request, t)
        plain = await (self.scale(request, t) if scale else self.get(request, t) if t.name else self.list(request, t))
        body = plain.body
        doc = orjson.loads(body if isinstance(body, bytes) else b"{}")
        out = tables.to_table(table.printer, doc, now=self.clock.wall(), version=version, include_object=include)
        return web.Response(status=plain.status, body=st.json_body(out),
                            headers={"Content-Type": tables.table_content_type(version)})

    async def _printer(self, info: ResourceInfo) -> tables.Printer:
        """kube's printer for a built-in resource; for a custom one, its CRD version's printer columns."""
        if info.builtin:
            return tables.builtin_printer(info.group, info.plural)
        crd_info = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        kv = await self.storage.get(ObjectStore.key(crd_info, "", info.crd_name)) if crd_info else None
        crd = orjson.loads(kv.value) if kv is not None else {}
        return tables.custom_resource_printer(tables.crd_printer_columns(crd, info.version))
