"""``kinformer demo --sharding``: the same run with N sharded manager members splitting the keys."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from kinformer.demo.replicated import ProxyGroup, remove_run_keys, run_prefix_url
from kinformer.demo.run import Demo

#: controller name -> (its informer in ``Demo.informers``, what its keys are called in the report)
CONTROLLERS = {"foo": ("foos", "Foos"), "deployment-status": ("deployments", "Deployments")}


class ReconcileTracker:
    """Wraps every member's reconcilers: who reconciles which key, and an overlap detector.

    Invariant checked: a (controller, key) is being reconciled by at most one member at any time; a
    member entering a key another reconcile is still in is recorded in :attr:`overlaps`.
    """

    def __init__(self) -> None:
        self.active: dict[tuple[str, str], str] = {}  # (controller, key) -> member reconciling it now
        self.overlaps: list[tuple[str, str, str, str]] = []  # (controller, key, member in it, member entering)
        self.last: dict[tuple[str, str, str], float] = {}  # (controller, key, member) -> loop time last started
        self.reconciles: Counter[str] = Counter()  # member -> reconciles started

    def wrap(self, member: str) -> Any:
        """``wrap(controller, reconciler)`` for :meth:`Demo._build_manager`, recording as ``member``."""
        def wrap(controller: str, reconciler: Any) -> Any:
            return _Tracked(self, member, controller, reconciler)
        return wrap

    def keys_of(self, member: str, controller: str) -> set[str]:
        return {key for c, key, m in self.last if m == member and c == controller}

    def taken_by(self, slot: tuple[str, str], members: list[str], since: float) -> str | None:
        """The first of ``members`` that started reconciling ``slot`` after loop time ``since`` (None: none)."""
        for member in members:
            if self.last.get((*slot, member), -1.0) > since:
                return member
        return None


class _Tracked:
    def __init__(self, tracker: ReconcileTracker, member: str, controller: str, inner: Any) -> None:
        self.tracker, self.member, self.controller, self.inner = tracker, member, controller, inner

    async def reconcile(self, request: Any) -> Any:
        t, slot = self.tracker, (self.controller, request.key)
        other = t.active.get(slot)
        if other is not None:
            t.overlaps.append((*slot, other, self.member))
        t.active[slot] = self.member
        t.last[(*slot, self.member)] = asyncio.get_running_loop().time()
        t.reconciles[self.member] += 1
        try:
            return await self.inner.reconcile(request)
        finally:
            if t.active.get(slot) == self.member:
                del t.active[slot]


class ShardedDemo(Demo):
    """The demo with ``--replicas`` sharded managers over one API server (group ``kinformer-demo``).

    Member ``i`` reads (informers) and writes (reconcilers) through fault proxy ``i``, so the workload's
    faults hit every member; its Lease renewals go to the server directly, so a watch stall does not fence
    it (a member fenced anyway is restarted, as a supervisor would). Once the Foos are created member-0
    is killed (cancelled: its Lease is not released, the others take its keys once it expired); after the
    second scale round member-1 (with 3 or more members) stops gracefully (drains, deletes its Lease).
    Each time the demo waits, bounded, until every key the member owned was reconciled by a survivor.
    The run fails if a key was ever reconciled by two members at once, a hand-off did not complete, or
    a Foo did not converge.
    """

    GROUP = "kinformer-demo"
    TIMINGS: ClassVar[dict[str, Any]] = dict(lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.ids = [f"member-{i}" for i in range(args.replicas)]
        self.tracker = ReconcileTracker()
        self.proxies: list[Any] = []
        self.clients: list[Any] = []
        self.lease_clients: list[Any] = []
        self.managers: dict[str, Any] = {}  # identity -> its current Manager
        self.incarnations: list[Any] = []  # every Manager run (their controllers' figures are summed)
        self.tasks: list[asyncio.Task[None]] = []
        self.stopped: list[str] = []
        self.handoffs: list[asyncio.Task[bool]] = []
        self.stopping = False

    async def run(self) -> int:
        """As the demo runs; with ``--storage etcd://...`` under a key prefix of the run's own (removed at the
        end unless ``--keep``), so runs do not collide."""
        from kinformer.server import APIServer

        if not (self.args.storage or "").startswith("etcd://"):
            return await super().run()
        url = run_prefix_url(self.args.storage, f"kinformer-demo-{uuid.uuid4().hex[:8]}")
        self.say(f"etcd storage {url}")
        try:
            async with APIServer(storage=url, watch_cache_size=100) as server:
                return await self._run_with_server(server, Path("."))
        finally:
            if not self.args.keep:
                await remove_run_keys(url)

    async def _run_with_server(self, server: Any, data: Path) -> int:
        from kinformer.client import Client
        from kinformer.testing import FaultProxy

        self.server = server
        self.say(f"embedded API server at {server.url}")
        t = self.TIMINGS
        self.say(f"{len(self.ids)} sharded members in group {self.GROUP} (Leases: duration {t['lease_duration']:g} s, "
                 f"renew deadline {t['renew_deadline']:g} s, retry {t['retry_period']:g} s); faults hit their "
                 "watches and writes, Lease renewals go direct")
        async with contextlib.AsyncExitStack() as stack:
            self.direct = await stack.enter_async_context(Client(server.url))
            for _ in self.ids:
                proxy = await stack.enter_async_context(FaultProxy.for_url(server.url))
                self.proxies.append(proxy)
                self.clients.append(await stack.enter_async_context(Client(proxy.url)))
                self.lease_clients.append(await stack.enter_async_context(Client(server.url)))
            self.proxy, self.client = ProxyGroup(self.proxies), self.clients[0]
            await self._install_crd()
            self.tasks = [asyncio.create_task(self._member(i), name=f"demo-{m}") for i, m in enumerate(self.ids)]
            view = asyncio.create_task(self._view())
            try:
                await self._wait(self._settled, 30, "every member joined with synced caches")
                self.say(f"members joined: {', '.join(self.ids)}; figures of the informers are "
                         f"{self.ids[-1]}'s, of the controllers summed over the members")
                await self._workload()
                converged = await self._converge()
                handed = all(await asyncio.gather(*self.handoffs))
                await self._settle_handlers()
            finally:
                self.stopping = True
                for mgr in self.managers.values():
                    mgr.stop()
                await asyncio.gather(*self.tasks, *self.handoffs, return_exceptions=True)
                view.cancel()
                await asyncio.gather(view, return_exceptions=True)
            overlaps = self._report()
            self._summary(converged)
            if self.args.keep:
                await self._keep(server, data)
            return 0 if converged and handed and not overlaps else 1

    # -- members ----------------------------------------------------------------------------------

    async def _member(self, i: int) -> None:
        """Run member ``i``; a fenced one is restarted under the same identity (a restarted process)."""
        from kinformer.controller.sharding import Sharding, ShardMembershipLost

        identity = self.ids[i]
        while not self.stopping:
            mgr, registrations, informers = self._build_manager(
                self.clients[i], sharding=Sharding(self.GROUP, identity=identity, **self.TIMINGS),
                lease_client=self.lease_clients[i], wrap=self.tracker.wrap(identity))
            self.managers[identity] = mgr
            self.incarnations.append(mgr)
            if i == len(self.ids) - 1:  # the member whose informers the figures show (never stopped)
                self.manager, self.registrations, self.informers = mgr, registrations, informers
            try:
                await mgr.run()
                return
            except ShardMembershipLost:
                self.faults.counts["members fenced"] += 1
                self.say(f"{identity} was fenced (its Lease was not renewed in time); restarting it")

    def _alive(self) -> list[str]:
        return [m for m in self.ids if m not in self.stopped]

    def _settled(self) -> bool:
        """Every live member acts on exactly the live members, may reconcile, and has synced caches (a member
        that failed instead raises its error)."""
        for task in self.tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        alive = frozenset(self._alive())
        members = [self.managers.get(m) for m in alive]
        return all(mgr is not None and mgr.ready() and mgr.shard_member is not None
                   and mgr.shard_member.acting == alive and mgr.shard_member.admitted() for mgr in members)

    def _managers(self) -> list[Any]:
        return self.incarnations

    # -- stopping members -------------------------------------------------------------------------

    async def _on_phase(self, phase: str) -> None:
        if phase == "created":
            self._report_ownership()
            if len(self.ids) >= 2:
                self._stop_member(0, crash=True)
        elif phase == "scaled 2" and len(self.ids) >= 3:
            with contextlib.suppress(TimeoutError):  # one hand-off at a time: the report stays readable
                await self._wait(lambda: all(h.done() for h in self.handoffs), 30, "the first hand-off")
            self._stop_member(1, crash=False)

    def _report_ownership(self) -> None:
        from kinformer.controller.sharding import owner_of

        keys = [k for k, v in self.expected.items() if v is not None]
        owners = Counter(owner_of(key, self.ids) for key in keys)
        self.say(f"rendezvous hashing splits the {len(keys)} Foos: "
                 + ", ".join(f"{m} {owners[m]}" for m in self.ids))

    def _stop_member(self, i: int, *, crash: bool) -> None:
        """Stop member ``i`` (cancelled, or gracefully) and follow its keys to the others in a task."""
        from kinformer.controller.sharding import owner_of

        identity, alive = self.ids[i], self._alive()
        theirs = [(controller, key) for controller, (informer, _) in CONTROLLERS.items()
                  for key in self.informers[informer].indexer.list_keys() if owner_of(key, alive) == identity]
        self.stopped.append(identity)
        since = asyncio.get_running_loop().time()
        kinds = Counter(controller for controller, _ in theirs)
        keys = " and ".join(f"{kinds[c]} {what}" for c, (_, what) in CONTROLLERS.items())
        if crash:
            self.tasks[i].cancel()  # a crash: in-flight reconciles cancelled, the Lease left in place
            self.proxies[i].drop_connections()
            self.faults.counts["members killed"] += 1
            self.say(f"fault: killed {identity} (its Lease stays); the others take its keys ({keys}) once "
                     "its Lease expired")
        else:
            self.managers[identity].stop()
            self.faults.counts["members stopped"] += 1
            self.say(f"stopping {identity} gracefully (drains, then deletes its Lease); its keys ({keys}) "
                     "move at once")
        self.handoffs.append(asyncio.create_task(self._handoff(identity, theirs, since, crash)))

    async def _handoff(self, identity: str, theirs: list[tuple[str, str]], since: float, crash: bool) -> bool:
        """Wait (bounded) until a survivor reconciled each of ``theirs`` (or its Foo was deleted); report."""
        survivors = [m for m in self.ids if m != identity]
        bound = self.TIMINGS["lease_duration"] * 3 + 10.0

        def pending() -> list[tuple[str, str]]:
            return [s for s in theirs if not self._deleted(s) and self.tracker.taken_by(s, survivors, since) is None]

        try:
            await self._wait(lambda: not pending(), bound, f"{identity}'s keys to move")
        except TimeoutError:
            self.say(f"HAND-OFF INCOMPLETE: {len(pending())} of {identity}'s keys not taken over within "
                     f"{bound:.0f} s: {', '.join(k for _, k in pending()[:5])}")
            return False
        took = Counter(self.tracker.taken_by(s, survivors, since) for s in theirs if not self._deleted(s))
        took.pop(None, None)
        how = "was killed" if crash else "was asked to stop"
        self.say(f"hand-off: {identity}'s {len(theirs)} keys taken over by "
                 + ", ".join(f"{m} ({n})" for m, n in sorted(took.items()))
                 + f" {asyncio.get_running_loop().time() - since:.1f} s after it {how}; none lost")
        return True

    def _deleted(self, slot: tuple[str, str]) -> bool:
        """Whether the Foo behind ``slot`` was deleted (nothing left to hand over)."""
        controller, key = slot
        foo = key if controller == "foo" else key.removesuffix("-deploy")
        return self.expected.get(foo) is None

    # -- the report -------------------------------------------------------------------------------

    def _figures(self) -> list[tuple[str, list[tuple[str, str]]]]:
        rows = super()._figures()
        for member in self.ids:
            rows.append((f"keys reconciled by {member}", [
                (controller, str(len(self.tracker.keys_of(member, controller)))) for controller in CONTROLLERS]))
        return rows

    def _report(self) -> list[tuple[str, str, str, str]]:
        """Say the spread and the overlap check; returns the overlaps."""
        t = self.tracker
        self.say("spread (keys each member reconciled; a key that moved counts for each): " + "; ".join(
            f"{m} reconciled " + ", ".join(f"{len(t.keys_of(m, c))} {what}" for c, (_, what) in CONTROLLERS.items())
            + f" ({t.reconciles[m]} reconciles)" for m in self.ids))
        if t.overlaps:
            for controller, key, a, b in t.overlaps[:10]:
                self.say(f"OVERLAP: {controller} {key} reconciled by {a} and {b} at once")
        else:
            self.say(f"no overlap: {sum(t.reconciles.values())} reconciles by {len(self.ids)} members, never two "
                     "members on one key at once")
        return t.overlaps
