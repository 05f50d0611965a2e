"""The asyncio Kubernetes API client: transport, retries, errors and the REST verbs.

One aiohttp session per :class:`Client` (created lazily inside the running loop, so a Client can be built
anywhere); connections are pooled and kept alive. Non-2xx answers become typed exceptions from
:mod:`kinformer.errors` carrying the server's ``Status``.

Retries follow client-go: any verb is retried (up to ``max_retries``) when the server answers 429 or 5xx
*with* a ``Retry-After`` header, after waiting that many seconds; GETs are also retried after a connection
reset. A 401 makes a refreshable credential (token file, exec plugin) refresh once and the request repeat.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import ssl
import time
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import aiohttp
import orjson

from kinformer import tracing
from kinformer.client.config import AuthProvider, ClientConfig, StaticTokenAuth, TokenFileAuth, build_ssl_context
from kinformer.client.discovery import Discovery, Resource
from kinformer.client.metrics import RequestMetrics
from kinformer.client.objects import LazyObject, decode_list, decode_object, encode
from kinformer.client.podexec import PROTOCOLS, ExecSession
from kinformer.client.podlogs import iter_lines, log_params
from kinformer.client.portforward import PortForward
from kinformer.client.watch import iter_event_batches
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import APIError, from_status
from kinformer.listwatch import ListOptions, ListResult, WatchBatch, WatchEvent
from kinformer.typed_resources import ObjT, resource_spec

#: A resource: its name (any spelling discovery resolves), a resolved Resource, or a class that stands for it
#: (a :mod:`kinformer.kinds` TypedDict or the user's own; see :mod:`kinformer.typed_resources`).
ResourceRef = str | Resource | type
#: A patch body: an object (merge, strategic merge, apply) or a list of operations (JSON patch).
PatchBody = Mapping[str, object] | Sequence[Mapping[str, object]]

if TYPE_CHECKING:
    from kinformer.client.listwatch import ClientListerWatcher
    from kinformer.client.resource import ResourceClient

__all__ = ["PATCH_CONTENT_TYPES", "Client"]

log = logging.getLogger(__name__)

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}

_JSON = "application/json"
_LIST_ATTEMPTS = 3
_PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
_USER_AGENT = "kinformer/0.1"


def _is_pem(value: str | bytes) -> bool:
    if isinstance(value, bytes):
        return b"-----BEGIN" in value
    return "-----BEGIN" in value


def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
    value = resp.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return float(max(seconds, 0))


def _connection_reset(exc: BaseException) -> bool:
    if isinstance(exc, aiohttp.ServerDisconnectedError | ConnectionResetError):
        return True
    return isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE)


class _TokenBucket:
    """qps/burst throttle (client-go's default rate limiter when configured)."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps, self.burst, self.clock = qps, max(1, burst), clock
        self.tokens = float(self.burst)
        self.last = clock.now()

    async def wait(self) -> None:
        now = self.clock.now()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1.0
        if self.tokens < 0:
            await self.clock.sleep(-self.tokens / self.qps)


class _Turn:
    """One request's turn among a client's ``max_in_flight``: held while the request waits on the server and its
    answer is read, given back while it backs off before a retry (a sleeping request holds no connection).

    Invariant: ``held`` is True exactly while this request holds one unit of ``slots``."""

    __slots__ = ("held", "slots")

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self.slots, self.held = slots, False

    async def take(self) -> None:
        if not self.held:
            await self.slots.acquire()  # (cancelled while waiting: nothing taken)
            self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.slots.release()


class Client:
    """An asyncio client for one Kubernetes API server (embedded or real).

    ``Client(url, token=..., ca=..., ...)`` or ``await Client.from_kubeconfig()`` / ``Client.in_cluster()`` /
    ``await Client.auto()``. ``ca``, ``client_cert`` and ``client_key`` take a file path or PEM text. Use it as
    an async context manager, or call :meth:`close`.

    ``timeout`` bounds each ordinary request (seconds, None: unbounded); ``list_timeout`` (default: ``timeout``)
    bounds each list page, which is retried on timeout (3 attempts in all, each logged); watches have no total
    timeout and end by the server's ``timeoutSeconds`` (their reads time out after ``watch_idle_timeout``, by default
    ``timeoutSeconds + 60`` when set). ``pool_size`` caps pooled connections (0: no cap, so long watches never
    starve other requests). ``qps``/``burst`` enable client-side throttling as client-go's rate limiter.
    ``max_in_flight`` bounds the ordinary requests (every verb but the streams: watches, followed logs, exec)
    waiting on the server at once (0: no bound): the others queue for a turn, in order, and a request backing
    off before a retry gives its turn back meanwhile; so those requests never hold more than that many
    connections, as client-go's HTTP/2 multiplexes its requests over one, and a burst of concurrent writes reuses
    pooled connections instead of opening one each.

    Objects come back as :class:`~kinformer.client.objects.LazyObject` (read-only Mappings; ``to_dict()`` for a
    mutable copy). Namespaced single-object verbs default ``namespace`` to the body's namespace, then to
    :attr:`default_namespace`; list and watch without a namespace cover all namespaces.
    """

    def __init__(self, url: str | None = None, token: str | None = None, ca: str | bytes | None = None,
                 verify: bool = True, client_cert: str | bytes | None = None, client_key: str | bytes | None = None,
                 token_file: str | None = None, headers: Mapping[str, str] | None = None, *,
                 timeout: float | None = 60.0, connect_timeout: float = 10.0, max_retries: int = 10,
                 qps: float | None = None, burst: int = 10, watch_idle_timeout: float | None = None,
                 default_namespace: str | None = None, auth: AuthProvider | None = None,
                 config: ClientConfig | None = None, clock: Clock = REAL_CLOCK, pool_size: int = 0,
                 list_timeout: float | None = None, max_in_flight: int = 0) -> None:
        if max_in_flight < 0:
            raise ValueError(f"max_in_flight must be >= 0, got {max_in_flight}")
        if config is None:
            if not url:
                raise ValueError("Client needs a server URL (or use from_kubeconfig/in_cluster/auto)")
            config = ClientConfig(server=url.rstrip("/"), verify=verify)
            if ca is not None:
                if _is_pem(ca):
                    config.ca_data = ca
                else:
                    config.ca_file = os.fsdecode(ca)
            for value, data_attr, file_attr in ((client_cert, "client_cert_data", "client_cert_file"),
                                                (client_key, "client_key_data", "client_key_file")):
                if value is not None:
                    setattr(config, data_attr if _is_pem(value) else file_attr, value)
            if auth is not None:
                config.auth = auth
            elif token is not None:
                config.auth = StaticTokenAuth(token)
            elif token_file is not None:
                config.auth = TokenFileAuth(token_file)
        if headers:
            config.headers.update(headers)
        if default_namespace:
            config.default_namespace = default_namespace
        self.config = config
        self.url = config.server
        self.default_namespace = config.default_namespace
        self.timeout = timeout
        self.list_timeout = list_timeout if list_timeout is not None else timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.watch_idle_timeout = watch_idle_timeout
        self.clock = clock
        self._pool_size = pool_size
        self._throttle = _TokenBucket(qps, burst, clock) if qps else None
        self.max_in_flight = max_in_flight
        self._turns: asyncio.Semaphore | None = None  # made with the session, in its loop
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = True
        self._discovery = Discovery(self.get_json)
        self._base_headers = {"Accept": _JSON, "User-Agent": _USER_AGENT, **config.headers}
        self._metrics = RequestMetrics(urllib.parse.urlsplit(self.url).netloc)

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(cls, path: str | list[str] | None = None, context: str | None = None,
                              **kwargs: Any) -> Client:
        """A client for ``context`` (default: current-context) of the kubeconfig at ``path`` (default:
        ``$KUBECONFIG`` merged, else ``~/.kube/config``)."""
        from kinformer.client.kubeconfig import load_kubeconfig

        config = await asyncio.to_thread(load_kubeconfig, path, context)
        return cls(config=config, **kwargs)

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] | None = None, sa_dir: str | None = None, **kwargs: Any) -> Client:
        """A client for the pod's service account (token re-read when it rotates)."""
        from kinformer.client.incluster import SERVICE_ACCOUNT_DIR, in_cluster_config

        return cls(config=in_cluster_config(env, sa_dir or SERVICE_ACCOUNT_DIR), **kwargs)

    @classmethod
    async def auto(cls, **kwargs: Any) -> Client:
        """In-cluster configuration when running in a pod, else the kubeconfig."""
        from kinformer.client.incluster import is_in_cluster

        if is_in_cluster():
            return cls.in_cluster(**kwargs)
        return await cls.from_kubeconfig(**kwargs)

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close pooled connections. The client may be used again afterwards (a new session is made)."""
        session, self._session = self._session, None
        self._turns = None
        if session is not None and not session.closed:
            await session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            self._ssl = build_ssl_context(self.config)
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._pool_size, ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout)
            session = self._session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                                            skip_auto_headers=("User-Agent",))
        return session

    # -- transport ----------------------------------------------------------------------------------------

    async def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(self._base_headers)
        auth = self.config.auth
        if auth is not None:
            headers.update(await auth.headers())
        if extra:
            headers.update(extra)
        return headers

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      data: bytes | None = None, headers: Mapping[str, str] | None = None,
                      timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientResponse:
        """Send one request with retries; return the (unread) 2xx response or raise a typed APIError.

        The caller must read and release the response (or use :meth:`request_bytes`). Inside a recording
        OpenTelemetry span, the request has a child span of its own (:mod:`kinformer.tracing`).
        """
        return await self._request(method, path, params, data, headers, timeout, None)

    async def _request(self, method: str, path: str, params: Mapping[str, str] | None, data: bytes | None,
                       headers: Mapping[str, str] | None, timeout: aiohttp.ClientTimeout | None,
                       turn: _Turn | None) -> aiohttp.ClientResponse:
        if tracing.ENABLED:
            traced = dict(headers or {})
            with tracing.api_span(method, path, params, traced) as span:
                if span is not None:
                    try:
                        resp = await self._send(method, path, params, data, traced, timeout, turn)
                    except APIError as exc:
                        tracing.set_status_code(span, exc.code)
                        raise
                    tracing.set_status_code(span, resp.status)
                    return resp
        return await self._send(method, path, params, data, headers, timeout, turn)

    async def _send(self, method: str, path: str, params: Mapping[str, str] | None, data: bytes | None,
                    headers: Mapping[str, str] | None, timeout: aiohttp.ClientTimeout | None,
                    turn: _Turn | None = None) -> aiohttp.ClientResponse:
        """The attempts of one request (``turn``: taken for each attempt, given back before each back-off)."""
        session = self._get_session()
        url = self.url + path
        attempt = 0
        refreshed = False
        kwargs: dict[str, Any] = {}
        if self.config.tls_server_name:
            kwargs["server_hostname"] = self.config.tls_server_name
        if self.config.proxy_url:
            kwargs["proxy"] = self.config.proxy_url
        if timeout is not None:
            kwargs["timeout"] = timeout
        while True:
            if self._throttle is not None:
                await self._throttle.wait()
            if turn is not None:
                await turn.take()
            hdrs = await self._headers(headers)
            start = time.perf_counter()
            try:
                resp = await session.request(method, url, params=params, data=data, headers=hdrs, **kwargs)
            except (aiohttp.ClientError, OSError) as exc:  # (TimeoutError is an OSError)
                self._metrics.observe(method, None, time.perf_counter() - start)
                if method == "GET" and attempt < self.max_retries and _connection_reset(exc):
                    attempt += 1
                    delay = min(0.1 * 2 ** (attempt - 1), 5.0)
                    log.debug("%s %s: %s; retry %d in %.1fs", method, path, exc, attempt, delay)
                    await self._back_off(delay, turn)
                    continue
                raise
            status = resp.status
            self._metrics.observe(method, status, time.perf_counter() - start)
            if status < 400:
                return resp
            body = await resp.read()
            resp.release()
            if status == 401 and not refreshed and self.config.auth is not None and await self.config.auth.refresh():
                refreshed = True
                continue
            retry_after = _retry_after(resp)
            if retry_after is not None and (status == 429 or status >= 500) and attempt < self.max_retries:
                attempt += 1
                log.debug("%s %s: %d, Retry-After %.0fs (retry %d)", method, path, status, retry_after, attempt)
                await self._back_off(retry_after, turn)
                continue
            raise self._error(status, body, retry_after)

    async def _back_off(self, delay: float, turn: _Turn | None) -> None:
        if turn is not None:
            turn.give_back()
        await self.clock.sleep(delay)

    @staticmethod
    def _error(status: int, body: bytes, retry_after: float | None) -> APIError:
        doc: Any = None
        if body:
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError:
                doc = None
        if not isinstance(doc, dict) or doc.get("kind") != "Status":
            text = body.decode("utf-8", errors="replace").strip() if body else ""
            doc = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                   "message": text[:2000] or f"HTTP {status}"}
        return from_status(doc, status, retry_after)

    async def request_bytes(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                            data: bytes | None = None, headers: Mapping[str, str] | None = None,
                            timeout: aiohttp.ClientTimeout | None = None) -> bytes:
        """:meth:`request` and read the whole body; with ``max_in_flight``, within a turn (see the class)."""
        turn = None
        if self.max_in_flight:
            slots = self._turns
            if slots is None:
                slots = self._turns = asyncio.Semaphore(self.max_in_flight)
            turn = _Turn(slots)
        try:
            resp = await self._request(method, path, params, data, headers, timeout, turn)
            try:
                return await resp.read()
            finally:
                resp.release()
        finally:
            if turn is not None:
                turn.give_back()

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """GET ``path`` and decode the JSON body into plain Python objects."""
        return orjson.loads(await self.request_bytes("GET", path, params=params))

    # -- resources ----------------------------------------------------------------------------------------

    async def resolve(self, resource: ResourceRef) -> Resource:
        """Resolve a resource name (``"cm"``, ``"apps/v1/deployments"``, ``"deployments.apps"``...) or a class
        standing for one (:func:`~kinformer.typed_resources.resource_spec`) by discovery."""
        return await self._discovery.resolve(resource_spec(resource) if isinstance(resource, type) else resource)

    def invalidate_discovery(self) -> None:
        """Forget cached discovery documents (e.g. after installing a CRD)."""
        self._discovery.invalidate()

    async def resource(self, resource: ResourceRef, namespace: str | None = None) -> ResourceClient:
        """A :class:`~kinformer.client.resource.ResourceClient` bound to one resource (and namespace)."""
        from kinformer.client.resource import ResourceClient

        return ResourceClient(self, await self.resolve(resource), namespace)

    def lister_watcher(self, resource: ResourceRef, *, namespace: str | None = None,
                       label_selector: str | None = None, field_selector: str | None = None,
                       metadata_only: bool = False) -> ClientListerWatcher:
        """A :class:`~kinformer.listwatch.ListerWatcher` over this client (resolves lazily);
        ``metadata_only`` lists and watches PartialObjectMetadata."""
        from kinformer.client.listwatch import ClientListerWatcher

        spec = resource_spec(resource) if isinstance(resource, type) else resource
        return ClientListerWatcher(self, spec, namespace=namespace, label_selector=label_selector,
                                   field_selector=field_selector, metadata_only=metadata_only)

    def _object_namespace(self, res: Resource, namespace: str | None, body: Any = None) -> str | None:
        if not res.namespaced:
            return None
        if namespace:
            return namespace
        if isinstance(body, Mapping):
            meta = body.get("metadata")
            if isinstance(meta, Mapping) and meta.get("namespace"):
                return meta["namespace"]
        return self.default_namespace

    # -- verbs --------------------------------------------------------------------------------------------

    @overload
    async def get(self, resource: str | Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> LazyObject: ...

    @overload
    async def get(self, resource: type[ObjT], name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> ObjT: ...

    async def get(self, resource: ResourceRef, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> Any:
        """GET one object (raises :class:`~kinformer.errors.NotFound`)."""
        res = await self.resolve(resource)
        path = res.path(self._object_namespace(res, namespace), name, subresource)
        return decode_object(await self.request_bytes("GET", path))

    async def list_page(self, resource: ResourceRef, options: ListOptions | None = None,
                        namespace: str | None = None, *, headers: Mapping[str, str] | None = None,
                        drop_managed_fields: bool = False) -> ListResult:
        """One page of a list with exactly ``options`` (no auto-pagination); ``headers`` e.g. an ``Accept``;
        ``drop_managed_fields``: each item as its ``without_managed_fields()`` copy (cut while decoding)."""
        res = await self.resolve(resource)
        options = options or ListOptions()
        path = res.path(namespace if res.namespaced else None)
        body = await self._list_bytes(path, options.to_query(), headers)
        items, rv, cont, remaining = decode_list(body, drop_managed_fields=drop_managed_fields)
        return ListResult(cast("list[Mapping[str, Any]]", items), rv, cont, remaining)

    async def _list_bytes(self, path: str, params: dict[str, str], headers: Mapping[str, str] | None) -> bytes:
        """GET a list body within ``list_timeout`` seconds (a response that never ends is cut), retried up to
        ``_LIST_ATTEMPTS`` times in all, each timeout logged; the last one raises TimeoutError."""
        for attempt in range(1, _LIST_ATTEMPTS + 1):
            try:
                async with asyncio.timeout(self.list_timeout):
                    return await self.request_bytes("GET", path, params=params, headers=headers)
            except TimeoutError:
                if attempt == _LIST_ATTEMPTS:
                    raise
                log.warning("list %s: no complete response within %gs (attempt %d of %d); retrying", path,
                            self.list_timeout, attempt, _LIST_ATTEMPTS)
        raise AssertionError("unreachable")

    async def iter_list(self, resource: ResourceRef, namespace: str | None = None, *,
                        label_selector: str | None = None, field_selector: str | None = None,
                        limit: int | None = 500, resource_version: str | None = None) -> AsyncIterator[LazyObject]:
        """Every matching object, page by page (``limit`` per page), following continue tokens."""
        options = ListOptions(resource_version=resource_version, limit=limit, label_selector=label_selector,
                              field_selector=field_selector)
        while True:
            page = await self.list_page(resource, options, namespace)
            for item in cast("list[LazyObject]", page.items):
                yield item
            if not page.continue_:
                return
            options = options.copy(continue_=page.continue_, resource_version=None)

    async def list(self, resource: ResourceRef, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None,
                   limit: int | None = None, resource_version: str | None = None) -> ListResult:
        """All matching objects. ``limit`` is the page size: pages are fetched until the end and returned as one
        :class:`ListResult` whose ``resource_version`` is the first page's (the list is consistent at it)."""
        options = ListOptions(resource_version=resource_version, limit=limit, label_selector=label_selector,
                              field_selector=field_selector)
        first = await self.list_page(resource, options, namespace)
        items = first.items
        page = first
        while page.continue_:
            options = options.copy(continue_=page.continue_, resource_version=None)
            page = await self.list_page(resource, options, namespace)
            items.extend(page.items)
        return ListResult(items, first.resource_version, None, None)

    async def watch(self, resource: ResourceRef, namespace: str | None = None, *,
                    resource_version: str | None = None, label_selector: str | None = None,
                    field_selector: str | None = None, timeout_seconds: int | None = None,
                    allow_watch_bookmarks: bool = False, send_initial_events: bool | None = None,
                    resource_version_match: str | None = None) -> AsyncIterator[WatchEvent]:
        """Watch changes: an async iterator of :class:`WatchEvent` (``ERROR`` events carry the Status; they are
        yielded, not raised). Ends when the server closes the stream; ``aclose()`` it to stop early."""
        options = ListOptions(resource_version=resource_version, resource_version_match=resource_version_match,
                              label_selector=label_selector, field_selector=field_selector,
                              timeout_seconds=timeout_seconds, allow_watch_bookmarks=allow_watch_bookmarks,
                              send_initial_events=send_initial_events)
        async for event in self.watch_stream(resource, options, namespace):
            yield event

    async def watch_stream(self, resource: ResourceRef, options: ListOptions, namespace: str | None = None, *,
                           headers: Mapping[str, str] | None = None, as_metadata: bool = False,
                           drop_managed_fields: bool = False) -> AsyncIterator[WatchEvent]:
        """Open a watch with exactly ``options`` (and extra ``headers``) and decode its events as they arrive;
        ``as_metadata``: each object event's object is a PartialObjectMetadata (whole objects cut down);
        ``drop_managed_fields``: each ADDED/MODIFIED/DELETED event's object as its ``without_managed_fields()``
        copy (cut while decoding)."""
        batches = self.watch_batches(resource, options, namespace, headers=headers, as_metadata=as_metadata,
                                     drop_managed_fields=drop_managed_fields)
        try:
            async for batch in batches:
                for event in batch:
                    yield event
        finally:
            await batches.aclose()  # the response is released or closed now, not when the generator is collected

    async def watch_batches(self, resource: ResourceRef, options: ListOptions, namespace: str | None = None, *,
                            headers: Mapping[str, str] | None = None, as_metadata: bool = False,
                            drop_managed_fields: bool = False) -> AsyncGenerator[WatchBatch, None]:
        """:meth:`watch_stream`, as one list of events per chunk read (the informer's path: no await per
        event)."""
        res = await self.resolve(resource)
        params = options.to_query()
        params["watch"] = "true"
        idle = self.watch_idle_timeout
        if idle is None and options.timeout_seconds:
            idle = options.timeout_seconds + 60.0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout, sock_read=idle)
        resp = await self.request("GET", res.path(namespace if res.namespaced else None), params=params,
                                  timeout=timeout, headers=headers)
        clean = False
        try:
            async for batch in iter_event_batches(resp.content.iter_any(), as_metadata=as_metadata,
                                                  drop_managed_fields=drop_managed_fields):
                yield batch
            clean = True
        finally:
            if clean:
                resp.release()
            else:
                resp.close()

    @overload
    async def create(self, resource: str | Resource, body: Mapping[str, object], namespace: str | None = None, *,
                     field_manager: str | None = None, dry_run: bool = False,
                     subresource: str | None = None) -> LazyObject: ...

    @overload
    async def create(self, resource: type[ObjT], body: Mapping[str, object], namespace: str | None = None, *,
                     field_manager: str | None = None, dry_run: bool = False,
                     subresource: str | None = None) -> ObjT: ...

    async def create(self, resource: ResourceRef, body: Mapping[str, object], namespace: str | None = None, *,
                     field_manager: str | None = None, dry_run: bool = False,
                     subresource: str | None = None) -> Any:
        """POST a new object (raises :class:`~kinformer.errors.AlreadyExists`); with ``subresource``, POST
        ``body`` to that subresource of the object ``body`` names (``pods/<name>/binding``, ``.../eviction``)."""
        res = await self.resolve(resource)
        name = cast(Mapping[str, Any], body["metadata"])["name"] if subresource else None
        path = res.path(self._object_namespace(res, namespace, body), name, subresource)
        return await self._write("POST", path, body, _JSON, field_manager, dry_run)

    @overload
    async def replace(self, resource: str | Resource, body: Mapping[str, object], name: str | None = None,
                      namespace: str | None = None, *, subresource: str | None = None,
                      field_manager: str | None = None, dry_run: bool = False) -> LazyObject: ...

    @overload
    async def replace(self, resource: type[ObjT], body: Mapping[str, object], name: str | None = None,
                      namespace: str | None = None, *, subresource: str | None = None,
                      field_manager: str | None = None, dry_run: bool = False) -> ObjT: ...

    async def replace(self, resource: ResourceRef, body: Mapping[str, object], name: str | None = None,
                      namespace: str | None = None, *, subresource: str | None = None,
                      field_manager: str | None = None, dry_run: bool = False) -> Any:
        """PUT the whole object; a stale ``metadata.resourceVersion`` raises :class:`~kinformer.errors.Conflict`."""
        res = await self.resolve(resource)
        name = name or cast(Mapping[str, Any], body["metadata"])["name"]
        path = res.path(self._object_namespace(res, namespace, body), name, subresource)
        return await self._write("PUT", path, body, _JSON, field_manager, dry_run)

    @overload
    async def patch(self, resource: str | Resource, name: str, body: PatchBody, patch_type: str = "merge",
                    namespace: str | None = None, *, field_manager: str | None = None, force: bool | None = None,
                    subresource: str | None = None, dry_run: bool = False) -> LazyObject: ...

    @overload
    async def patch(self, resource: type[ObjT], name: str, body: PatchBody, patch_type: str = "merge",
                    namespace: str | None = None, *, field_manager: str | None = None, force: bool | None = None,
                    subresource: str | None = None, dry_run: bool = False) -> ObjT: ...

    async def patch(self, resource: ResourceRef, name: str, body: PatchBody, patch_type: str = "merge",
                    namespace: str | None = None, *, field_manager: str | None = None, force: bool | None = None,
                    subresource: str | None = None, dry_run: bool = False) -> Any:
        """PATCH with ``patch_type`` ``"merge"``, ``"json"`` (a list of operations), ``"strategic"`` or
        ``"apply"`` (server-side apply: ``field_manager`` required, ``force`` takes over conflicting fields)."""
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}; use one of {sorted(PATCH_CONTENT_TYPES)}")
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        res = await self.resolve(resource)
        path = res.path(self._object_namespace(res, namespace, body), name, subresource)
        params = {"force": "true" if force else "false"} if force is not None and patch_type == "apply" else None
        return await self._write("PATCH", path, body, content_type, field_manager, dry_run, params)

    async def delete(self, resource: ResourceRef, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, preconditions: Mapping[str, str] | None = None,
                     grace_period_seconds: int | None = None, dry_run: bool = False) -> LazyObject:
        """DELETE one object. Returns the server's answer: the object (when it lingers, e.g. finalizers or
        pods) or a Success ``Status``."""
        res = await self.resolve(resource)
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            opts["propagationPolicy"] = propagation_policy
        if preconditions:
            opts["preconditions"] = dict(preconditions)
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        path = res.path(self._object_namespace(res, namespace), name)
        return await self._write("DELETE", path, opts, _JSON, None, dry_run)

    async def _write(self, method: str, path: str, body: Any, content_type: str, field_manager: str | None,
                     dry_run: bool, params: dict[str, str] | None = None) -> LazyObject:
        params = dict(params or {})
        if field_manager:
            params["fieldManager"] = field_manager
        if dry_run:
            params["dryRun"] = "All"
        data = await self.request_bytes(method, path, params=params or None, data=encode(body),
                                        headers={"Content-Type": content_type})
        return decode_object(data)

    # -- pod logs ---------------------------------------------------------------------------------------

    @overload
    def logs(self, name: str, namespace: str | None = None, *, container: str | None = None,
             follow: Literal[False] = False, since_seconds: int | None = None, since_time: str | None = None,
             tail_lines: int | None = None, previous: bool = False, timestamps: bool = False,
             limit_bytes: int | None = None) -> Coroutine[Any, Any, str]: ...

    @overload
    def logs(self, name: str, namespace: str | None = None, *, container: str | None = None,
             follow: Literal[True], since_seconds: int | None = None, since_time: str | None = None,
             tail_lines: int | None = None, previous: bool = False, timestamps: bool = False,
             limit_bytes: int | None = None) -> AsyncIterator[str]: ...

    def logs(self, name: str, namespace: str | None = None, *, container: str | None = None, follow: bool = False,
             since_seconds: int | None = None, since_time: str | None = None, tail_lines: int | None = None,
             previous: bool = False, timestamps: bool = False,
             limit_bytes: int | None = None) -> Coroutine[Any, Any, str] | AsyncIterator[str]:
        """A pod's log (``kubectl logs``): ``await client.logs(name)`` is the whole text; with ``follow=True``,
        ``async for line in client.logs(name, follow=True)`` yields lines as the container writes them until
        it ends (``aclose()`` to stop early). ``container`` (needed when the pod has several), ``since_seconds``
        or ``since_time`` (RFC 3339), ``tail_lines``, ``previous`` (the last terminated instance),
        ``timestamps``, ``limit_bytes`` as kubectl's flags. Raises NotFound, BadRequest (e.g. no such
        container) as the server answers; ValueError for invalid options."""
        params = log_params(container=container, follow=follow, since_seconds=since_seconds, since_time=since_time,
                            tail_lines=tail_lines, previous=previous, timestamps=timestamps, limit_bytes=limit_bytes)
        if follow:
            return self._follow_logs(name, namespace, params)
        return self._read_logs(name, namespace, params)

    async def _log_path(self, name: str, namespace: str | None) -> str:
        return _PODS.path(self._object_namespace(_PODS, namespace), name, "log")  # core v1: no discovery needed

    async def _read_logs(self, name: str, namespace: str | None, params: dict[str, str]) -> str:
        path = await self._log_path(name, namespace)
        body = await self.request_bytes("GET", path, params=params, headers={"Accept": "*/*"})
        return body.decode("utf-8", errors="replace")

    async def _follow_logs(self, name: str, namespace: str | None, params: dict[str, str]) -> AsyncIterator[str]:
        path = await self._log_path(name, namespace)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout)  # a quiet log is no failure
        resp = await self.request("GET", path, params=params, headers={"Accept": "*/*"}, timeout=timeout)
        try:
            async for line in iter_lines(resp.content.iter_any()):
                yield line
        finally:
            resp.close()

    # -- exec and attach ----------------------------------------------------------------------------------

    async def exec(self, name: str, command: Sequence[str], namespace: str | None = None, *,
                   container: str | None = None, stdin: bool = False, stdout: bool = True, stderr: bool = True,
                   tty: bool = False) -> ExecSession:
        """Run ``command`` in a container of pod ``name`` (``kubectl exec``), over a WebSocket
        (:mod:`kinformer.client.podexec`); ``async with await client.exec(...) as session:``."""
        if not command:
            raise ValueError("exec needs a command")
        return await self._stream("exec", name, namespace, [("command", c) for c in command], container=container,
                                  stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)

    async def attach(self, name: str, namespace: str | None = None, *, container: str | None = None,
                     stdin: bool = False, stdout: bool = True, stderr: bool = True, tty: bool = False) -> ExecSession:
        """Attach to the running process of a container of pod ``name`` (``kubectl attach``)."""
        return await self._stream("attach", name, namespace, [], container=container, stdin=stdin, stdout=stdout,
                                  stderr=stderr, tty=tty)

    async def _stream(self, subresource: str, name: str, namespace: str | None, command: Sequence[tuple[str, str]],
                      *, container: str | None, **flags: bool) -> ExecSession:
        params = [*command, *([("container", container)] if container else []),
                  *((flag, "true") for flag, on in flags.items() if on)]
        return ExecSession(await self.pod_websocket(name, namespace, subresource, params, PROTOCOLS))

    async def pod_websocket(self, name: str, namespace: str | None, subresource: str, params: Sequence[tuple[str, str]],
                            protocols: Sequence[str]) -> aiohttp.ClientWebSocketResponse:
        """Open a WebSocket on a pod subresource (``exec``, ``attach``, ``portforward``) offering ``protocols``;
        a refused upgrade raises the typed error of its HTTP status."""
        url = self.url + _PODS.path(self._object_namespace(_PODS, namespace), name, subresource)
        headers = await self._headers(None)
        try:
            return await self._get_session().ws_connect(url, protocols=tuple(protocols), params=list(params),
                                                        headers=headers,
                                                        server_hostname=self.config.tls_server_name or None)
        except aiohttp.WSServerHandshakeError as exc:
            raise self._error(exc.status, f"{subresource} {name}: the server refused the WebSocket upgrade "
                                          f"(HTTP {exc.status})".encode(), None) from exc

    def port_forward(self, name: str, port: int, namespace: str | None = None, *, local_port: int = 0,
                     local_host: str = "127.0.0.1", max_connections: int = 64) -> PortForward:
        """Forward ``local_host:local_port`` (0: a free port) to ``port`` of pod ``name`` (``kubectl
        port-forward``): ``async with client.port_forward("web-1", 8080) as forward:`` then connect to
        ``forward.local_port``. See :mod:`kinformer.client.portforward`."""
        return PortForward(self, name, port, namespace, local_port=local_port, local_host=local_host,
                           max_connections=max_connections)

    # -- status subresource -------------------------------------------------------------------------------

    @overload
    async def get_status(self, resource: str | Resource, name: str, namespace: str | None = None) -> LazyObject: ...

    @overload
    async def get_status(self, resource: type[ObjT], name: str, namespace: str | None = None) -> ObjT: ...

    async def get_status(self, resource: ResourceRef, name: str, namespace: str | None = None) -> Any:
        return await self.get(resource, name, namespace, subresource="status")

    @overload
    async def replace_status(self, resource: str | Resource, body: Mapping[str, object], name: str | None = None,
                             namespace: str | None = None, *, field_manager: str | None = None,
                             dry_run: bool = False) -> LazyObject: ...

    @overload
    async def replace_status(self, resource: type[ObjT], body: Mapping[str, object], name: str | None = None,
                             namespace: str | None = None, *, field_manager: str | None = None,
                             dry_run: bool = False) -> ObjT: ...

    async def replace_status(self, resource: ResourceRef, body: Mapping[str, object], name: str | None = None,
                             namespace: str | None = None, *, field_manager: str | None = None,
                             dry_run: bool = False) -> Any:
        return await self.replace(resource, body, name, namespace, subresource="status", field_manager=field_manager,
                                  dry_run=dry_run)

    @overload
    async def patch_status(self, resource: str | Resource, name: str, body: PatchBody, patch_type: str = "merge",
                           namespace: str | None = None, *, field_manager: str | None = None,
                           force: bool | None = None, dry_run: bool = False) -> LazyObject: ...

    @overload
    async def patch_status(self, resource: type[ObjT], name: str, body: PatchBody, patch_type: str = "merge",
                           namespace: str | None = None, *, field_manager: str | None = None,
                           force: bool | None = None, dry_run: bool = False) -> ObjT: ...

    async def patch_status(self, resource: ResourceRef, name: str, body: PatchBody, patch_type: str = "merge",
                           namespace: str | None = None, *, field_manager: str | None = None,
                           force: bool | None = None, dry_run: bool = False) -> Any:
        return await self.patch(resource, name, body, patch_type, namespace, subresource="status",
                                field_manager=field_manager, force=force, dry_run=dry_run)

    async def version(self) -> dict[str, Any]:
        """The server's ``/version`` document."""
        return await self.get_json("/version")

    def __repr__(self) -> str:
        return f"<kinformer.Client {self.url}>"
