"""Sharded Managers over one embedded API server: every key reconciled, spread, never by two at once.

The reconciler of every test records, across all Managers, which member is reconciling each key right
now; a second member entering a key already being reconciled is an overlap (reconciles await a little,
so overlaps would show). Lease timings are short (3 / 2 / 0.4 s) so hand-offs happen within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

import kinformer as ki
from kinformer.client import Client
from kinformer.controller.sharding import owner_of
from kinformer.testing import FaultProxy
from testlib import configmap, wait_until

LEASE, RENEW, RETRY = 3.0, 2.0, 0.4
KEYS = 90
HOLD = 0.4  # each reconcile awaits this long, and
REQUEUE = 0.1  # the key is reconciled again this long after: keys are in flight half the time


class Tracker:
    """The test's reconciler for every member, with an overlap detector."""

    def __init__(self) -> None:
        self.active: dict[str, str] = {}  # key -> member reconciling it now
        self.overlaps: list[tuple[str, str, str]] = []
        self.last: dict[str, tuple[str, float]] = {}  # key -> (member, loop time) of its last reconcile
        self.by_member: Counter[str] = Counter()
        self.leaving: str | None = None  # once set: first_after records who took each key over, and when
        self.first_after: dict[str, tuple[str, float]] = {}

    def reconciler(self, member: str) -> Any:
        async def reconcile(request: ki.Request) -> ki.Result:
            key = request.key
            if self.leaving not in (None, member) and key not in self.first_after:
                self.first_after[key] = (member, asyncio.get_running_loop().time())
            other = self.active.get(key)
            if other is not None:
                self.overlaps.append((key, other, member))
            self.active[key] = member
            try:
                await asyncio.sleep(HOLD)
            finally:
                if self.active.get(key) == member:
                    del self.active[key]
            self.last[key] = (member, asyncio.get_running_loop().time())
            self.by_member[member] += 1
            return ki.Result(requeue_after=REQUEUE)

        return reconcile

    def reconciled_since(self, keys: list[str], since: float) -> bool:
        return all(key in self.last and self.last[key][1] > since for key in keys)


class Member:
    """One sharded Manager with a client of its own, run in a task."""

    def __init__(self, url: str, tracker: Tracker, identity: str) -> None:
        self.identity = identity
        self.client = Client(url, timeout=10.0)
        self.mgr = ki.Manager(self.client, sharding=ki.Sharding(
            "test", identity=identity, lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY))
        self.mgr.controller(tracker.reconciler(identity), name=f"copier-{identity}") \
            .for_("configmaps").workers(KEYS // 2)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.mgr.run())

    @property
    def member(self) -> Any:
        return self.mgr.shard_member

    async def stop(self, *, crash: bool = False) -> None:
        """Stop gracefully (drain, release the Lease), or as a crash (cancel, the Lease stays)."""
        assert self.task is not None
        if crash:
            self.task.cancel()
        else:
            self.mgr.stop()
        with contextlib.suppress(asyncio.CancelledError, ki.ShardMembershipLost):
            await asyncio.wait_for(self.task, 30)
        await self.client.close()


@contextlib.asynccontextmanager
async def group(url: str, tracker: Tracker, n: int, first: int = 0,
                running: tuple[Member, ...] = ()) -> AsyncIterator[list[Member]]:
    """``n`` new members, started and settled on a view of them plus the ``running`` ones."""
    members = [Member(url, tracker, f"m{i}") for i in range(first, first + n)]
    for m in members:
        m.start()
    try:
        await settled([*running, *members])
        yield members
    finally:
        for m in members:
            if m.task is not None and not m.task.done():
                await m.stop()


def _settled(members: list[Member]) -> bool:
    ids = frozenset(m.identity for m in members)
    return all(m.member is not None and m.member.acting == ids and m.member.admitted() for m in members)


async def settled(members: list[Member], timeout: float = 20.0) -> None:
    """Wait until every member sees exactly ``members`` and may reconcile."""
    for m in members:
        if m.task is not None and m.task.done():
            m.task.result()
    await wait_until(lambda: _settled(members), timeout=timeout, what=f"{len(members)} members settled")


async def _create_keys(client: Client, names: list[str]) -> list[str]:
    for i in range(0, len(names), 20):
        await asyncio.gather(*(client.create("configmaps", configmap(name), namespace="default")
                               for name in names[i:i + 20]))
    return [f"default/{name}" for name in names]


@pytest.fixture
async def keys(kube_client: Client) -> list[str]:
    return await _create_keys(kube_client, [f"cm-{i}" for i in range(KEYS)])


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


async def test_keys_spread_over_members_never_two_at_once(kube_server: Any, keys: list[str]) -> None:
    tracker = Tracker()
    async with group(kube_server.url, tracker, 3) as members:
        start = _loop_time()
        await wait_until(lambda: tracker.reconciled_since(keys, start), what="every key reconciled")
        owners = Counter(owner_of(key, [m.identity for m in members]) for key in keys)
        for m in members:
            assert owners[m.identity] >= KEYS // 6, owners  # rendezvous hashing spreads the keys
        since = _loop_time()
        await wait_until(lambda: tracker.reconciled_since(keys, since), what="a second round")
        for key, (member, _) in tracker.last.items():
            assert member == owner_of(key, [m.identity for m in members])
        dropped = sum(m.mgr.controllers[0].shard._dropped._value.get() for m in members)
        assert dropped >= KEYS  # each member dropped the initial adds of the keys it does not own
    assert tracker.overlaps == []


@pytest.mark.parametrize("crash", [False, True], ids=["graceful", "crash"])
async def test_a_leaving_member_hands_its_keys_over(kube_server: Any, kube_client: Client, keys: list[str],
                                                    crash: bool) -> None:
    tracker = Tracker()
    async with group(kube_server.url, tracker, 3) as members:
        start = _loop_time()
        await wait_until(lambda: tracker.reconciled_since(keys, start), what="every key reconciled")
        leaving = members[0]
        theirs = [key for key in keys if owner_of(key, [m.identity for m in members]) == leaving.identity]
        stopped, tracker.leaving = _loop_time(), leaving.identity
        await leaving.stop(crash=crash)
        # created while the hand-off may still be going on: not lost either
        added = await _create_keys(kube_client, [f"late-{i}" for i in range(10)])
        # graceful: the drain (its queue, HOLD each) and a Lease delete; crash: the Lease expires
        bound = 2.0 if not crash else LEASE + 3 * RETRY
        await wait_until(lambda: all(key in tracker.first_after for key in theirs + added), timeout=bound + 10.0,
                         what="the leaving member's keys reconciled by the others")
        moved_after = max(tracker.first_after[key][1] for key in theirs) - stopped
        assert moved_after < bound + 1.0, f"keys moved after {moved_after:.2f}s"
        owners = [m.identity for m in members[1:]]
        assert all(tracker.first_after[key][0] == owner_of(key, owners) for key in theirs)
        await settled(members[1:])
    assert tracker.overlaps == []


async def test_a_fourth_member_takes_about_a_quarter(kube_server: Any, keys: list[str]) -> None:
    tracker = Tracker()
    async with group(kube_server.url, tracker, 3) as members:
        before = {key: owner_of(key, [m.identity for m in members]) for key in keys}
        fourth = Member(kube_server.url, tracker, "m3")
        fourth.start()
        try:
            await settled([*members, fourth])
            after = {key: owner_of(key, [m.identity for m in [*members, fourth]]) for key in keys}
            moved = [key for key in keys if before[key] != after[key]]
            assert all(after[key] == "m3" for key in moved)  # nothing moves between the old members
            assert 0.12 * KEYS < len(moved) < 0.40 * KEYS, len(moved)
            since = _loop_time()
            await wait_until(lambda: tracker.reconciled_since(moved, since) and all(
                tracker.last[key][0] == "m3" for key in moved), what="the fourth member reconciles its keys")
        finally:
            await fourth.stop()
    assert tracker.overlaps == []


async def test_a_member_that_cannot_renew_is_fenced_and_its_keys_move(kube_server: Any, keys: list[str]) -> None:
    """Its API connection stalls: within the renew deadline it stops reconciling and run() raises
    ShardMembershipLost; the others take its keys once its Lease expired, never overlapping it."""
    tracker = Tracker()
    async with FaultProxy.for_url(kube_server.url) as proxy:
        cut = Member(proxy.url, tracker, "m0")
        cut.start()
        async with group(kube_server.url, tracker, 2, first=1, running=(cut,)):
            try:
                theirs = [key for key in keys if owner_of(key, ["m0", "m1", "m2"]) == "m0"]
                stalled, tracker.leaving = _loop_time(), "m0"
                proxy.stall()
                await wait_until(lambda: cut.member.fenced, timeout=RENEW + 5.0, what="the cut member fenced")
                assert _loop_time() - stalled < RENEW + 1.0  # at its last renewal + renew_deadline
                await wait_until(lambda: cut.task.done(), timeout=15.0, what="the cut member's run() ended")
                assert isinstance(cut.task.exception(), ki.ShardMembershipLost)
                assert not any(member == "m0" for member in tracker.active.values())  # aborted, not drained
                await wait_until(lambda: all(key in tracker.first_after for key in theirs), timeout=LEASE + 10.0,
                                 what="its keys taken over")
                assert min(tracker.first_after[key][1] for key in theirs) - stalled > RENEW
            finally:
                proxy.resume()
                await cut.stop()
    assert tracker.overlaps == []


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_invariants_hold_under_faults(kube_server: Any, keys: list[str], seed: int) -> None:
    """Connections dropped and 410s answered at random: still every key reconciled, never two at once."""
    rng = random.Random(seed)
    tracker = Tracker()
    async with FaultProxy.for_url(kube_server.url) as proxy:
        chaos_on = asyncio.Event()

        async def chaos() -> None:
            await chaos_on.wait()
            for _ in range(15):
                await asyncio.sleep(rng.uniform(0.05, 0.25))
                if rng.random() < 0.6:
                    proxy.drop_connections()
                else:
                    proxy.inject(410, times=1)

        async with group(proxy.url, tracker, 3) as members:
            chaos_task = asyncio.create_task(chaos())
            try:
                chaos_on.set()
                leaving = members[seed % 3]
                await asyncio.sleep(rng.uniform(0.5, 1.5))  # a hand-off in the middle of the faults
                await leaving.stop(crash=rng.random() < 0.5)
                await chaos_task
            finally:
                chaos_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await chaos_task
            proxy.heal()
            alive = [m for m in members if m is not leaving and not m.task.done()]
            await settled(alive)
            since = _loop_time()
            await wait_until(lambda: tracker.reconciled_since(keys, since), timeout=20.0,
                             what="every key reconciled after the faults")
        assert proxy.faults
    assert tracker.overlaps == []
