"""WebhookServer: admission (validating, mutating) and CRD conversion webhooks over HTTPS (aiohttp).

Register handlers by path, then run the server (the Manager runs it beside its controllers)::

    server = ki.WebhookServer(port=0)
    server.validating("/validate-widgets", check)        # check(request) -> None, or raise ki.Denied(msg)
    server.mutating("/mutate-widgets", default)          # default(obj, request) -> changed obj (or None)
    server.conversion("/convert-widgets", convert)       # convert(obj, desired_api_version) -> obj
    async with server:
        config = server.client_config("/validate-widgets")   # {"url": ..., "caBundle": ...}

Handlers may be coroutine functions or plain functions (plain ones run in a worker thread).

Invariants and limits:

* every request gets a well-formed review back, or a 400 for a body that is not a review (so the API
  server applies its ``failurePolicy``); a handler's exception becomes a denial, never a 500 without a
  review;
* a request body over :data:`MAX_BODY` bytes is refused with 413 before it is read whole;
* a handler that runs longer than ``handler_timeout`` seconds is cancelled and the request denied with
  code 504 (the API server gives up after the configuration's ``timeoutSeconds``, at most 30 s, anyway);
* certificates come from :class:`kinformer.webhook.certs.ServingCerts` and are re-checked every
  ``cert_reload_interval`` seconds on the injected clock, so a rotated secret is served without a restart.

Metrics use controller-runtime's names: ``controller_runtime_webhook_requests_total{webhook,code}``,
``controller_runtime_webhook_requests_in_flight{webhook}``, ``controller_runtime_webhook_latency_seconds{webhook}``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Gauge, Histogram

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.metrics import REGISTRY
from kinformer.webhook import admission
from kinformer.webhook.admission import AdmissionRequest, BadReview, ConversionRequest
from kinformer.webhook.certs import ServingCerts

log = logging.getLogger(__name__)

__all__ = ["MAX_BODY", "WebhookServer"]

MAX_BODY = 8 * 1024 * 1024
"""Largest review body accepted: an object and its old version, each up to etcd's 1.5 MiB, with room."""

REQUESTS = Counter("controller_runtime_webhook_requests_total",
                   "Total number of admission requests by HTTP status code.", ["webhook", "code"], registry=REGISTRY)
IN_FLIGHT = Gauge("controller_runtime_webhook_requests_in_flight",
                  "Current number of admission requests being served.", ["webhook"], registry=REGISTRY)
LATENCY = Histogram("controller_runtime_webhook_latency_seconds",
                    "Histogram of the latency of processing admission requests", ["webhook"], registry=REGISTRY)

ValidatingHandler = Callable[[AdmissionRequest], Any]
MutatingHandler = Callable[[dict[str, Any], AdmissionRequest], Any]
ConversionHandler = Callable[[dict[str, Any], str], Any]


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """Await a coroutine function, or run a plain one in a worker thread (awaiting what it returns)."""
    value = fn(*args) if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


class WebhookServer:
    """An HTTPS server for admission and conversion webhooks, with health endpoints and metrics."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 9443, cert_dir: str | None = None,
                 hosts: list[str] | None = None, handler_timeout: float = 30.0, cert_reload_interval: float = 10.0,
                 shutdown_timeout: float = 5.0, clock: Clock = REAL_CLOCK) -> None:
        self.host = host
        self.port = port
        self.cert_dir = cert_dir
        self.hosts = list(dict.fromkeys([*(hosts or []), host, "127.0.0.1", "localhost"]))
        self.handler_timeout = handler_timeout
        self.cert_reload_interval = cert_reload_interval
        self.shutdown_timeout = shutdown_timeout
        self.clock = clock
        self.certs: ServingCerts | None = None
        self._routes: dict[str, Callable[[web.Request], Awaitable[web.Response]]] = {}
        self._runner: web.AppRunner | None = None
        self._reloader: asyncio.Task[None] | None = None
        self.started = asyncio.Event()

    # -- registration ------------------------------------------------------------------------------

    def validating(self, path: str, handler: ValidatingHandler) -> None:
        """Serve a validating webhook at ``path``: ``handler(request)`` allows by returning, denies by raising."""
        self._add(path, self._admission(path, handler, mutating=False))

    def mutating(self, path: str, handler: MutatingHandler) -> None:
        """Serve a mutating webhook at ``path``: ``handler(obj, request)`` returns the object to store.

        ``obj`` is a mutable copy; returning ``None`` means "``obj`` as I changed it". The difference
        to the original is sent as a JSONPatch; no difference allows the request unchanged.
        """
        self._add(path, self._admission(path, handler, mutating=True))

    def conversion(self, path: str, handler: ConversionHandler) -> None:
        """Serve a CRD conversion webhook at ``path``: ``handler(obj, desired_api_version)`` returns the
        converted object (its ``apiVersion`` is set to the desired one if the handler left it)."""
        self._add(path, self._conversion(path, handler))

    def _add(self, path: str, route: Callable[[web.Request], Awaitable[web.Response]]) -> None:
        if not path.startswith("/"):
            raise ValueError(f"webhook path must start with '/': {path!r}")
        if path in self._routes or path in ("/healthz", "/readyz"):
            raise ValueError(f"webhook path {path!r} is already registered")
        self._routes[path] = route

    @property
    def paths(self) -> list[str]:
        """The registered webhook paths (handlers may be registered before or after the server starts)."""
        return list(self._routes)

    # -- addresses -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``https://host:port`` of the running server (the bound port when started with ``port=0``)."""
        if self._runner is None:
            raise RuntimeError("the webhook server is not running")
        return f"https://{self.host}:{self.port}"

    @property
    def ca_bundle(self) -> bytes:
        """PEM of the CA that API servers must trust to call this server."""
        if self.certs is None:
            raise RuntimeError("the webhook server is not running")
        return self.certs.ca_bundle

    def client_config(self, path: str) -> dict[str, str]:
        """A webhook configuration's ``clientConfig`` for ``path``: URL and base64 ``caBundle``."""
        return {"url": self.url + path, "caBundle": base64.b64encode(self.ca_bundle).decode()}

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load (or generate) certificates and start listening; return once the port is bound."""
        self.certs = await asyncio.to_thread(ServingCerts, self.cert_dir, self.hosts)
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/readyz", self._health)
        app.router.add_post("/{path:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=self.shutdown_timeout)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.certs.context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self._reloader = asyncio.create_task(self._reload_certs(), name="webhook-cert-reloader")
        self.started.set()
        log.info("webhook server listening on %s (%d webhooks)", self.url, len(self._routes))

    async def stop(self) -> None:
        """Stop listening; in-flight requests get ``shutdown_timeout`` seconds to finish, then are cancelled."""
        if self._reloader is not None:
            self._reloader.cancel()
            try:
                await self._reloader
            except asyncio.CancelledError:
                pass
            self._reloader = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.certs is not None:
            self.certs.close()
        self.started.clear()

    async def __aenter__(self) -> WebhookServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def _reload_certs(self) -> None:
        assert self.certs is not None
        while True:
            await self.clock.sleep(self.cert_reload_interval)
            try:
                await asyncio.to_thread(self.certs.refresh)
            except Exception:  # a broken file must not stop later reloads
                log.exception("webhook certificate check failed")

    # -- serving ---------------------------------------------------------------------------------------

    async def _health(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _dispatch(self, request: web.Request) -> web.Response:
        route = self._routes.get(request.path)
        if route is None:
            return web.Response(status=404, text=f"no webhook at {request.path}")
        return await route(request)

    def _admission(self, path: str, handler: Callable[..., Any], *,
                   mutating: bool) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            return await self._serve(path, request, lambda body: self._review(body, handler, mutating))

        return serve

    def _conversion(self, path: str, handler: ConversionHandler) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            return await self._serve(path, request, lambda body: self._convert(body, handler))

        return serve

    async def _serve(self, path: str, request: web.Request,
                     answer: Callable[[bytes], Awaitable[bytes]]) -> web.Response:
        started = time.perf_counter()
        IN_FLIGHT.labels(path).inc()
        code = 200
        try:
            try:
                body = await request.read()
                text = await answer(body)
            except web.HTTPRequestEntityTooLarge:
                code = 413
                return web.Response(status=413, text=f"review body over {MAX_BODY} bytes")
            except BadReview as exc:
                code = 400
                return web.Response(status=400, text=str(exc))
            return web.Response(body=text, content_type="application/json")
        finally:
            IN_FLIGHT.labels(path).dec()
            REQUESTS.labels(path, str(code)).inc()
            LATENCY.labels(path).observe(time.perf_counter() - started)

    async def _run_handler(self, fn: Callable[..., Any], *args: Any) -> Any:
        async with asyncio.timeout(self.handler_timeout):
            return await _call(fn, *args)

    async def _review(self, body: bytes, handler: Callable[..., Any], mutating: bool) -> bytes:
        req = admission.parse_admission_review(body)
        try:
            if not mutating:
                await self._run_handler(handler, req)
                return admission.admission_response(req)
            original = req.object if req.object is not None else {}
            obj = admission.mutable_copy(original)
            result = await self._run_handler(handler, obj, req)
            mutated = obj if result is None else result
            if not isinstance(mutated, Mapping):
                raise TypeError(f"mutating handler returned {type(mutated).__name__}, not an object")
            return admission.admission_response(req, patch=admission.json_patch(original, mutated))
        except TimeoutError:
            log.error("webhook handler for %s %s timed out after %.1fs", req.operation, req.name, self.handler_timeout)
            return admission.admission_response(req, allowed=False, code=504, reason="Timeout",
                                                message=f"webhook handler timed out after {self.handler_timeout}s")
        except Exception as exc:  # every failure is an answer, so the API server can apply its policy
            if not isinstance(exc, admission.APIError):
                log.exception("webhook handler for %s %s failed", req.operation, req.name)
            return admission.denial(req, exc)

    async def _convert(self, body: bytes, handler: ConversionHandler) -> bytes:
        req: ConversionRequest = admission.parse_conversion_review(body)
        converted: list[dict[str, Any]] = []
        try:
            for obj in req.objects:
                result = await self._run_handler(handler, admission.mutable_copy(obj), req.desired_api_version)
                if not isinstance(result, Mapping):
                    raise TypeError(f"conversion handler returned {type(result).__name__}, not an object")
                converted.append({**result, "apiVersion": req.desired_api_version})
        except TimeoutError:
            return admission.conversion_response(req, None, f"conversion timed out after {self.handler_timeout}s")
        except Exception as exc:
            log.exception("conversion to %s failed", req.desired_api_version)
            return admission.conversion_response(req, None, f"conversion to {req.desired_api_version} failed: {exc}")
        return admission.conversion_response(req, converted)
