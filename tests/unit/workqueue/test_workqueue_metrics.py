"""Work queue metrics: client-go semantics through a recording provider and the Prometheus export."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kinformer.clock import FakeClock
from kinformer.workqueue import DelayingQueue, PrometheusMetricsProvider, RateLimitingQueue, WorkQueue
from kinformer.workqueue.metrics import UNFINISHED_WORK_UPDATE_PERIOD
from testlib import wait_until

METRIC_NAMES = (
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "workqueue_retries_total",
)


class Value:
    """A gauge/counter/histogram that records what it is told (no set_function: periodic updates)."""

    def __init__(self) -> None:
        self.value = 0.0
        self.observations: list[float] = []

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        self.observations.append(value)


class RecordingProvider:
    def __init__(self) -> None:
        self.created: dict[tuple[str, str], Value] = {}

    def _new(self, kind: str, name: str) -> Value:
        return self.created.setdefault((kind, name), Value())

    def new_depth_metric(self, name: str) -> Value:
        return self._new("depth", name)

    def new_adds_metric(self, name: str) -> Value:
        return self._new("adds", name)

    def new_latency_metric(self, name: str) -> Value:
        return self._new("latency", name)

    def new_work_duration_metric(self, name: str) -> Value:
        return self._new("work", name)

    def new_unfinished_work_seconds_metric(self, name: str) -> Value:
        return self._new("unfinished", name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> Value:
        return self._new("longest", name)

    def new_retries_metric(self, name: str) -> Value:
        return self._new("retries", name)

    def __getitem__(self, kind: str) -> Value:
        return self.created[(kind, "q")]


async def test_depth_adds_latency_and_work_duration() -> None:
    clock = FakeClock()
    provider = RecordingProvider()
    q = WorkQueue("q", clock=clock, metrics=provider)
    q.add("a")
    q.add("a")  # duplicate: not counted
    q.add("b")
    assert provider["adds"].value == 2 and provider["depth"].value == 2
    clock.step(2.0)
    assert await q.get() == "a"
    assert provider["depth"].value == 1
    assert provider["latency"].observations == [2.0]
    clock.step(3.0)
    q.done("a")
    assert provider["work"].observations == [3.0]
    assert await q.get() == "b"
    assert provider["latency"].observations == [2.0, 5.0]
    assert provider["depth"].value == 0
    q.shutdown()


async def test_readd_while_processing_counts_as_an_add() -> None:
    clock = FakeClock()
    provider = RecordingProvider()
    q = WorkQueue("q", clock=clock, metrics=provider)
    q.add("a")
    await q.get()
    clock.step(1.0)
    q.add("a")  # dirty while processing: counted, and its queue time starts now
    assert provider["adds"].value == 2 and provider["depth"].value == 1
    clock.step(1.0)
    q.done("a")
    clock.step(1.0)
    await q.get()
    assert provider["latency"].observations == [0.0, 2.0]
    assert provider["work"].observations == [2.0]
    q.shutdown()


async def test_unfinished_work_is_refreshed_periodically() -> None:
    clock = FakeClock()
    provider = RecordingProvider()
    q = WorkQueue("q", clock=clock, metrics=provider)
    q.add("a")
    q.add("b")
    await q.get()
    clock.step(1.0)
    await q.get()
    await clock.wait_for_waiters(1)  # the updater sleeps on the queue's clock
    clock.step(UNFINISHED_WORK_UPDATE_PERIOD)
    await wait_until(lambda: provider["longest"].value > 0)
    assert provider["longest"].value == pytest.approx(1.5)
    assert provider["unfinished"].value == pytest.approx(2.0)
    q.shutdown()
    task = q._metrics_task
    assert task is not None
    await wait_until(task.done)


async def test_add_starts_no_task_and_aclose_awaits_the_updater() -> None:
    q = WorkQueue("q", clock=FakeClock(), metrics=RecordingProvider())
    q.add("a")
    assert q._metrics_task is None, "a plain add never starts a task"
    await q.get()
    task = q._metrics_task
    assert task is not None
    await q.aclose()
    assert task.done()


async def test_retries_count_delayed_adds() -> None:
    clock = FakeClock()
    provider = RecordingProvider()
    q = RateLimitingQueue(name="q", clock=clock, metrics=provider)
    q.add_after("a", 1.0)
    q.add_after("b", 0)
    q.add_rate_limited("c")
    assert provider["retries"].value == 3
    q.shutdown()
    q.add_after("d", 1.0)
    assert provider["retries"].value == 3


async def test_unnamed_queue_has_no_metrics() -> None:
    provider = RecordingProvider()
    q = DelayingQueue(metrics=provider)
    q.add("a")
    await q.get()
    q.done("a")
    assert provider.created == {}
    assert q._metrics is None


async def test_prometheus_export() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    provider = PrometheusMetricsProvider(registry)
    q = DelayingQueue("jobs", clock=clock, metrics=provider)
    labels = {"name": "jobs"}

    def sample(metric: str) -> float | None:
        return registry.get_sample_value(metric, labels)

    q.add("a")
    q.add("b")
    q.add("c")
    assert sample("workqueue_depth") == 3
    assert sample("workqueue_adds_total") == 3
    clock.step(2.0)
    await q.get()
    clock.step(1.0)
    await q.get()
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 2
    assert sample("workqueue_queue_duration_seconds_sum") == pytest.approx(5.0)
    clock.step(3.0)
    # computed at scrape time: "a" has run 4 s, "b" 3 s
    assert sample("workqueue_unfinished_work_seconds") == pytest.approx(7.0)
    assert sample("workqueue_longest_running_processor_seconds") == pytest.approx(4.0)
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_work_duration_seconds_sum") == pytest.approx(4.0)
    assert sample("workqueue_unfinished_work_seconds") == pytest.approx(3.0)
    q.add_after("d", 1.0)
    assert sample("workqueue_retries_total") == 1
    assert q._metrics is not None and not q._metrics.needs_periodic_update
    text = generate_latest(registry).decode()
    for name in METRIC_NAMES:
        assert f"# TYPE {name.removesuffix('_total')}" in text
        assert f'{name}{{name="jobs"}}' in text or f'{name}_count{{name="jobs"}}' in text
    q.shutdown()
