"""Sharding's pure rules: rendezvous ownership, the acknowledgement rule, expiry and fencing on a FakeClock.

The member's Lease informer is replaced by a stub that the test feeds (``deliver``); the API client is an
in-memory Lease store with resourceVersion CAS (testlib's LeaseStore, plus delete).
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from typing import Any

import orjson
import pytest

from kinformer.clock import FakeClock
from kinformer.controller.sharding import (
    ACK_ANNOTATION,
    GROUP_LABEL,
    Sharding,
    ShardMember,
    ShardMembershipLost,
    lease_name,
    owner_of,
)
from kinformer.errors import Conflict, NotFound
from testlib import LeaseStore, wait_until

CONFIG = Sharding("g", identity="a", lease_duration=3.0, renew_deadline=2.0, retry_period=0.4)
KEYS = [f"ns/obj-{i}" for i in range(4000)]


class Store(LeaseStore):
    """LeaseStore with delete (resourceVersion precondition) and a hook that plays the watch."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.watchers: list[Any] = []
        self.write_latency = 0.0  # clock seconds each write takes

    def _store(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        out = super()._store(key, body)
        if self.clock is not None:
            self.clock.step(self.write_latency)
        for deliver in self.watchers:
            deliver(copy.deepcopy(out))
        return out

    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     preconditions: dict[str, str] | None = None) -> dict[str, Any]:
        self._check()
        key = (namespace or "", name)
        if key not in self.objects:
            raise NotFound("gone")
        if preconditions and preconditions["resourceVersion"] != self.objects[key]["metadata"]["resourceVersion"]:
            raise Conflict("precondition failed")
        return self.objects.pop(key)


class _Registration:
    async def wait_for_sync(self) -> bool:
        return True


class Informer:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_event_handler(self, **handlers: Any) -> _Registration:
        member = handlers["on_add"].__self__  # the test drives the member's (synchronous) state changes
        self.handlers = {"on_add": member._seen, "on_update": lambda _old, new: member._seen(new),
                         "on_delete": member._gone}
        self.coroutine_handlers = handlers
        return _Registration()


class Factory:
    def __init__(self) -> None:
        self.informer_ = Informer()
        self.options: dict[str, Any] = {}

    def informer(self, resource: str, **options: Any) -> Informer:
        self.options = {"resource": resource, **options}
        return self.informer_


def peer_lease(identity: str, rv: int, acked: list[str] | None) -> dict[str, Any]:
    annotations = {} if acked is None else {ACK_ANNOTATION: orjson.dumps(acked).decode()}
    return {"metadata": {"name": lease_name("g", identity), "namespace": "default", "resourceVersion": str(rv),
                         "labels": {GROUP_LABEL: "g"}, "annotations": annotations},
            "spec": {"holderIdentity": identity}}


def member(clock: FakeClock, store: Any = None) -> tuple[ShardMember, Factory]:
    factory = Factory()
    m = ShardMember(CONFIG, store, factory, clock=clock)
    return m, factory


def joined(m: ShardMember, view: set[str]) -> None:
    """Put ``m`` in the state of a joined member acting on ``view``."""
    m.active = True
    m.view = frozenset(view)
    m._renewed_at = m.clock.now()


# -- rendezvous ownership ---------------------------------------------------------------------------------------


def test_owner_of_spreads_keys_evenly() -> None:
    members = ["a", "b", "c", "d"]
    counts = Counter(owner_of(key, members) for key in KEYS)
    assert set(counts) == set(members)
    for n in counts.values():
        assert abs(n - len(KEYS) / 4) < len(KEYS) * 0.05, counts
    assert owner_of("k", []) is None
    assert owner_of("k", ["a"]) == "a"
    assert owner_of("k", ["a", "b"]) == owner_of("k", ["b", "a"])  # the order of the members is irrelevant


def test_a_joining_member_takes_only_its_share_and_a_leaving_one_gives_only_its_own() -> None:
    before = {key: owner_of(key, "abcd") for key in KEYS}
    joined_ = {key: owner_of(key, "abcde") for key in KEYS}
    moved = [key for key in KEYS if before[key] != joined_[key]]
    assert all(joined_[key] == "e" for key in moved)  # nothing moves between the old members
    assert abs(len(moved) - len(KEYS) / 5) < len(KEYS) * 0.04
    left = {key: owner_of(key, "abc") for key in KEYS}
    assert all(left[key] == before[key] for key in KEYS if before[key] != "d")


def test_sharding_validates_timings() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        Sharding("g", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match=r"1\.2 x retry_period"):
        Sharding("g", renew_deadline=2.0, retry_period=2.0)
    with pytest.raises(ValueError, match="name"):
        Sharding("")
    assert lease_name("My_Group", "host/x:1") == lease_name("My_Group", "host/x:1")
    assert lease_name("My_Group", "a").startswith("my-group-")


def test_member_watches_only_its_groups_leases_on_the_event_loop() -> None:
    _, factory = member(FakeClock())
    assert all(asyncio.iscoroutinefunction(h) for h in factory.informer_.coroutine_handlers.values())
    assert factory.options == {"resource": "coordination.k8s.io/v1/leases", "namespace": "default",
                               "label_selector": f"{GROUP_LABEL}=g"}


# -- the acknowledgement rule -----------------------------------------------------------------------------------


def test_a_member_reconciles_only_once_every_peer_of_its_view_acknowledged_it() -> None:
    clock = FakeClock()
    m, factory = member(clock)
    seen = factory.informer_.handlers["on_add"]
    joined(m, {"a", "b"})
    key = next(k for k in KEYS if owner_of(k, "ab") == "a")
    seen(peer_lease("b", 1, None))  # b is joining: it owns nothing yet, so it need not have seen a
    assert m.admitted() and m.owns(key)
    seen(peer_lease("b", 2, ["b"]))  # b acts on a view without a: it may be working on a's keys
    assert not m.admitted() and not m.owns(key)
    seen(peer_lease("b", 3, ["a", "b"]))
    assert m.admitted() and m.owns(key)
    assert not m.owns(next(k for k in KEYS if owner_of(k, "ab") == "b"))
    m.fenced = True
    assert not m.admitted()


def test_keys_of_a_member_that_left_move_once_our_lease_stops_listing_it() -> None:
    m, _ = member(FakeClock())
    joined(m, {"a", "b"})
    m._claimed = frozenset({"a", "b"})  # our Lease acknowledges b
    theirs = next(k for k in KEYS if owner_of(k, "ab") == "b")
    m.view = frozenset({"a"})  # b left
    assert not m.owns(theirs)  # b, back under its identity, could still read our acknowledgement
    m._claimed = frozenset({"a"})  # written
    assert m.owns(theirs)


def test_a_member_owns_nothing_once_the_renew_deadline_passed() -> None:
    clock = FakeClock()
    m, _ = member(clock)
    joined(m, {"a"})
    assert m.owns(KEYS[0])
    clock.step(CONFIG.renew_deadline - 0.01)
    assert m.owns(KEYS[0])
    clock.step(0.01)
    assert not m.owns(KEYS[0])


def test_an_acknowledgement_waits_for_the_keys_given_up_to_drain() -> None:
    clock = FakeClock()
    m, _ = member(clock)
    joined(m, {"a", "b"})
    moving = next(k for k in KEYS if owner_of(k, "ab") == "b" and owner_of(k, "a") == "a")
    kept = next(k for k in KEYS if owner_of(k, "ab") == "a")
    m.in_flight = lambda: [kept]
    assert m._drained()
    m.in_flight = lambda: [kept, moving]
    assert not m._drained()


# -- expiry, judged on the local clock and confirmed with the server ---------------------------------------------


async def with_peer() -> tuple[FakeClock, Store, ShardMember, dict[str, Any]]:
    """A joined member "a" that has seen peer "b"'s Lease, stored in the returned store."""
    clock = FakeClock()
    store = Store(clock)
    m, factory = member(clock, store)
    joined(m, {"a"})
    b = await store.create("leases", peer_lease("b", 0, ["a", "b"]), namespace="default")
    factory.informer_.handlers["on_add"](b)
    return clock, store, m, b


async def test_a_silent_peer_expires_after_the_lease_duration_confirmed_by_a_read() -> None:
    clock, store, m, _ = await with_peer()
    assert await m._current_view() == {"a", "b"}
    clock.step(CONFIG.lease_duration)
    assert await m._current_view() == {"a", "b"}  # not yet: strictly longer than the lease duration
    clock.step(0.01)
    assert await m._current_view() == {"a"}
    assert store.objects == {}  # the crashed member's Lease is cleared


async def test_a_stale_informer_does_not_expire_a_live_peer() -> None:
    clock, store, m, b = await with_peer()
    clock.step(CONFIG.lease_duration / 2)
    await store.replace("leases", b, namespace="default")  # b renewed; the informer missed it
    clock.step(CONFIG.lease_duration)
    assert await m._current_view() == {"a", "b"}  # the read saw the renewal
    clock.step(CONFIG.lease_duration - 0.01)
    assert await m._current_view() == {"a", "b"}  # timed from when the read saw the change
    clock.step(0.02)
    assert await m._current_view() == {"a"}


async def test_a_deleted_or_released_lease_leaves_the_view_at_once() -> None:
    clock = FakeClock()
    m, factory = member(clock)
    handlers = factory.informer_.handlers
    joined(m, {"a"})
    handlers["on_add"](peer_lease("b", 1, ["a", "b"]))
    handlers["on_add"](peer_lease("c", 1, ["a", "b", "c"]))
    assert await m._current_view() == {"a", "b", "c"}
    handlers["on_delete"](peer_lease("b", 1, ["a", "b"]))
    released = peer_lease("c", 2, None)
    released["spec"]["holderIdentity"] = ""
    handlers["on_update"](None, released)
    assert await m._current_view() == {"a"}


# -- running: joining, publishing, fencing ----------------------------------------------------------------------


async def test_a_member_joins_publishes_its_view_and_is_fenced_when_it_cannot_renew() -> None:
    clock = FakeClock()
    store = Store(clock)
    m, factory = member(clock, store)
    store.watchers.append(factory.informer_.handlers["on_add"])
    changes: list[bool] = []
    m.on_change.append(lambda: changes.append(m.admitted()))
    task = asyncio.create_task(m.run())
    try:
        await asyncio.wait_for(m.ready.wait(), 5)
        lease = store.objects[("default", m.lease_name)]
        assert orjson.loads(lease["metadata"]["annotations"][ACK_ANNOTATION]) == ["a"]
        assert lease["spec"]["holderIdentity"] == "a" and lease["metadata"]["labels"] == {GROUP_LABEL: "g"}
        assert m.admitted() and True in changes
        store.fail = True  # the server is unreachable from now on
        await clock.wait_for_waiters()
        clock.step(CONFIG.renew_deadline)
        await wait_until(task.done, timeout=5, what="fenced")
        with pytest.raises(ShardMembershipLost):
            task.result()
        assert m.fenced and not m.admitted() and changes[-1] is False
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_renewal_answered_after_the_renew_deadline_fences() -> None:
    clock = FakeClock()
    store = Store(clock)
    m, factory = member(clock, store)
    store.watchers.append(factory.informer_.handlers["on_add"])
    task = asyncio.create_task(m.run())
    try:
        await asyncio.wait_for(m.ready.wait(), 5)
        clock.step(CONFIG.renew_deadline - 0.1)  # a renewal starts just before the deadline ...
        store.write_latency = 0.2  # ... and is answered just after it
        m._publish.set()
        await wait_until(task.done, timeout=5, what="fenced")
        assert m.fenced and isinstance(task.exception(), ShardMembershipLost)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- the controller's side: filter at the queue, re-enqueue what ownership brings -------------------------------


class _Queue:
    def __init__(self) -> None:
        self.added: list[Any] = []

    def add(self, item: Any) -> None:
        self.added.append(item)


class _Indexer:
    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def list_keys(self) -> list[str]:
        return list(self.keys)

    def get_by_key(self, key: str) -> Any:
        return {} if key in self.keys else None


class _Controller:
    def __init__(self, keys: list[str]) -> None:
        self.name = "unit"
        self.queue = _Queue()
        self.primary = type("Primary", (), {"indexer": _Indexer(keys)})()
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_a_controller_drops_what_it_does_not_own_and_enqueues_what_it_gains() -> None:
    from kinformer.controller.reconcile import Request
    from kinformer.controller.sharding import ShardedController

    clock = FakeClock()
    m, factory = member(clock)
    cached = KEYS[:200]
    ctrl = _Controller(cached)
    shard = ShardedController(ctrl, m)
    joined(m, {"a", "b"})
    factory.informer_.handlers["on_add"](peer_lease("b", 1, ["a", "b"]))
    m._notify()
    mine = {k for k in cached if owner_of(k, "ab") == "a"}
    assert {r.key for r in ctrl.queue.added} == mine  # gained: from nothing to a's share
    ctrl.queue.added.clear()
    deleted = next(k for k in KEYS[200:] if owner_of(k, "ab") == "b" and owner_of(k, "a") == "a")
    ns, _, name = deleted.partition("/")
    assert not shard.admit(Request(ns, name))  # b's key, its object gone from the cache: remembered
    theirs = next(k for k in cached if owner_of(k, "ab") == "b")
    assert not shard.admit(Request(*theirs.split("/")))  # b's key, still cached: found again by the scan
    m.view = frozenset({"a"})  # b left
    m._notify()
    gained = {r.key for r in ctrl.queue.added}
    assert deleted in gained and theirs in gained
    assert gained == {k for k in cached if k not in mine} | {deleted}
    m.fenced = True
    m._notify()
    assert ctrl.aborted


def test_a_key_dropped_while_admission_lapsed_unnoticed_is_enqueued_when_it_returns() -> None:
    """b's Lease is seen twice before the view loop runs: without a's acknowledgement, then with it. A key
    popped in between is dropped; the return of admission must enqueue it again."""
    from kinformer.controller.reconcile import Request
    from kinformer.controller.sharding import ShardedController

    clock = FakeClock()
    m, factory = member(clock)
    cached = KEYS[:200]
    ctrl = _Controller(cached)
    shard = ShardedController(ctrl, m)
    seen = factory.informer_.handlers["on_add"]
    joined(m, {"a", "b"})
    seen(peer_lease("b", 1, ["a", "b"]))
    m._notify()
    ctrl.queue.added.clear()
    key = next(k for k in cached if owner_of(k, "ab") == "a")
    seen(peer_lease("b", 2, ["b"]))  # not notified yet: the view loop has not run
    assert not shard.admit(Request(*key.split("/")))
    seen(peer_lease("b", 3, ["a", "b"]))
    m._notify()  # the view loop runs once, after both
    assert key in {r.key for r in ctrl.queue.added}


async def test_an_unconfirmed_expiry_is_read_again_only_after_the_retry_period() -> None:
    clock, store, m, _ = await with_peer()
    clock.step(CONFIG.lease_duration / 2)
    assert m._next_expiry() == pytest.approx(min(CONFIG.retry_period, CONFIG.lease_duration / 2 + 0.01))
    clock.step(CONFIG.lease_duration)
    store.fail = True  # the server cannot confirm: b stays, and is not polled in a tight loop
    assert await m._current_view() == {"a", "b"}
    assert m._next_expiry() == CONFIG.retry_period
