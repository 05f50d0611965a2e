"""Manager: shared caches, controllers, leader election, health and metrics (controller-runtime's Manager).

``await mgr.run()`` does, in order:

1. builds every registered controller (resolving resources through discovery) and starts the
   shared informers;
2. serves ``/healthz``, ``/readyz`` (ready once every cache has synced) and ``/metrics`` when a
   ``health_bind`` address is given;
3. runs the controllers: at once, or — with leader election — only while this replica holds the
   Lease; losing the Lease stops the controllers and ends ``run()`` with :class:`LeaderElectionLost`
   (the process should exit and restart, as in controller-runtime);
4. on SIGTERM/SIGINT (when ``handle_signals``) or :meth:`stop`, drains the controllers and shuts the
   informers down.

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
import logging
import signal
from collections.abc import Callable
from typing import Any

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller.builder import Builder
from kinformer.controller.controller import Controller
from kinformer.controller.leaderelection import LeaderElectionConfig, LeaderElector
from kinformer.controller.reconcile import Reconciler, Request

log = logging.getLogger(__name__)


class LeaderElectionLost(Exception):
    """This replica lost its Lease; its controllers have been stopped."""


class Manager:
    """Owns one SharedInformerFactory shared by its controllers."""

    def __init__(self, client: Any, *, leader_election: LeaderElectionConfig | None = None,
                 resync: float = 0.0, namespace: str | None = None, health_bind: str | None = None,
                 clock: Clock = REAL_CLOCK, cache_sync_timeout: float = 120.0,
                 graceful_shutdown_timeout: float = 30.0, handle_signals: bool = False,
                 factory: Any = None) -> None:
        from kinformer.cache.factory import SharedInformerFactory

        self.client = client
        self.clock = clock
        self.leader_election = leader_election
        self.cache_sync_timeout = cache_sync_timeout
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.handle_signals = handle_signals
        self.health_bind = health_bind
        self.factory = factory or SharedInformerFactory(client, resync=resync, namespace=namespace, clock=clock)
        from kinformer.controller import metrics

        metrics.watch_factory(self.factory)
        self.builders: list[Builder] = []
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.health_url: str | None = None
        self._stopping = asyncio.Event()
        self._ready = False

    # -- setup ------------------------------------------------------------------------------------

    def controller(self, reconciler: Reconciler | Callable[[Request], Any], name: str | None = None) -> Builder:
        """Start describing a controller; it is built and run by :meth:`run`."""
        builder = Builder(self, reconciler, name)
        self.builders.append(builder)
        return builder

    def informer(self, resource: str, **options: Any) -> Any:
        """The shared informer for ``resource`` (one per resource and options)."""
        return self.factory.informer(resource, **options)

    async def resolve(self, resource: str) -> Any:
        """Discovery information (group, kind, namespaced, ...) for ``resource``."""
        return await self.client.resolve(resource)

    def ready(self) -> bool:
        return self._ready

    # -- running ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until :meth:`stop`, a signal, or the loss of leadership (see the module docstring)."""
        restore = self._install_signal_handlers() if self.handle_signals else None
        health = await self._start_health_server() if self.health_bind else None
        try:
            self.controllers = [await b.build() for b in self.builders]
            self.factory.start()
            await self._run_controllers_or_lead()
        finally:
            if restore:
                restore()
            await self.factory.shutdown()
            if health is not None:
                await health.cleanup()

    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully."""
        self._stopping.set()

    async def _run_controllers_or_lead(self) -> None:
        stop = asyncio.create_task(self._stopping.wait())
        if self.leader_election is None:
            work = asyncio.create_task(self._run_controllers())
        else:
            cfg = self.leader_election
            user_started = cfg.on_started_leading
            fenced = asyncio.Event()

            async def lead() -> None:
                try:
                    await self._lead_fenced(user_started)
                except LeaderElectionLost:
                    fenced.set()
                    raise

            cfg.on_started_leading = lead
            self.elector = LeaderElector(cfg, self.client, clock=self.clock)
            work = asyncio.create_task(self.elector.run())
        waits = {stop, work}
        if self.leader_election is not None:
            waits.add(fence_task := asyncio.create_task(fenced.wait()))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            results = await self._reap(work)
        if self.leader_election is not None and fence_task in done and not self._stopping.is_set():
            raise LeaderElectionLost(f"leader election lost (fenced): {self.leader_election.lease_name}")
        if work in done and not self._stopping.is_set():
            if isinstance(results[0], BaseException) and not isinstance(results[0], asyncio.CancelledError):
                raise results[0]
            if self.leader_election is not None:
                raise LeaderElectionLost(f"leader election lost: {self.leader_election.lease_name}")

    async def _reap(self, work: asyncio.Task[None]) -> list[BaseException | None]:
        """Wait for the cancelled ``work``; an elector still releasing its Lease over a hung connection is
        given at most ``renew_deadline`` (it finishes in the background)."""
        if self.leader_election is None:
            return await asyncio.gather(work, return_exceptions=True)
        await asyncio.wait({work}, timeout=self.leader_election.renew_deadline)
        if not work.done():
            log.warning("lease %s: the elector is still releasing the lease; not waiting for it",
                        self.leader_election.lease_name)
            return [None]
        return [None if work.cancelled() else work.exception()]

    async def _lead_fenced(self, user_started: Callable[[], Any] | None) -> None:
        """Run the controllers (and the user's callback) until they end or the fence fires."""
        work = asyncio.ensure_future(asyncio.gather(
            self._run_controllers(), *([user_started()] if user_started is not None else [])))
        fence = asyncio.create_task(self._fence(), name="leader-fence")
        try:
            await asyncio.wait({work, fence}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not self._stopping.is_set():
                # Leadership is lost (fence fired or the elector gave up): stop acting now, no draining.
                for controller in self.controllers:
                    controller.abort()
            fence.cancel()
            work.cancel()
            results = await asyncio.gather(work, fence, return_exceptions=True)
        if fence.done() and not fence.cancelled() and fence.exception() is None:
            log.warning("lease %s: not renewed within the renew deadline; controllers stopped (fenced)",
                        self.leader_election.lease_name if self.leader_election else "")
            raise LeaderElectionLost("fenced: the lease was not renewed within the renew deadline")
        if isinstance(results[0], BaseException) and not isinstance(results[0], asyncio.CancelledError):
            raise results[0]

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
        tasks = [asyncio.create_task(c.run(), name=f"controller-{c.name}") for c in self.controllers]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

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
            if self._ready:
                return web.Response(text="ok")
            return web.Response(status=503, text="caches not synced")

        async def metrics_handler(_: web.Request) -> web.Response:
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
        sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
        bound = sockets[0].getsockname()[1] if sockets else int(port or 0)
        self.health_url = f"http://{host or '127.0.0.1'}:{bound}"
        return runner
