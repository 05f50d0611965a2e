"""The aiohttp application of the embedded API server: middlewares, routes and the CRD hooks.

Every error leaves as a Kubernetes ``Status``; an unexpected exception is logged and answered with a
500 Status, never a crash (concurrency is bounded by flow control, :mod:`.flowcontrol`).
``/metrics`` serves Prometheus request counters and latencies of the resource API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from ..clock import Clock
from .handlerchain import HandlerChain
from .handlers import MAX_BODY, ResourceAPI, truthy
from .objects import timestamp
from .registry import Registry, ResourceInfo
from .strategy import DefaultStrategy

log = logging.getLogger(__name__)


class Metrics:
    """Request metrics in a registry of their own (several servers may live in one process).

    Invariant: a scrape (:meth:`handle`) sees every request recorded before it. Counts and latencies
    are buffered in plain Python containers on the request path and folded into the Prometheus
    children (whose updates take a lock each) at scrape time, or every ``_FLUSH_EVERY`` latencies.
    """

    _FLUSH_EVERY = 512

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("apiserver_request", "Requests by verb, resource and HTTP code.",
                                ("verb", "resource", "code"), registry=self.registry)
        self.duration = Histogram("apiserver_request_duration_seconds", "Request latency by verb (watches excluded).",
                                  ("verb",), registry=self.registry,
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
        # labelled children are looked up once per label set: ``labels()`` validates and locks on every call
        self._counters: dict[tuple[str, str, int], list[Any]] = {}  # key -> [child, pending count]
        self._latencies: dict[str, tuple[Any, list[float]]] = {}  # verb -> (child, pending observations)
        self._pending = 0

    def record(self, request: web.Request, rest: str, code: int, start: float) -> None:
        """Count one request of the resource API (``rest`` is the path after the group/version)."""
        parts = rest.split("/")
        if parts[0] == "watch":
            parts = parts[1:]
        resource = parts[2] if len(parts) >= 3 and parts[0] == "namespaces" else (parts[0] if parts else "")
        watch = truthy(request.query.get("watch")) or rest.startswith("watch/")
        verb = "WATCH" if watch else request.method
        key = (verb, resource, code)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = [self.requests.labels(verb, resource, str(code)), 0]
        counter[1] += 1
        if not watch:
            hist = self._latencies.get(verb)
            if hist is None:
                hist = self._latencies[verb] = (self.duration.labels(verb), [])
            hist[1].append(time.perf_counter() - start)
            self._pending += 1
            if self._pending >= self._FLUSH_EVERY:
                self.flush()

    def flush(self) -> None:
        """Fold the buffered counts and latencies into the Prometheus children."""
        for counter in self._counters.values():
            if counter[1]:
                counter[0].inc(counter[1])
                counter[1] = 0
        for child, observed in self._latencies.values():
            for value in observed:
                child.observe(value)
            observed.clear()
        self._pending = 0

    async def handle(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        self.flush()
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


def crd_status(crd: dict[str, Any], clock_ts: str) -> None:
    """Set a CRD's status as an accepted, established definition (names accepted as requested)."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    if names.get("kind"):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    old = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or ()}

    def cond(type_: str, reason: str, message: str) -> dict[str, Any]:
        prev = old.get(type_)
        ts = prev["lastTransitionTime"] if prev and prev.get("status") == "True" else clock_ts
        return {"type": type_, "status": "True", "lastTransitionTime": ts, "reason": reason, "message": message}

    stored = [v.get("name") for v in spec.get("versions") or () if v.get("storage")]
    prev_stored = list((crd.get("status") or {}).get("storedVersions") or ())
    crd["status"] = {
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                       cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "acceptedNames": names,
        "storedVersions": prev_stored + [v for v in stored if v not in prev_stored],
    }


class CRDStrategy(DefaultStrategy):
    """CustomResourceDefinitions are accepted and established as written (status kept across updates)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def prepare_for_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        super().prepare_for_create(info, obj)
        crd_status(obj, timestamp(self.clock))

    def prepare_for_update(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_for_update(info, obj, old)
        if "status" in old:
            obj["status"] = old["status"]
        crd_status(obj, timestamp(self.clock))


def build_app(api: ResourceAPI, registry: Registry, *, extra_routes: Iterable[web.RouteDef] = (),
              chain: HandlerChain | None = None) -> web.Application:
    """The aiohttp application: discovery/OpenAPI routes (when present), health checks and the resource API,
    behind ``chain`` (:mod:`.handlerchain`; by default one with no filter: errors as Status, metrics)."""
    metrics = Metrics()
    chain = chain or HandlerChain()
    app = web.Application(client_max_size=MAX_BODY, middlewares=[chain.middleware(metrics)])

    api.store.strategies.register("apiextensions.k8s.io", "customresourcedefinitions", CRDStrategy(api.clock))

    def crd_written(info: ResourceInfo, obj: dict[str, Any], deleted: bool) -> None:
        if info.group != "apiextensions.k8s.io" or info.plural != "customresourcedefinitions":
            return
        if deleted:
            registry.remove_crd(obj["metadata"]["name"])
        else:
            registry.add_crd(obj)

    api.store.after_write.append(crd_written)

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # The resource API first: aiohttp tries the routes sharing a path prefix ("/api", "/apis") in order, and
    # these are what nearly every request is for (the discovery routes below never match their paths).
    routes: list[web.RouteDef] = [web.route("*", "/api/{version}/{rest:.+}", api.handle),
                                  web.route("*", "/apis/{group}/{version}/{rest:.+}", api.handle)]
    for path in ("/healthz", "/livez", "/readyz"):
        routes.append(web.get(path, health))
        routes.append(web.get(path + "/{check:.*}", health))
    routes.append(web.get("/metrics", metrics.handle))
    routes.extend(_optional_routes(registry))
    routes.extend(extra_routes)
    app.add_routes(routes)
    return app


def _optional_routes(registry: Registry) -> list[web.RouteDef]:
    routes: list[web.RouteDef] = []
    try:
        from . import discovery
    except ImportError:
        log.warning("discovery module missing: /api and /apis are not served")
    else:
        routes.extend(discovery.routes(registry))
    try:
        from . import openapi
    except ImportError:
        log.warning("openapi module missing: /openapi is not served")
    else:
        routes.extend(openapi.routes(registry))
    return routes
