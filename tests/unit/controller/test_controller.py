"""Controller semantics: result -> queue action, error backoff, terminal errors, one worker per key."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.clock import FakeClock
from kinformer.controller import (
    Controller,
    GenerationChanged,
    LabelSelectorPredicate,
    Request,
    Result,
    TerminalError,
    maps_any,
    owned_by,
    owner_mapper,
)
from kinformer.controller.handlers import EnqueueHandler
from testlib import cancelled_future, wait_until


class Registration:
    def has_synced(self) -> bool:
        return True

    async def wait_for_sync(self) -> bool:
        return True


class Source:
    """The part of an informer a controller uses: add_event_handler."""

    def __init__(self) -> None:
        self.handlers: list[dict] = []

    def add_event_handler(self, **callbacks) -> Registration:
        self.handlers.append(callbacks)
        return Registration()

    async def add(self, obj) -> None:
        for h in self.handlers:
            await h["on_add"](obj)

    async def update(self, old, new, **kw) -> None:
        for h in self.handlers:
            await h["on_update"](old, new, **kw)


def obj(name: str, ns: str = "default", generation: int = 1, labels=None, owners=()):
    return {"metadata": {"name": name, "namespace": ns, "generation": generation, "labels": labels or {},
                         "ownerReferences": list(owners)}}


async def start(ctrl: Controller) -> asyncio.Task:
    task = asyncio.create_task(ctrl.run())
    await wait_until(lambda: ctrl.started)
    return task


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_error_requeues_with_backoff_then_success_forgets() -> None:
    clock = FakeClock()
    calls: list[float] = []

    async def reconcile(req: Request) -> Result:
        calls.append(clock.now())
        if len(calls) < 3:
            raise RuntimeError("boom")
        return Result()

    ctrl = Controller("t-backoff", reconcile, clock=clock)
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    await src.add(obj("a"))
    await wait_until(lambda: len(calls) == 1)
    await wait_until(lambda: ctrl.stats.errors == 1)
    assert ctrl.queue.num_requeues(Request("default", "a")) == 1
    clock.step(0.004)
    await asyncio.sleep(0.01)
    assert len(calls) == 1  # 5 ms backoff not yet elapsed
    clock.step(0.001)
    await wait_until(lambda: len(calls) == 2)
    await wait_until(lambda: ctrl.stats.errors == 2)
    clock.step(0.010)  # second failure: 10 ms
    await wait_until(lambda: len(calls) == 3)
    await wait_until(lambda: ctrl.stats.successes == 1)
    assert ctrl.queue.num_requeues(Request("default", "a")) == 0
    await stop(task)


async def test_requeue_after_forgets_and_delays() -> None:
    clock = FakeClock()
    calls: list[float] = []

    async def reconcile(req: Request) -> Result:
        calls.append(clock.now())
        return Result(requeue_after=30.0) if len(calls) == 1 else Result()

    ctrl = Controller("t-after", reconcile, clock=clock)
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    await src.add(obj("a"))
    await wait_until(lambda: ctrl.stats.requeues_after == 1)
    clock.step(29.9)
    await asyncio.sleep(0.01)
    assert len(calls) == 1
    clock.step(0.1)
    await wait_until(lambda: len(calls) == 2)
    assert calls[1] - calls[0] == pytest.approx(30.0)
    await stop(task)


async def test_terminal_error_is_not_requeued() -> None:
    clock = FakeClock()
    calls = 0

    async def reconcile(req: Request) -> Result:
        nonlocal calls
        calls += 1
        raise TerminalError("bad spec")

    ctrl = Controller("t-terminal", reconcile, clock=clock)
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    await src.add(obj("a"))
    await wait_until(lambda: ctrl.stats.terminal_errors == 1)
    clock.step(2000)
    await asyncio.sleep(0.01)
    assert calls == 1 and len(ctrl.queue) == 0
    await stop(task)


async def test_plain_function_reconciler_and_requeue_flag() -> None:
    clock = FakeClock()
    seen: list[Request] = []

    def reconcile(req: Request):
        seen.append(req)
        return Result(requeue=len(seen) == 1)

    ctrl = Controller("t-plain", reconcile, clock=clock)
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    await src.add(obj("a", ns=""))
    await wait_until(lambda: ctrl.stats.requeues == 1)
    clock.step(0.005)
    await wait_until(lambda: len(seen) == 2)
    assert seen[0] == Request("", "a") and seen[0].key == "a"
    await stop(task)


async def test_never_two_reconciles_of_one_key_at_once() -> None:
    active: set[Request] = set()
    overlaps = 0
    count = 0

    async def reconcile(req: Request) -> Result:
        nonlocal overlaps, count
        if req in active:
            overlaps += 1
        active.add(req)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        active.discard(req)
        count += 1
        return Result()

    ctrl = Controller("t-overlap", reconcile, workers=4)
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    for i in range(300):
        await src.add(obj(f"k{i % 5}"))
        if i % 7 == 0:
            await asyncio.sleep(0)
    await wait_until(lambda: len(ctrl.queue) == 0 and ctrl.stats.active == 0)
    assert overlaps == 0 and count >= 5
    await stop(task)


async def test_resync_enqueues_even_with_change_predicates() -> None:
    queue: list[Request] = []

    class Q:
        def add(self, item):
            queue.append(item)

    h = EnqueueHandler(Q(), predicates=[GenerationChanged()])
    o = obj("a")
    await h.on_update(o, obj("a"))  # same generation: filtered
    assert queue == []
    await h.on_update(o, o)  # a resync (old is new)
    assert queue == [Request("default", "a")]
    await h.on_update(o, obj("a", generation=2))
    assert len(queue) == 2


async def test_label_selector_and_combinators() -> None:
    sel = LabelSelectorPredicate("app=web")
    assert sel.create(obj("a", labels={"app": "web"}))
    assert not sel.create(obj("a", labels={"app": "db"}))
    both = sel & GenerationChanged()
    assert not both.update(obj("a", labels={"app": "web"}), obj("a", labels={"app": "web"}))
    assert (~sel).create(obj("a"))
    assert (sel | GenerationChanged()).update(obj("a"), obj("a", generation=3))


def test_owner_mapper_controller_only() -> None:
    owners = [
        {"apiVersion": "example.com/v1", "kind": "Foo", "name": "f1", "controller": True, "uid": "1"},
        {"apiVersion": "example.com/v1", "kind": "Foo", "name": "f2", "uid": "2"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "controller": False, "uid": "3"},
    ]
    m = owner_mapper("example.com", "Foo")
    assert m(obj("dep", owners=owners)) == [Request("default", "f1")]
    m_all = owner_mapper("example.com", "Foo", controller_only=False)
    assert m_all(obj("dep", owners=owners)) == [Request("default", "f1"), Request("default", "f2")]


def test_owned_by_and_maps_any_accept_exactly_what_their_mapper_maps() -> None:
    foo = {"apiVersion": "example.com/v1", "kind": "Foo", "name": "f1", "uid": "1"}
    cases = [obj("none"), obj("ctl", owners=[{**foo, "controller": True}]), obj("loose", owners=[foo]),
             obj("other", owners=[{**foo, "apiVersion": "other.io/v1", "controller": True}])]
    for controller_only in (True, False):
        mapper = owner_mapper("example.com", "Foo", controller_only=controller_only)
        accepts = owned_by("example.com", "Foo", controller_only=controller_only)
        assert [accepts(o) for o in cases] == [bool(mapper(o)) for o in cases]
        assert [maps_any(mapper)(o) for o in cases] == [bool(mapper(o)) for o in cases]
    assert [owned_by("example.com", "Foo")(o) for o in cases] == [False, True, False, False]
    as_generator = owner_mapper("example.com", "Foo", controller_only=False)
    lazily = maps_any(lambda o: (r for r in as_generator(o)))  # a mapper answering an iterator, not a list
    assert [lazily(o) for o in cases] == [False, True, True, False]


async def test_controller_shutdown_lets_the_in_flight_reconcile_finish() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    outcome: list[str] = []

    async def reconcile(req: Request) -> Result:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        outcome.append("finished")
        return Result()

    ctrl = Controller("review-graceful-shutdown", reconcile, shutdown_timeout=5.0)
    task = asyncio.create_task(ctrl.run())
    await wait_until(lambda: ctrl.started)
    ctrl.queue.add(Request("default", "a"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()  # what Manager.stop() / SIGTERM does to every controller
    for _ in range(5):
        await asyncio.sleep(0)  # let the cancellation reach Controller.run before the reconcile can end
    release.set()
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
    assert outcome == ["finished"]


async def test_reconciler_raising_cancelled_error_is_an_ordinary_error() -> None:
    calls: list[str] = []

    async def reconcile(req: Request) -> Result:
        calls.append(req.name)
        if req.name == "a":
            await cancelled_future()
        return Result()

    ctrl = Controller("review-cancelled-error", reconcile, clock=FakeClock())
    task = asyncio.create_task(ctrl.run())
    try:
        await wait_until(lambda: ctrl.started)
        ctrl.queue.add(Request("default", "a"))
        await wait_until(lambda: calls == ["a"])
        ctrl.queue.add(Request("default", "b"))
        await wait_until(lambda: "b" in calls, timeout=2)
        assert not task.done()
        assert ctrl.stats.errors == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_reconcile_that_raises_counts_as_a_panic_and_a_terminal_error_does_not() -> None:
    from prometheus_client import REGISTRY

    def sample(metric: str, name: str) -> float | None:
        return REGISTRY.get_sample_value(metric, {"controller": name})

    async def reconcile(req: Request) -> Result:
        if req.name == "terminal":
            raise TerminalError("cannot")
        if req.name == "bug":
            raise KeyError("spec")
        return Result()

    ctrl = Controller("t-panics", reconcile, clock=FakeClock())
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    try:
        assert sample("controller_runtime_reconcile_panics_total", "t-panics") == 0.0  # present from the start
        await src.add(obj("fine"))
        await src.add(obj("terminal"))
        await src.add(obj("bug"))
        await wait_until(lambda: ctrl.stats.reconciles == 3 and ctrl.stats.active == 0)
    finally:
        await stop(task)
    assert ctrl.stats.panics == 1
    assert sample("controller_runtime_reconcile_panics_total", "t-panics") == 1.0
    assert sample("controller_runtime_reconcile_errors_total", "t-panics") == 2.0
    assert sample("controller_runtime_terminal_reconcile_errors_total", "t-panics") == 1.0
    # the series every reconcile updates (each looked up once per controller): results, workers, time
    results = {result: REGISTRY.get_sample_value("controller_runtime_reconcile_total",
                                                 {"controller": "t-panics", "result": result})
               for result in ("success", "error", "requeue", "requeue_after")}
    assert results == {"success": 1.0, "error": 2.0, "requeue": 0.0, "requeue_after": 0.0}
    assert sample("controller_runtime_active_workers", "t-panics") == 0.0
    assert sample("controller_runtime_reconcile_time_seconds_count", "t-panics") == 3.0


def test_a_reconcile_id_is_a_random_version_4_uuid_in_canonical_form() -> None:
    import uuid

    from kinformer.controller.controller import new_reconcile_id

    ids = [new_reconcile_id() for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert {text[14] for text in ids} == {"4"} and {text[19] for text in ids} == set("89ab")


async def test_enqueue_for_object_adds_the_new_objects_request_and_a_mapper_sees_both() -> None:
    """EnqueueRequestForObject enqueues an update's new object (controller-runtime's Update); a mapper is handed
    the old and the new object and their Requests are added once each."""
    queue: list[Request] = []

    class Q:
        def add(self, item):
            queue.append(item)

    h = EnqueueHandler(Q())
    await h.on_update(obj("a"), obj("a", generation=2))
    await h.on_add(obj("b"))
    await h.on_delete(obj("c"))
    assert queue == [Request("default", "a"), Request("default", "b"), Request("default", "c")]
    queue.clear()
    seen: list[str] = []

    def by_label(o):
        seen.append(o["metadata"]["name"])
        return [Request("default", o["metadata"]["labels"]["owner"]), Request("default", "x")]

    h = EnqueueHandler(Q(), mapper=by_label)
    await h.on_update(obj("a", labels={"owner": "o1"}), obj("a", labels={"owner": "o2"}))
    assert seen == ["a", "a"] and queue == [Request("default", "o1"), Request("default", "x"), Request("default", "o2")]
