"""``kinformer demo --replicas N``: the same run over N API servers sharing etcd and N managers under one Lease."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path
from typing import Any, ClassVar

from kinformer.demo.run import Demo


class ProxyGroup:
    """The fault proxies of every manager replica, driven as one (the workload's faults hit them all)."""

    def __init__(self, proxies: list[Any]) -> None:
        self.proxies = proxies

    def drop_connections(self) -> int:
        return sum(p.drop_connections() for p in self.proxies)

    def stall(self) -> None:
        for p in self.proxies:
            p.stall()

    def resume(self) -> None:
        for p in self.proxies:
            p.resume()


def _retarget(proxy: Any, url: str) -> None:
    """Point ``proxy`` at the server at ``url`` (what a load balancer does when a backend dies)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy.target = (parts.hostname or "127.0.0.1", parts.port or 80)
    proxy.drop_connections()


def run_prefix_url(storage: str, run_id: str) -> str:
    """``storage`` with a key prefix of its own for this run: ``etcd://h:p[/p]`` -> ``etcd://h:p[/p]/<run_id>``."""
    return f"{storage.rstrip('/')}/{run_id}"


async def remove_run_keys(storage_url: str) -> None:
    """Delete every key under ``storage_url`` (a run's own prefix, see :func:`run_prefix_url`); best effort."""
    from kinformer.server.storage import open_storage

    store = open_storage(storage_url)
    with contextlib.suppress(Exception):
        await store.start()
        for kv in (await store.list("/")).kvs:
            with contextlib.suppress(Exception):
                await store.delete(kv.key)
    with contextlib.suppress(Exception):
        await store.close()


class ReplicatedDemo(Demo):
    """The demo on ``--replicas`` API servers sharing one etcd and as many manager replicas.

    Each run stores its objects under an etcd key prefix of its own (removed at the end unless
    ``--keep``). Manager ``i`` talks to server ``i`` through proxy ``i``; the managers campaign for the
    Lease ``default/kinformer-demo`` (3 s lease, 2 s renew deadline) and only the leader reconciles. A
    killed manager does not release its Lease (a crash), so a standby takes over once it expires.
    The workload and the checks go through their own proxy to the last server replica.
    """

    LEASE: ClassVar[dict[str, Any]] = dict(lease_name="kinformer-demo", lease_namespace="default", lease_duration=3.0,
                                           renew_deadline=2.0, retry_period=0.5, release_on_cancel=False)

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.n = args.replicas
        self.servers: list[Any] = []
        self.alive: list[bool] = []
        self.proxies: list[Any] = []
        self.clients: list[Any] = []
        self.managers: list[Any] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.leaders: list[int] = []
        self.killed: set[int] = set()
        self.stopping = False
        self._replica_state: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    async def run(self) -> int:
        import uuid

        from kinformer.server import APIServer

        url = run_prefix_url(self.args.storage, f"kinformer-demo-{uuid.uuid4().hex[:8]}")
        self.say(f"etcd storage {url} shared by {self.n} API server replicas")
        stack = contextlib.AsyncExitStack()
        async with stack:
            for _ in range(self.n):
                server = await stack.enter_async_context(APIServer(storage=url, watch_cache_size=100))
                self.servers.append(server)
                self.alive.append(True)
            try:
                return await self._run_replicated(stack)
            finally:
                if not self.args.keep:
                    await remove_run_keys(url)

    async def _run_replicated(self, stack: contextlib.AsyncExitStack) -> int:
        from kinformer.client import Client
        from kinformer.testing import FaultProxy

        for server in self.servers:
            self.say(f"API server replica at {server.url}")
        direct_proxy = await stack.enter_async_context(FaultProxy.for_url(self.servers[-1].url))
        self.direct_proxy = direct_proxy
        self.direct = await stack.enter_async_context(Client(direct_proxy.url))
        for server in self.servers:
            proxy = await stack.enter_async_context(FaultProxy.for_url(server.url))
            self.proxies.append(proxy)
            self.clients.append(await stack.enter_async_context(Client(proxy.url)))
        self.proxy = ProxyGroup(self.proxies)
        self.client = self.clients[0]
        self.server = self.servers[-1]
        await self._install_crd()
        self.managers = [None] * self.n
        self.tasks = [asyncio.create_task(self._replica(i), name=f"demo-manager-{i}") for i in range(self.n)]
        view = asyncio.create_task(self._view())
        try:
            await self._wait(lambda: bool(self.leaders) and self.manager.ready(), 30, "a leader with synced caches")
            await self._workload()
            converged = await self._converge()
            await self._settle_handlers()
        finally:
            self.stopping = True
            for mgr in self.managers:
                if mgr is not None:
                    mgr.stop()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            view.cancel()
            await asyncio.gather(view, return_exceptions=True)
        self.say("leaders in turn: " + " -> ".join(f"manager-{i}" for i in self.leaders))
        self._summary(converged)
        if self.args.keep:
            await self._keep(self.server, Path("."))
        return 0 if converged else 1

    async def _install_crd(self) -> None:
        await super()._install_crd()
        for client in self.clients[1:]:  # every replica serves the CRD once its watch cache has it
            await self._wait_served(client)

    # -- manager replicas -------------------------------------------------------------------------

    async def _replica(self, i: int) -> None:
        """Run manager ``i``; one that loses its Lease is rebuilt as a standby (a restarted process)."""
        from kinformer.controller.leaderelection import LeaderElectionConfig
        from kinformer.controller.manager import LeaderElectionLost

        while not self.stopping:
            started = self._started_leading(i)
            cfg = LeaderElectionConfig(identity=f"manager-{i}", on_started_leading=started, **self.LEASE)
            mgr, registrations, informers = self._build_manager(self.clients[i], leader_election=cfg)
            self.managers[i] = mgr
            self._replica_state[i] = (registrations, informers)
            try:
                await mgr.run()
                return
            except LeaderElectionLost:
                self.say(f"manager-{i} lost the Lease; restarting it as a standby")

    def _started_leading(self, i: int) -> Any:
        async def started() -> None:
            self.registrations, self.informers = self._replica_state[i]
            self.manager = self.managers[i]
            self.leaders.append(i)
            self.say(f"manager-{i} is the leader (talks to API server replica {self._server_of(i)})")

        return started

    def _server_of(self, i: int) -> int:
        target = self.proxies[i].target
        return next(j for j, s in enumerate(self.servers) if s.port == target[1])

    def _leader(self) -> int | None:
        for i, mgr in enumerate(self.managers):
            if i not in self.killed and mgr is not None and mgr.elector is not None and mgr.elector.leading.is_set():
                return i
        return None

    # -- the kills --------------------------------------------------------------------------------

    async def _on_phase(self, phase: str) -> None:
        if phase == "created":
            await self._kill_leader()
        elif phase == "scaled 2":
            await self._kill_server()

    async def _kill_leader(self) -> None:
        leader = self._leader()
        if leader is None:
            return
        self.killed.add(leader)
        self.tasks[leader].cancel()  # a crash: the Lease is not released
        self.proxies[leader].drop_connections()
        self.faults.counts["manager killed"] += 1
        self.say(f"fault: killed the leading manager-{leader}; a standby takes over when its Lease expires")

    async def _kill_server(self) -> None:
        with contextlib.suppress(TimeoutError):  # let the standby take over first, so the kill hits the leader
            await self._wait(lambda: self._leader() is not None, 3 * self.LEASE["lease_duration"], "a new leader")
        leader = self._leader()
        victim = self._server_of(leader) if leader is not None else 0
        survivors = [j for j in range(self.n) if self.alive[j] and j != victim]
        if not survivors:
            return
        self.alive[victim] = False
        dead_port = self.servers[victim].port
        await self.servers[victim].stop()
        to = self.servers[survivors[0]]
        for proxy in [*self.proxies, self.direct_proxy]:
            if proxy.target[1] == dead_port:
                _retarget(proxy, to.url)
        if self.server is self.servers[victim]:
            self.server = to
        self.faults.counts["API server killed"] += 1
        self.say(f"fault: killed API server replica {victim}; its clients fail over to replica {survivors[0]}")
