"""Rate limiters (client-go default_rate_limiters.go semantics) and the RateLimitingQueue."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.clock import FakeClock
from kinformer.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    RateLimitingQueue,
    default_controller_rate_limiter,
)
from testlib import wait_until


def test_exponential_doubles_from_base_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert [limiter.when("a") for _ in range(5)] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert limiter.num_requeues("a") == 5
    assert limiter.when("b") == pytest.approx(0.005)  # per item
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)
    limiter.forget("never-seen")


def test_exponential_is_capped() -> None:
    limiter = ItemExponentialFailureRateLimiter(1.0, 10.0)
    assert [limiter.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_exponential_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(3000)]
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0
    assert limiter.num_requeues("a") == 3000
    huge = ItemExponentialFailureRateLimiter(1e300, 5.0)
    assert [huge.when("x") for _ in range(30)][-1] == 5.0


def test_fast_slow() -> None:
    limiter = ItemFastSlowRateLimiter(0.005, 10.0, 3)
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert limiter.num_requeues("a") == 5
    assert limiter.when("b") == 0.005
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_bucket_burst_then_spacing_without_time_passing() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    # every further call reserves the next token: 0.1 s, 0.2 s, 0.3 s from now
    assert [bucket.when("x") for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert bucket.num_requeues("x") == 0
    bucket.forget("x")


def test_bucket_spacing_when_callers_wait_their_turn() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=100, clock=clock)
    for i in range(100):
        bucket.when(i)
    delays = []
    for i in range(5):
        delays.append(bucket.when(i))
        clock.step(0.1)
    assert delays == pytest.approx([0.1] * 5)


def test_bucket_refills_up_to_burst() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=5, clock=clock)
    for i in range(5):
        assert bucket.when(i) == 0.0
    assert bucket.when("x") == pytest.approx(0.1)
    clock.step(0.3)  # pays back the reservation and refills 2 tokens
    assert bucket.tokens_at(clock.now()) == pytest.approx(2.0)
    clock.step(100.0)
    assert bucket.tokens_at(clock.now()) == 5.0
    assert [bucket.when(i) for i in range(5)] == [0.0] * 5
    assert bucket.when("y") == pytest.approx(0.1)


def test_bucket_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        BucketRateLimiter(burst=0)
    assert BucketRateLimiter(qps=float("inf"), burst=1).when("a") == 0.0


def test_max_of_takes_the_longest_and_forgets_everywhere() -> None:
    clock = FakeClock()
    exp = ItemExponentialFailureRateLimiter(0.001, 1.0)
    fast_slow = ItemFastSlowRateLimiter(0.003, 10.0, 2)
    limiter = MaxOfRateLimiter(exp, fast_slow, BucketRateLimiter(10.0, 100, clock))
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.003, 0.003, 10.0, 10.0])
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert exp.num_requeues("a") == 0 and fast_slow.num_requeues("a") == 0
    assert limiter.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    # 97 tokens left; the bucket is shared by all items (controller-runtime#1594)
    assert [limiter.when(i) for i in range(97)] == pytest.approx([0.005] * 97)
    assert limiter.when("fresh") == pytest.approx(0.1)
    assert limiter.when("fresh2") == pytest.approx(0.2)


def test_limiters_satisfy_the_protocol() -> None:
    for limiter in (
        ItemExponentialFailureRateLimiter(),
        ItemFastSlowRateLimiter(0.1, 1.0, 1),
        BucketRateLimiter(),
        default_controller_rate_limiter(),
    ):
        assert isinstance(limiter, RateLimiter)


async def test_rate_limiting_queue_requeues_with_backoff() -> None:
    clock = FakeClock()
    q = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock)
    q.add("a")
    assert await q.get() == "a"
    q.add_rate_limited("a")  # waits 1 s
    q.done("a")
    assert q.num_requeues("a") == 1
    await clock.wait_for_waiters(1)
    clock.step(0.9)
    await asyncio.sleep(0)
    assert len(q) == 0
    clock.step(0.1)
    await wait_until(lambda: len(q) == 1)
    assert await q.get() == "a"
    q.add_rate_limited("a")  # waits 2 s
    q.done("a")
    assert q.num_requeues("a") == 2
    await clock.wait_for_waiters(1)
    clock.step(2.0)
    await wait_until(lambda: len(q) == 1)
    assert await q.get() == "a"
    q.forget("a")
    q.done("a")
    assert q.num_requeues("a") == 0


async def test_rate_limiting_queue_defaults_to_the_controller_limiter() -> None:
    clock = FakeClock()
    q = RateLimitingQueue(clock=clock)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    await clock.wait_for_waiters(1)
    clock.step(0.005)
    assert await asyncio.wait_for(q.get(), 2) == "a"
    q.shutdown()
    q.add_rate_limited("b")
    assert len(q) == 0 and q.waiting_count == 0
