"""Manager: shared caches, controllers, leader election, health and metrics (controller-runtime's Manager).

``await mgr.run()`` does, in order:

1. builds every registered controller (resolving resources through discovery) and starts the
   shared informers;
2. serves ``/healthz``, ``/readyz`` (ready once every cache has synced, and not while an informer has
   heard nothing, no event nor bookmark, for over ``stale_after`` seconds) and ``/metrics`` when a
   ``health_bind`` address is given; with ``metrics_secure`` (by default: when running in a pod) ``/metrics``
   only to bearer tokens the API server authenticates and authorizes (:mod:`kinformer.controller.metricsauth`),
   the probes staying open to the kubelet;
3. runs the controllers: at once, or — with leader election — only while this replica holds the
   Lease; losing the Lease stops the controllers and ends ``run()`` with :class:`LeaderElectionLost`
   (the process should exit and restart, as in controller-runtime);
   With ``sharding`` (exclusive with leader election) every replica runs the controllers, each on its share
   of the keys (see :mod:`kinformer.controller.sharding`): the controllers start once this member joined
   its group; a fenced member aborts them (in-flight reconciles cancelled) and ``run()`` ends with
   :class:`~kinformer.controller.sharding.ShardMembershipLost`;
4. on SIGTERM/SIGINT (when ``handle_signals``) or :meth:`stop`, drains the controllers (a sharded member
   keeps renewing its Lease meanwhile, then deletes it so its keys move at once) and shuts the informers
   down. A sharded ``run()`` cancelled from outside drains nothing and keeps its Lease (as a crash: peers
   take its keys once the Lease expired).

Fencing (leader election): the controllers run only while this replica can be sure it holds the
Lease. Besides the elector giving up after ``renew_deadline`` of failed renewals, a fence cancels the
controllers — in-flight reconciles included, at their next await — as soon as
``last successful renewal + renew_deadline`` passes on the local monotonic clock, even if a renewal
request is still hanging, or at once when the Lease is seen held by someone else. Another candidate
can take the Lease only ``lease_duration`` after it saw our last renewal, so with equal clock rates
two replicas' reconcilers never run at the same time; the margin is ``lease_duration -
renew_deadline``. Limits: a request already sent before the fence (or delayed in the network longer
than the margin) can still be applied after it, and a process paused longer than the margin (a VM
freeze) acts on stale beliefs when it resumes — as with client-go, reconcilers must stay idempotent
and use resourceVersion preconditions where a stale write would hurt.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, overload

from kinformer.aio import first_completed, task_group
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller.builder import Builder
from kinformer.controller.controller import Controller
from kinformer.controller.events import EventRecorder
from kinformer.controller.leaderelection import LeaderElectionConfig, LeaderElector
from kinformer.controller.legacyevents import LegacyEventRecorder
from kinformer.controller.logcontext import context_logger
from kinformer.controller.metricsauth import MetricsAuth
from kinformer.controller.reconcile import ObjectReconciler, ReconcilerLike
from kinformer.controller.sharding import ShardedController, Sharding, ShardMember
from kinformer.typed_resources import ObjT

if TYPE_CHECKING:
    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.cache.shared_informer import SharedIndexInformer
    from kinformer.cache.store import IndexFunc
    from kinformer.client import Client
    from kinformer.client.discovery import Resource

if TYPE_CHECKING:
    from kinformer.webhook import WebhookServer

log = context_logger(__name__)


def _raise_failure(ended: asyncio.Future[Any]) -> None:
    """Re-raise the exception ``ended`` finished with, if any (a cancellation is not a failure)."""
    if not ended.cancelled() and ended.exception() is not None:
        raise ended.exception()  # type: ignore[misc]


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class LeaderElectionLost(Exception):
    """This replica lost its Lease; its controllers have been stopped."""


class Manager:
    """Owns one SharedInformerFactory shared by its controllers."""

    def __init__(self, client: Client, *, leader_election: LeaderElectionConfig | None = None,
                 resync: float = 0.0, namespace: str | None = None, health_bind: str | None = None,
                 clock: Clock = REAL_CLOCK, cache_sync_timeout: float = 120.0,
                 graceful_shutdown_timeout: float = 30.0, handle_signals: bool = False,
                 factory: SharedInformerFactory | None = None, ryow_timeout: float = 10.0,
                 stale_after: float | None = 300.0, webhook_server: WebhookServer | None = None,
                 sharding: Sharding | None = None, metrics_secure: bool | None = None) -> None:
        from kinformer.cache.factory import SharedInformerFactory
        from kinformer.controller.cached_client import CachedClient

        if sharding is not None and leader_election is not None:
            raise ValueError("a Manager takes leader_election or sharding, not both")
        self.api_client = client
        self.sharding = sharding
        self.shard_member: ShardMember | None = None
        self.client = CachedClient(self)
        self.ryow_timeout = ryow_timeout
        self._recorders: list[EventRecorder | LegacyEventRecorder] = []
        self.clock = clock
        self.leader_election = leader_election
        self.cache_sync_timeout = cache_sync_timeout
        self.stale_after = stale_after
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.handle_signals = handle_signals
        self.health_bind = health_bind
        if metrics_secure is None:
            from kinformer.client.incluster import is_in_cluster

            metrics_secure = is_in_cluster()
        self.metrics_auth = MetricsAuth(client, clock=clock) if metrics_secure else None
        self.factory = factory or SharedInformerFactory(client, resync=resync, namespace=namespace, clock=clock)
        from kinformer.controller import metrics

        metrics.watch_factory(self.factory)
        self.builders: list[Builder] = []
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.health_url: str | None = None
        self._stopping = asyncio.Event()
        #: set once :meth:`run` built the controllers and started the factory's informers (their caches sync
        #: from then on: ``factory.wait_for_cache_sync`` waits only for started informers)
        self.informers_started = asyncio.Event()
        self._ready = False
        self._webhook_server = webhook_server

    # -- setup ------------------------------------------------------------------------------------

    def controller(self, reconciler: ReconcilerLike | ObjectReconciler, name: str | None = None) -> Builder:
        """Start describing a controller; it is built and run by :meth:`run`."""
        builder = Builder(self, reconciler, name)
        self.builders.append(builder)
        return builder

    @overload
    def informer(self, resource: type[ObjT], **options: Any) -> SharedIndexInformer[ObjT]: ...

    @overload
    def informer(self, resource: str, **options: Any) -> SharedIndexInformer[Any]: ...

    def informer(self, resource: str | type, **options: Any) -> SharedIndexInformer[Any]:
        """The shared informer for ``resource`` (one per resource and options; a class stands for its resource,
        see :mod:`kinformer.typed_resources`)."""
        return self.factory.informer(resource, **options)

    def add_index(self, resource: str, name: str, fn: IndexFunc) -> None:
        """Index the cache of ``resource`` by ``fn(obj)`` (a string or a list of strings); ``mgr.client.list(
        resource, field_selector=f"{name}=value")`` then reads that index. Spell ``resource`` as elsewhere."""
        self.factory.informer(resource).add_indexers({name: fn})

    @overload
    def event_recorder(self, component: str, *, legacy: Literal[False] = False, **options: Any) -> EventRecorder: ...

    @overload
    def event_recorder(self, component: str, *, legacy: Literal[True], **options: Any) -> LegacyEventRecorder: ...

    @overload
    def event_recorder(self, component: str, *, legacy: bool,
                       **options: Any) -> EventRecorder | LegacyEventRecorder: ...

    def event_recorder(self, component: str, *, legacy: bool = False,
                       **options: Any) -> EventRecorder | LegacyEventRecorder:
        """An :class:`~kinformer.controller.events.EventRecorder` (events.k8s.io/v1) writing through the API
        client, or with ``legacy=True`` a :class:`~kinformer.controller.legacyevents.LegacyEventRecorder`
        (core/v1, as kube-controller-manager's controllers record); the Manager flushes and closes it when
        :meth:`run` ends."""
        recorder: EventRecorder | LegacyEventRecorder
        if legacy:
            recorder = LegacyEventRecorder(self.api_client, component, clock=self.clock, **options)
        else:
            recorder = EventRecorder(self.api_client, component, clock=self.clock, **options)
        self._recorders.append(recorder)
        return recorder

    @property
    def event_recorders(self) -> tuple[EventRecorder | LegacyEventRecorder, ...]:
        """The recorders :meth:`event_recorder` made, in order."""
        return tuple(self._recorders)

    async def resolve(self, resource: str) -> Resource:
        """Discovery information (group, kind, namespaced, ...) for ``resource``."""
        return await self.api_client.resolve(resource)

    @property
    def webhook_server(self) -> WebhookServer:
        """The webhook server :meth:`run` serves beside the controllers (created on first use, port 9443).

        It runs on every replica, leader or not, as controller-runtime's does; it is started only when a
        webhook is registered on it.
        """
        if self._webhook_server is None:
            from kinformer.webhook import WebhookServer

            self._webhook_server = WebhookServer(clock=self.clock)
        return self._webhook_server

    def ready(self) -> bool:
        return self._ready

    def stale_informers(self) -> dict[str, float]:
        """Informers that heard nothing (no event, no bookmark) for over ``stale_after`` seconds, with those
        seconds; while any is, ``/readyz`` fails and names them."""
        if self.stale_after is None:
            return {}
        return self.factory.stale_informers(self.stale_after)

    # -- running ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until :meth:`stop`, a signal, or the loss of leadership (see the module docstring)."""
        restore = self._install_signal_handlers() if self.handle_signals else None
        health = await self._start_health_server() if self.health_bind else None
        webhooks = self._webhook_server
        if webhooks is None or not webhooks.paths or webhooks.started.is_set():
            webhooks = None  # nothing to serve, or the caller runs it
        try:
            if webhooks is not None:
                await webhooks.start()
            self.controllers = [await b.build() for b in self.builders]
            if self.sharding is not None:
                self._join_shards(self.sharding)
            self.factory.start()
            self.informers_started.set()
            await self._run_controllers_or_lead()
            if webhooks is not None:
                await self._stopping.wait()  # webhooks are served until stop(), even with no controller left
        finally:
            if restore:
                restore()
            await asyncio.gather(*(r.close(timeout=self.graceful_shutdown_timeout) for r in self._recorders),
                                 return_exceptions=True)
            await self.factory.shutdown()
            if webhooks is not None:
                await webhooks.stop()
            if health is not None:
                await health.cleanup()

    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully."""
        self._stopping.set()

    def _join_shards(self, sharding: Sharding) -> None:
        """Create this replica's member of the group (its Lease informer joins the factory) and put every
        controller behind its ownership filter."""
        member = self.shard_member = ShardMember(sharding, self.api_client, self.factory, clock=self.clock)
        member.in_flight = lambda: {key for c in self.controllers for key in c.in_flight}
        for c in self.controllers:
            c.shard = ShardedController(c, member)

    async def _run_sharded(self, member: ShardMember) -> None:
        """Run the member and, once it joined, the controllers; on stop drain them, then release the Lease."""

        async def controllers() -> None:
            await member.ready.wait()
            await self._run_controllers()

        async with task_group() as group:
            membership = group.create_task(member.run(), name=f"shard-member-{member.lease_name}")
            index, ended = await first_completed(self._stopping.wait(), _awaited(asyncio.shield(membership)),
                                                 controllers())
            membership.cancel()  # only now: it kept the Lease renewed while the controllers drained
        if not member.fenced:
            await member.release()
        if index != 0:
            _raise_failure(ended)

    async def _run_controllers_or_lead(self) -> None:
        if self.shard_member is not None:
            await self._run_sharded(self.shard_member)
            return
        if self.leader_election is None:
            index, ended = await first_completed(self._stopping.wait(), self._run_controllers())
            if index == 1:
                _raise_failure(ended)
            return
        fenced = asyncio.Event()
        user_started = self.leader_election.on_started_leading

        async def lead() -> None:
            try:
                await self._lead_fenced(user_started)
            except LeaderElectionLost:
                fenced.set()
                raise

        # a copy: the caller's config keeps its own callback (and can be reused for another Manager)
        cfg = dataclasses.replace(self.leader_election, on_started_leading=lead)
        self.elector = LeaderElector(cfg, self.api_client, clock=self.clock)
        index, ended = await first_completed(self._stopping.wait(), fenced.wait(), self.elector.run())
        if self._stopping.is_set():
            return
        if index == 1 or fenced.is_set():
            raise LeaderElectionLost(f"leader election lost (fenced): {cfg.lease_name}")
        _raise_failure(ended)
        raise LeaderElectionLost(f"leader election lost: {cfg.lease_name}")

    async def _lead_fenced(self, user_started: Callable[[], Awaitable[Any]] | None) -> None:
        """Run the controllers (and the user's callback) until they end or the fence fires."""
        index, ended = await first_completed(self._fence(), self._lead(user_started))
        if index == 0:
            log.warning("lease %s: not renewed within the renew deadline; controllers stopped (fenced)",
                        self.leader_election.lease_name if self.leader_election else "")
            raise LeaderElectionLost("fenced: the lease was not renewed within the renew deadline")
        _raise_failure(ended)

    async def _lead(self, user_started: Callable[[], Awaitable[Any]] | None) -> None:
        async with task_group() as group:
            group.create_task(self._run_controllers())
            if user_started is not None:
                group.create_task(_awaited(user_started()))

    async def _fence(self) -> None:
        """Return once this replica can no longer be sure it holds the Lease (see the module docstring)."""
        elector, cfg = self.elector, self.leader_election
        assert elector is not None and cfg is not None
        while True:
            if not elector.is_leader():
                return
            # the local monotonic time at which the last successful renewal started (set by the elector)
            deadline = elector.renewed_at + cfg.renew_deadline
            left = deadline - self.clock.now()
            if left <= 0:
                return
            await self.clock.sleep(min(left, cfg.retry_period))

    async def _run_controllers(self) -> None:
        synced = await self.factory.wait_for_cache_sync(timeout=self.cache_sync_timeout)
        unsynced = sorted(name for name, ok in synced.items() if not ok)
        if unsynced:
            raise TimeoutError(f"caches did not sync within {self.cache_sync_timeout:.0f}s: {', '.join(unsynced)}")
        self._ready = True
        async with task_group() as group:
            for c in self.controllers:
                group.create_task(c.run(drain=self._may_drain), name=f"controller-{c.name}")

    def _may_drain(self) -> bool:
        """Whether cancelled controllers may finish their in-flight reconciles: not once leadership is
        lost or the shard member fenced (this replica must stop acting at once), nor when a sharded run is
        cancelled from outside; only on :meth:`stop`, or without leader election and sharding."""
        if self.shard_member is not None:
            return self._stopping.is_set() and not self.shard_member.fenced
        return self.leader_election is None or self._stopping.is_set()

    def _install_signal_handlers(self) -> Callable[[], None]:
        loop = asyncio.get_running_loop()
        sigs = (signal.SIGTERM, signal.SIGINT)
        for sig in sigs:
            loop.add_signal_handler(sig, self.stop)

        def restore() -> None:
            for sig in sigs:
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)

        return restore

    # -- health and metrics -----------------------------------------------------------------------

    async def _start_health_server(self) -> Any:
        from aiohttp import web
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from kinformer.controller import metrics

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        async def readyz(_: web.Request) -> web.Response:
            if not self._ready:
                return web.Response(status=503, text="caches not synced")
            stale = self.stale_informers()
            if stale:
                text = ", ".join(f"{name}: nothing for {since:.0f}s" for name, since in sorted(stale.items()))
                return web.Response(status=503, text=f"informers stale: {text}")
            return web.Response(text="ok")

        async def metrics_handler(request: web.Request) -> web.Response:
            if self.metrics_auth is not None:
                verdict = await self.metrics_auth.check(request.headers.get("Authorization"), request.method,
                                                        request.path)
                if verdict.status != 200:
                    return web.Response(status=verdict.status, text=verdict.message)
            body = generate_latest(metrics.REGISTRY)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        app.router.add_get("/metrics", metrics_handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        host, _, port = (self.health_bind or "127.0.0.1:0").rpartition(":")
        site = web.TCPSite(runner, host or "127.0.0.1", int(port or 0))
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else int(port or 0)
        self.health_url = f"http://{host or '127.0.0.1'}:{bound}"
        return runner
