"""The aiohttp application of the embedded API server: middlewares, routes and the CRD hooks.

Every error leaves as a Kubernetes ``Status``; an unexpected exception is logged and answered with a
500 Status, never a crash. Non-watch requests beyond ``max_inflight`` get 429 with ``Retry-After``.
``/metrics`` serves Prometheus request counters and latencies of the resource API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from . import status as st
from .handlers import MAX_BODY, ResourceAPI, truthy
from .objects import timestamp
from .registry import Registry, ResourceInfo

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_middleware(max_inflight: int) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Map StatusError / aiohttp errors / crashes to Status responses and cap concurrent short requests."""
    inflight = 0

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        nonlocal inflight
        long_running = truthy(request.query.get("watch")) or "/watch/" in request.path
        if not long_running:
            if inflight >= max_inflight:
                return st.too_many_requests().response()
            inflight += 1
        try:
            return await handler(request)
        except st.StatusError as e:
            return e.response()
        except web.HTTPRequestEntityTooLarge:
            return st.StatusError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY}"
                                  ).response()
        except web.HTTPNotFound:
            return st.route_not_found().response()
        except web.HTTPMethodNotAllowed:
            return st.method_not_allowed().response()
        except web.HTTPException:
            raise
        except ConnectionResetError:
            raise
        except Exception as e:
            log.exception("internal error serving %s %s", request.method, request.path)
            return st.internal_error(f"{type(e).__name__}: {e}").response()
        finally:
            if not long_running:
                inflight -= 1

    return middleware


class Metrics:
    """Request metrics in a registry of their own (several servers may live in one process)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("apiserver_request", "Requests by verb, resource and HTTP code.",
                                ("verb", "resource", "code"), registry=self.registry)
        self.duration = Histogram("apiserver_request_duration_seconds", "Request latency by verb (watches excluded).",
                                  ("verb",), registry=self.registry,
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        # labelled children are looked up once per label set: ``labels()`` validates and locks on every call
        counters: dict[tuple[str, str, int], Any] = {}
        histograms: dict[str, Any] = {}
        requests, duration = self.requests, self.duration
        perf_counter = time.perf_counter

        @web.middleware
        async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
            rest = request.match_info.get("rest")
            if rest is None:
                return await handler(request)
            parts = rest.split("/")
            if parts[0] == "watch":
                parts = parts[1:]
            resource = parts[2] if len(parts) >= 3 and parts[0] == "namespaces" else (parts[0] if parts else "")
            watch = truthy(request.query.get("watch")) or rest.startswith("watch/")
            verb = "WATCH" if watch else request.method
            start = perf_counter()
            code = 500
            try:
                resp = await handler(request)
                code = resp.status
                return resp
            finally:
                key = (verb, resource, code)
                counter = counters.get(key)
                if counter is None:
                    counter = counters[key] = requests.labels(verb, resource, str(code))
                counter.inc()
                if not watch:
                    hist = histograms.get(verb)
                    if hist is None:
                        hist = histograms[verb] = duration.labels(verb)
                    hist.observe(perf_counter() - start)

        return middleware

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


def build_app(api: ResourceAPI, registry: Registry, *, extra_routes: Iterable[web.RouteDef] = (),
              middlewares: Iterable[Any] = (), max_inflight: int = 1000) -> web.Application:
    """The aiohttp application: discovery/OpenAPI routes (when present), health checks and the resource API."""
    metrics = Metrics()
    app = web.Application(client_max_size=MAX_BODY,
                          middlewares=[*middlewares, metrics.middleware(), error_middleware(max_inflight)])

    def crd_prepare(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if old is not None and "status" in old:
            obj["status"] = old["status"]
        crd_status(obj, timestamp(api.clock))

    api.prepare_hooks[("apiextensions.k8s.io", "customresourcedefinitions")] = crd_prepare

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

    routes: list[web.RouteDef] = []
    for path in ("/healthz", "/livez", "/readyz"):
        routes.append(web.get(path, health))
        routes.append(web.get(path + "/{check:.*}", health))
    routes.append(web.get("/metrics", metrics.handle))
    routes.extend(_optional_routes(registry))
    routes.extend(extra_routes)
    routes.append(web.route("*", "/api/{version}/{rest:.+}", api.handle))
    routes.append(web.route("*", "/apis/{group}/{version}/{rest:.+}", api.handle))
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
