"""``APIServer``: the embedded Kubernetes-compatible API server, run inside the current event loop.

    async with APIServer(storage="memory") as server:
        ...  # talk to server.url

Startup order (each step depends on the previous): storage -> watch cache (loads everything) ->
system namespaces and served CRDs -> garbage collector -> HTTP listener. ``stop()`` reverses it and
closes every open watch cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..clock import REAL_CLOCK, Clock
from .admission.certificates import CertificateAdmission
from .admission.quota import QuotaAdmission
from .admission.serviceaccount import ServiceAccountAdmission
from .admission.storageprotection import StorageProtection
from .admission.webhooks import dispatcher_over_cache
from .app import build_app
from .controllers.apiservices import GROUP as APISERVICES_GROUP
from .controllers.apiservices import APIServiceRegistration
from .controllers.bootstrap import ClusterBootstrap, used_cluster_ips, used_node_ports
from .controllers.garbagecollector import CRD_PREFIX, GarbageCollector
from .endpoints.handlers import ResourceAPI
from .filters.flowcontrol import DEFAULT_MAX_WAITS, DEFAULT_QUEUE_LENGTH, DEFAULT_QUEUE_WAIT, FlowControl
from .filters.handlerchain import HandlerChain
from .filters.requestlog import REQUEST_LOG, RequestLogger
from .registry.ipallocator import DEFAULT_SERVICE_CIDR, ServiceAllocator, parse_port_range
from .registry.objects import ObjectStore
from .registry.resources import Registry
from .schema.conversion import Conversion
from .storage import Compacted, Storage, open_storage
from .storage.watchcache import (
    DEFAULT_WATCHER_BUFFER_BYTES,
    DEFAULT_WATCHER_BUFFER_EVENTS,
    CachedEvent,
    Listener,
    WatchCache,
)

if TYPE_CHECKING:
    from kinformer.cluster import Cluster, ClusterOptions

log = logging.getLogger(__name__)

HEADER_TIMEOUT = 32.0


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class APIServer:
    """An API server over ``storage`` ("memory", "sqlite:///path" or a :class:`Storage`), on ``host:port``.

    ``port=0`` picks a free port; :attr:`url` is known once started. A non-loopback ``host`` requires
    ``tls`` and authentication (``tokens`` or ``client_ca``). ``tls`` is True (certificates generated
    under ``data_dir``/pki or a temporary directory) or a :class:`kinformer.tls.CertPaths`.

    Security and limits (see :mod:`.auth.security`, :mod:`.filters.limits`): ``client_ca`` (a PEM path or several)
    authenticates TLS client certificates (CN = user, O = groups); what users may do is RBAC (the bootstrap
    policy plus the Roles and bindings written to the server); ``authorization_policy`` (a seed file path or
    a list of RBAC object dicts) is written at start; ``max_watches_per_client`` and
    ``rate_limit_qps``/``rate_limit_burst`` answer 429 with Retry-After. Without ``tokens`` or ``client_ca``
    every request is the admin (``system:masters``) unless it impersonates or carries a ServiceAccount token;
    with them, a failing credential is a 401 and a request without one is ``system:anonymous`` (RBAC lets it
    read health and ``/version``), or a 401 with ``anonymous_auth=False`` (kube's ``--anonymous-auth=false``).

    Services get ClusterIPs from ``service_cluster_ip_range`` (default 10.96.0.0/12, as kubeadm and kind
    set it up; ``default/kubernetes`` takes its first address) and node ports from ``service_node_port_range``.
    ``namespace_defaults`` (on by default, as in every cluster) keeps a ``default`` ServiceAccount and a
    ``kube-root-ca.crt`` ConfigMap in each namespace; tests that count a namespace's objects may turn it off.

    Flow control (:mod:`.filters.flowcontrol`): ``max_inflight`` seats shared fairly by users (``system:masters``
    on seats of their own), at most ``queue_length_per_client`` requests queued per user for at most
    ``queue_wait`` seconds, at most ``max_waits_per_client`` reads per user waiting for a future
    resourceVersion; beyond, 429 with Retry-After. A connection that has not sent a complete request head
    within ``header_timeout`` seconds (32, kube-apiserver's ReadHeaderTimeout) of opening or of its last
    response is closed; request bodies must arrive within ``bodies.BODY_TIMEOUT`` (408 otherwise). Bound to
    a loopback address, the server answers only requests whose ``Host`` is a loopback name or address (or
    one of ``allowed_hosts``) and refuses cross-site ``Origin`` headers (403; :mod:`.filters.hostcheck`).
    ``log_requests`` logs each finished request (:mod:`.filters.requestlog`).

    A watcher whose client reads slower than events arrive may fall behind by at most ``watcher_buffer_events``
    events (10,000) and ``watcher_buffer_bytes`` bytes of their objects (16 MiB); beyond either, its watch
    ends and its client resumes from the last resourceVersion it received (or relists on 410), as
    kube-apiserver ends a cacheWatcher that is too slow.

    A cluster that moves (:mod:`kinformer.cluster`): ``controllers`` (True for all of kube-controller-manager's
    that kinformer has, or their names) and ``nodes`` (that many simulated nodes and kubelets) start once the
    server listens, as :attr:`cluster`, a client of this server with an admin token; ``cluster_options``
    tunes them. The defaults run neither, as envtest: a user's own controller can be tested alone.

    ``default_toleration_seconds`` is what the DefaultTolerationSeconds admission plugin gives a new pod's
    NoExecute tolerations of ``node.kubernetes.io/not-ready`` and ``unreachable`` (kube's 300 s): one number for
    both, or a (not-ready, unreachable) pair, as kube-apiserver's ``--default-not-ready-toleration-seconds`` and
    ``--default-unreachable-toleration-seconds``.
    """

    def __init__(self, storage: str | Storage = "memory", *, host: str = "127.0.0.1", port: int = 0,
                 watch_cache_size: int = 1000, compaction_interval: float = 300.0, compaction_keep: int = 1000,
                 bookmark_interval: float = 60.0, tls: Any = False,
                 tokens: Mapping[str, Any] | Iterable[str] | None = None, data_dir: str | None = None,
                 clock: Clock = REAL_CLOCK, max_inflight: int = 1000, client_ca: Any = None,
                 authorization_policy: Any = None, max_watches_per_client: int | None = 100,
                 rate_limit_qps: float | None = None, rate_limit_burst: int = 0,
                 service_cluster_ip_range: str = DEFAULT_SERVICE_CIDR,
                 service_node_port_range: str = "30000-32767", namespace_defaults: bool = True,
                 queue_length_per_client: int = DEFAULT_QUEUE_LENGTH, queue_wait: float = DEFAULT_QUEUE_WAIT,
                 max_waits_per_client: int = DEFAULT_MAX_WAITS, header_timeout: float = HEADER_TIMEOUT,
                 allowed_hosts: Iterable[str] = (), log_requests: bool = False, anonymous_auth: bool = True,
                 watcher_buffer_events: int = DEFAULT_WATCHER_BUFFER_EVENTS,
                 watcher_buffer_bytes: int = DEFAULT_WATCHER_BUFFER_BYTES,
                 controllers: bool | Iterable[str] = False, nodes: int = 0,
                 cluster_options: ClusterOptions | None = None,
                 default_toleration_seconds: int | tuple[int, int] = 300) -> None:
        if client_ca is not None and not tls:
            raise ValueError("client certificate authentication (client_ca) needs tls")
        if not is_loopback(host) and not (tls and (tokens or client_ca)):
            raise ValueError(f"refusing to bind non-loopback address {host!r} without TLS and token authentication")
        self.storage: Storage = open_storage(storage) if isinstance(storage, str) else storage
        from kinformer.cluster.cluster import controller_names

        self.controllers = controller_names(controllers)
        if nodes < 0:
            raise ValueError(f"nodes must be >= 0, got {nodes}")
        self.nodes = nodes
        self.cluster_options = cluster_options
        self.cluster: Cluster | None = None
        self.host = host
        self.port = port
        self.watch_cache_size = watch_cache_size
        self.compaction_interval = compaction_interval
        self.compaction_keep = compaction_keep
        self.bookmark_interval = bookmark_interval
        self.tls = tls
        self.tokens = tokens
        self.data_dir = data_dir
        self.clock = clock
        self.max_inflight = max_inflight
        self.header_timeout = header_timeout
        self.allowed_hosts = tuple(allowed_hosts)
        self.log_requests = log_requests
        self.flow_control = FlowControl(max_inflight, queue_length=queue_length_per_client, queue_wait=queue_wait,
                                        max_waits=max_waits_per_client)
        self.client_ca = client_ca
        self.authorization_policy = authorization_policy
        self.max_watches_per_client = max_watches_per_client
        self.rate_limit_qps = rate_limit_qps
        self.rate_limit_burst = rate_limit_burst
        self.registry = Registry()
        self.cache = WatchCache(self.storage, watch_cache_size, watcher_buffer_events, watcher_buffer_bytes)
        self.allocator = ServiceAllocator(used_cluster_ips(self.cache), used_node_ports(self.cache),
                                          cidr=service_cluster_ip_range,
                                          node_ports=parse_port_range(service_node_port_range))
        self.store = ObjectStore(self.storage, self.registry, clock, self.cache, self.allocator,
                                 default_toleration_seconds)
        self.store.after_write.append(self.allocator.written)
        self.api = ResourceAPI(self.storage, self.registry, self.cache, self.store, clock,
                               bookmark_interval=bookmark_interval)
        self.gc = GarbageCollector(self.cache, self.store, self.registry)
        from .auth.security import Security, seed_documents

        self.security = Security(self.cache, self.store, self.registry, clock, tokens=tokens,
                                 client_certs=client_ca is not None, data_dir=data_dir,
                                 seed=seed_documents(authorization_policy), anonymous=anonymous_auth)
        self.api.admission = dispatcher_over_cache(self.cache)
        self.api.certificates = CertificateAdmission(self.security.authorizer)
        self.api.service_accounts = ServiceAccountAdmission(self.cache, default_account_made=namespace_defaults)
        self.api.quotas = QuotaAdmission(self.cache, self.store, self.registry, clock)
        self.bootstrap = ClusterBootstrap(self.store, self.cache, self.registry, self.allocator, self._ca_pem,
                                          ca_authoritative=bool(tls), namespace_defaults=namespace_defaults)
        self.api.conversion = Conversion(self.cache, self.registry, self.api.admission.client)
        self.url = ""
        self.ca_cert: str | None = None
        self.cert_paths: Any = None  # the TLS CertPaths: its CA also signs client CSRs
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._crd_listener: Listener | None = None  # the watch cache listener serving the stored CRDs, while started
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._started = False

    async def __aenter__(self) -> APIServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open storage, load the cache, ensure system state and start listening."""
        await self.storage.start()
        try:
            await self.cache.start()
            self._follow_crds()
            await self.store.ensure_namespaces()
            await self.security.bootstrap()
            self.gc.start()
            registration = None
            if self.registry.get(APISERVICES_GROUP, "v1", "apiservices") is not None:
                registration = APIServiceRegistration(self.cache, self.store, self.registry)
                await registration.sync()  # registered before the server answers, as kube's start-up waits for it
            await self._listen()
            if registration is not None:
                self._tasks.append(asyncio.create_task(registration.run(), name="kinformer-apiservices"))
            self._tasks.append(asyncio.create_task(self.security.aggregator.run(), name="kinformer-aggregation"))
            protection = StorageProtection(self.cache, self.store, self.registry)
            self._tasks.append(asyncio.create_task(protection.run(), name="kinformer-storage-protection"))
            if self.cert_paths is not None:
                from .controllers.csrsigning import (
                    CertificateSigner,  # with TLS on, its crypto library is loaded already
                )

                signer = CertificateSigner(self.cache, self.store, self.registry, self.cert_paths)
                self._tasks.append(asyncio.create_task(signer.run(), name="kinformer-csr-signing"))
            await self.bootstrap.ensure_kubernetes_service(self.host, self.port)
            self._tasks.append(asyncio.create_task(self.bootstrap.keep_kubernetes_service(self.host, self.port),
                                                   name="kinformer-kubernetes-service"))
            self.bootstrap.start()
            await self._start_cluster()
        except BaseException:
            await self._shutdown()
            raise
        if self.compaction_interval > 0:
            self._tasks.append(asyncio.create_task(self._compactor(), name="kinformer-compactor"))
        self._started = True

    async def _start_cluster(self) -> None:
        """Start the controllers and simulated nodes asked for, as a client of this server with an admin token."""
        if not self.controllers and not self.nodes:
            return
        import secrets

        from kinformer.cluster import Cluster

        from .auth.authentication import UserInfo

        token = "kinformer-cluster-" + secrets.token_urlsafe(24)
        self.security.authenticator.add_token(
            token, UserInfo(name="system:kube-controller-manager", groups=("system:masters",)))
        self.store.graceful_pods = self.nodes > 0  # kubelets finish graceful pod deletions
        self.cluster = Cluster(self.url, token=token, ca=self.ca_cert, controllers=self.controllers,
                               nodes=self.nodes, options=self.cluster_options, clock=self.clock)
        await self.cluster.start()
        if self.nodes:
            self.api.pod_logs = self.cluster.pod_log

    async def _listen(self) -> None:
        app = build_app(self.api, self.registry, chain=self._handler_chain(), extra_routes=self.security.routes())
        ssl_ctx = self._ssl_context()
        # aiohttp's keep-alive timer closes a connection that has not sent a complete request head within
        # this long of opening or of its last response: half-open, trickling and idle connections alike.
        self._runner = web.AppRunner(app, access_log=REQUEST_LOG if self.log_requests else None,
                                     access_log_class=RequestLogger, shutdown_timeout=1.0,
                                     keepalive_timeout=self.header_timeout)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_ctx)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        port = sockets[0].getsockname()[1] if sockets else self.port
        self.port = port
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{'https' if ssl_ctx else 'http'}://{host}:{port}"
        self.security.issuer.url = self.url

    def _handler_chain(self) -> HandlerChain:
        """Authentication and impersonation, then per-client limits and flow control, then authorization
        (kube's filter order); a loopback-only server first refuses non-loopback Host and Origin headers."""
        from .filters.hostcheck import host_check
        from .filters.limits import ClientLimits

        limits = None
        if self.max_watches_per_client or self.rate_limit_qps:
            limits = ClientLimits(max_watches_per_client=self.max_watches_per_client,
                                  rate_limit_qps=self.rate_limit_qps, rate_limit_burst=self.rate_limit_burst,
                                  clock=self.clock)
        return HandlerChain(host_check=host_check(self.allowed_hosts) if is_loopback(self.host) else None,
                            limits=limits, flow_control=self.flow_control, **self.security.filters())

    def _ssl_context(self) -> Any:
        if not self.tls:
            return None
        from kinformer.tls import CertPaths, ensure_certs, server_ssl_context

        if isinstance(self.tls, CertPaths):
            paths = self.tls
        else:
            if self.data_dir:
                base = os.path.join(self.data_dir, "pki")
            else:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="kinformer-pki-")
                base = self._tmpdir.name
            hosts = list(dict.fromkeys([self.host, "127.0.0.1", "localhost"]))
            paths = ensure_certs(base, hosts=hosts)
        self.ca_cert = str(paths.ca_cert)
        self.cert_paths = paths
        return server_ssl_context(paths, client_ca=self.client_ca)

    def _ca_pem(self) -> str:
        """The CA published in every namespace's ``kube-root-ca.crt``: the TLS CA, or a generated one."""
        if self.ca_cert:
            with open(self.ca_cert, encoding="ascii") as f:
                return f.read()
        from kinformer.tls import self_signed_ca_pem

        return self_signed_ca_pem()

    async def _compactor(self) -> None:
        while True:
            await self.clock.sleep(self.compaction_interval)
            try:
                await self.compact()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("compaction failed")

    async def compact(self) -> int:
        """Compact storage history to ``min(current, cache revision) - compaction_keep``; returns the point.

        Safe with several replicas over one store: each compacts only history it has itself passed by
        ``compaction_keep`` revisions, so a replica whose watch cache lags at most that much never loses
        events it still needs (one lagging further reloads, as after any 410). Compactions by several
        replicas race harmlessly: compacting to or below the store's compaction point is a no-op.
        """
        current = await self.storage.current_revision()
        target = min(current, self.cache.revision) - self.compaction_keep
        compacted = await self.storage.compacted_revision()
        if target <= compacted:
            return compacted
        try:
            await self.storage.compact(target)
        except Compacted:  # another replica compacted further meanwhile
            return await self.storage.compacted_revision()
        return target

    def _follow_crds(self) -> None:
        """Serve the stored CRDs, and keep serving what storage holds: every replica sees every CRD change."""
        registry, cache = self.registry, self.cache

        def snapshot() -> None:
            registry.sync_crds(co.obj for co in cache.bucket(CRD_PREFIX).snapshot())

        def on_event(prefix: str, ev: CachedEvent) -> None:
            registry.on_crd_event(ev.type, ev.cur.obj)

        snapshot()
        cache.add_listener(on_event, (CRD_PREFIX,), on_reset=snapshot)
        self._crd_listener = on_event

    async def stop(self) -> None:
        """Close watches, stop listening and background tasks, close storage. Idempotent. The server may then be
        started again on what its storage holds (memory or a SQLite file; an in-memory SQLite database ends
        with the stop)."""
        if not self._started and self._runner is None:
            return
        self._started = False
        await self._shutdown()

    async def _shutdown(self) -> None:
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            await cluster.stop()
        self.api.closing.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.api.admission is not None:
            await self.api.admission.close()
        await self.bootstrap.stop()
        await self.gc.stop()
        if self._crd_listener is not None:
            self.cache.remove_listener(self._crd_listener)
            self._crd_listener = None
        await self.cache.stop()
        await self.storage.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None
