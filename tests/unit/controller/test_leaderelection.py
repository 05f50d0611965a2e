"""Leader election rules with a fake clock and an in-memory Lease store with real CAS semantics."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from kinformer.clock import FakeClock
from kinformer.controller.leaderelection import LeaderElectionConfig, LeaderElector
from testlib import LeaseStore, wait_until


def config(identity: str, **kw) -> LeaderElectionConfig:
    return LeaderElectionConfig(lease_name="ctrl", lease_namespace="default", identity=identity, **kw)


async def run_for(clock: FakeClock, seconds: float, electors: list, check=None, step: float = 0.25) -> None:
    """Advance fake time in small steps, letting every elector reach its next sleep in between."""
    t = 0.0
    loop = asyncio.get_running_loop()
    while t < seconds:
        deadline = loop.time() + 5
        # Wait until every live elector is asleep on the fake clock (or has ended).
        while clock.waiters < sum(1 for e in electors if not e[1].done()):
            assert loop.time() < deadline, "electors did not reach their next sleep"
            await asyncio.sleep(0.001)
        if check:
            check()
        clock.step(step)
        t += step


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        config("a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew_deadline"):
        config("a", renew_deadline=2.0, retry_period=2.0)
    cfg = config("a")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)


async def test_one_leads_failover_after_crash_never_both() -> None:
    clock = FakeClock()
    store = LeaseStore()
    started: list[str] = []
    new_leaders: list[str] = []

    def make(identity: str):
        cfg = config(identity, on_new_leader=new_leaders.append)

        async def lead() -> None:
            started.append(identity)
            await asyncio.Event().wait()

        cfg.on_started_leading = lead
        elector = LeaderElector(cfg, store, clock=clock)
        return elector, asyncio.create_task(elector.run())

    a = make("a")
    await run_for(clock, 0.5, [a])
    b = make("b")
    electors = [a, b]

    def never_both() -> None:
        assert not (a[0].is_leader() and b[0].is_leader())

    await run_for(clock, 30, electors, never_both)
    assert started == ["a"]
    assert b[0].get_leader() == "a"
    assert not b[0].leading.is_set()

    # Crash a: no release, the lease stays as last renewed.
    a[0].config.release_on_cancel = False
    a[1].cancel()
    await asyncio.gather(a[1], return_exceptions=True)
    crash_time = clock.now()
    await run_for(clock, 25, [b])
    assert started == ["a", "b"]
    assert b[0].is_leader()
    # b waited for the lease to expire by its own observation (>= lease duration after the last change).
    lease = store.objects[("default", "ctrl")]["spec"]
    assert lease["holderIdentity"] == "b"
    assert lease["leaseTransitions"] == 1
    assert clock.now() - crash_time >= 15 - 2
    assert new_leaders[:1] == ["a"] and "b" in new_leaders
    b[1].cancel()
    await asyncio.gather(b[1], return_exceptions=True)


async def test_release_on_cancel_lets_the_next_take_over_quickly() -> None:
    clock = FakeClock()
    store = LeaseStore()
    stopped: list[str] = []
    a = LeaderElector(config("a", on_stopped_leading=lambda: stopped.append("a")), store, clock=clock)
    ta = asyncio.create_task(a.run())
    await run_for(clock, 1, [(a, ta)])
    assert a.is_leader()
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    assert stopped == ["a"]
    spec = store.objects[("default", "ctrl")]["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    b = LeaderElector(config("b"), store, clock=clock)
    tb = asyncio.create_task(b.run())
    await run_for(clock, 4, [(b, tb)])
    assert b.is_leader()
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)


async def test_leader_that_cannot_renew_stops_before_lease_expires() -> None:
    clock = FakeClock()
    store = LeaseStore()
    stopped: list[float] = []
    a = LeaderElector(config("a", release_on_cancel=False, on_stopped_leading=lambda: stopped.append(clock.now())),
                      store, clock=clock)
    ta = asyncio.create_task(a.run())
    await run_for(clock, 1, [(a, ta)])
    assert a.leading.is_set()
    store.fail = True
    last_renew = clock.now()
    await run_for(clock, 20, [(a, ta)])
    assert ta.done() and stopped
    # It gave up within the renew deadline (+ one retry period), i.e. before the 15 s lease could expire.
    assert stopped[0] - last_renew <= 10 + 2 + 0.5
    assert not a.leading.is_set()


def _lease_config(identity: str, **kw: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(lease_name="review", lease_namespace="default", identity=identity, **kw)


async def test_leader_stops_leading_when_a_renewal_hangs_past_the_renew_deadline() -> None:
    clock = FakeClock()
    store = LeaseStore(clock)
    stopped = asyncio.Event()
    cfg = _lease_config("me", on_stopped_leading=stopped.set)
    elector = LeaderElector(cfg, store, clock=clock, rng=random.Random(1))
    task = asyncio.create_task(elector.run())
    try:
        await asyncio.wait_for(elector.leading.wait(), 5)
        await clock.wait_for_waiters(1)  # asleep until the next renewal
        store.hang_gets = True
        clock.step(cfg.retry_period)
        await asyncio.wait_for(store.get_entered.wait(), 5)
        try:
            await clock.wait_for_waiters(1, timeout=0.5)  # a fixed elector times the attempt on its clock
        except TimeoutError:
            pass
        clock.step(cfg.renew_deadline + cfg.retry_period)  # still before lease_duration since the last renewal
        await wait_until(stopped.is_set, timeout=2)
        assert not elector.leading.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_candidate_counts_lease_duration_from_when_it_saw_the_record() -> None:
    clock = FakeClock()
    store = LeaseStore(clock)
    other = LeaderElector(_lease_config("other"), store, clock=clock)
    assert await other._try_acquire_or_renew()  # "other" holds a fresh 15 s lease
    me = LeaderElector(_lease_config("me"), store, clock=clock)
    store.get_latency = 6.0  # our GET takes 6 s; the record it returns is new to us when it arrives
    assert not await me._try_acquire_or_renew()
    seen_at = clock.now()
    store.get_latency = 0.0
    clock.step(10.0)  # 10 s after we first saw the record: less than leaseDurationSeconds (15)
    assert clock.now() - seen_at < 15
    assert not await me._try_acquire_or_renew(), "took over a lease that may still be valid"
