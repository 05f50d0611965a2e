"""The aiohttp application of the embedded API server: middlewares, routes and the CRD hooks.

Every error leaves as a Kubernetes ``Status``; an unexpected exception is logged and answered with a
500 Status, never a crash (concurrency is bounded by flow control, :mod:`.filters.flowcontrol`).
``/metrics`` serves Prometheus request counters and latencies of the resource API.
"""

from __future__ import annotations

import logging
import time
import warnings
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from ..clock import Clock
from .endpoints.handlers import MAX_BODY, ResourceAPI, truthy
from .endpoints.routing import ResourceRouter
from .filters.handlerchain import HandlerChain
from .registry.objects import timestamp
from .registry.resources import Registry, ResourceInfo
from .registry.strategy import DefaultStrategy

log = logging.getLogger(__name__)

# A response copies the headers it is given (a CIMultiDict: the cheap copy, see responses.JSON_HEADERS).
_HEALTH_HEADERS = CIMultiDict({"Content-Type": "text/plain; charset=utf-8"})


class Metrics:
    """Request metrics in a registry of their own (several servers may live in one process).

    Invariant: a scrape (:meth:`handle`) sees every request recorded before it. The request path only
    bumps plain counters (a count per verb, resource and code; a bucket count and a sum per verb); a
    collector of this registry turns them into the ``apiserver_request_total`` counter and the
    ``apiserver_request_duration_seconds`` histogram at scrape time. Their label sets are bounded by the
    verbs, the served resources and the HTTP codes.
    """

    PATH_MEMO = 4096
    BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry()
        self.registry.register(self)  # a collector: collect() yields the families
        self._counts: dict[tuple[str, str, int], int] = {}
        self._latencies: dict[str, list[float]] = {}  # verb -> [count per bucket (+Inf last)..., sum]
        self._paths: dict[str, tuple[bool, str]] = {}  # rest -> (under watch/, resource): see _parse

    def record(self, request: web.Request, rest: str, code: int, start: float) -> None:
        """Count one request of the resource API (``rest`` is the path after the group/version)."""
        elapsed = time.perf_counter() - start
        parsed = self._paths.get(rest)
        if parsed is None:
            parsed = self._parse(rest)
        watch_path, resource = parsed
        method = request.method
        watch = watch_path or (method == "GET" and "watch" in request.query_string
                               and truthy(request.query.get("watch")))
        verb = "WATCH" if watch else method
        key = (verb, resource, code)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        if not watch:
            hist = self._latencies.get(verb)
            if hist is None:
                hist = self._latencies[verb] = [0.0] * (len(self.BUCKETS) + 2)
            hist[bisect_left(self.BUCKETS, elapsed)] += 1
            hist[-1] += elapsed

    def _parse(self, rest: str) -> tuple[bool, str]:
        """(under ``watch/``, the resource) of a path after the group/version, remembered (at most
        :data:`PATH_MEMO` paths, forgotten all at once beyond)."""
        watch_path = rest.startswith("watch/")
        path = rest[6:] if watch_path else rest
        if path.startswith("namespaces/"):
            parts = path.split("/", 3)
            resource = parts[2] if len(parts) >= 3 else "namespaces"
        else:
            resource = path.partition("/")[0]
        if len(self._paths) >= self.PATH_MEMO:
            self._paths.clear()
        parsed = self._paths[rest] = (watch_path, resource)
        return parsed

    def collect(self) -> Iterator[Any]:
        """The Prometheus families (the registry's collector protocol)."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        requests = CounterMetricFamily("apiserver_request", "Requests by verb, resource and HTTP code.",
                                       labels=("verb", "resource", "code"))
        for (verb, resource, code), n in list(self._counts.items()):
            requests.add_metric((verb, resource, str(code)), n)
        yield requests
        duration = HistogramMetricFamily("apiserver_request_duration_seconds",
                                         "Request latency by verb (watches excluded).", labels=("verb",))
        bounds = [*map(floatToGoString, self.BUCKETS), "+Inf"]
        for verb, hist in list(self._latencies.items()):
            cumulative = list(accumulate(hist[:-1]))
            duration.add_metric((verb,), list(zip(bounds, cumulative, strict=True)), hist[-1])
        yield duration

    async def handle(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

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
    behind ``chain`` (:mod:`.filters.handlerchain`; by default one with no filter: errors as Status, metrics)."""
    metrics = Metrics()
    chain = chain or HandlerChain()
    router = ResourceRouter(chain.wrapper(metrics))
    with warnings.catch_warnings():  # aiohttp deprecates a router of one's own, but still takes it
        warnings.simplefilter("ignore", DeprecationWarning)
        # No aiohttp middleware: each route's handler runs the chain itself (ResourceRouter.behind), which
        # spares the frames of aiohttp's middleware machinery on every request.
        app = web.Application(client_max_size=MAX_BODY, router=router)

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
        return web.Response(body=b"ok", headers=_HEALTH_HEADERS)  # as text="ok" answers, without its encoding

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
    app.add_routes([web.RouteDef(r.method, r.path, router.behind(r.handler), r.kwargs) for r in routes])
    return app


def _optional_routes(registry: Registry) -> list[web.RouteDef]:
    routes: list[web.RouteDef] = []
    try:
        from .endpoints import discovery
    except ImportError:
        log.warning("discovery module missing: /api and /apis are not served")
    else:
        routes.extend(discovery.routes(registry))
    try:
        from .schema import openapi
    except ImportError:
        log.warning("openapi module missing: /openapi is not served")
    else:
        routes.extend(openapi.routes(registry))
    return routes
