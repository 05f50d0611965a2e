"""Builder options against the embedded server: ObjectReconciler, reconcile_timeout, every, source,
priority_queue, event recorders flushed at shutdown, one start/stop log line per controller."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import pytest

import kinformer as ki
from kinformer.controller import metrics
from kinformer.controller.events import EVENTS_RESOURCE
from kinformer.controller.handlers import EnqueueHandler
from kinformer.workqueue import LOW_PRIORITY, PriorityQueue
from testlib import configmap, running, wait_until

NS = "default"
FINALIZER = "example.com/cleanup"


async def test_object_reconciler_gets_cached_objects_until_they_are_gone(kube_client) -> None:
    seen: list[tuple[str, bool]] = []

    class Cleanup(ki.ObjectReconciler):
        async def reconcile(self, obj) -> ki.Result:
            deleting = bool(obj["metadata"].get("deletionTimestamp"))
            seen.append((obj["metadata"]["name"], deleting))
            if deleting:
                await ki.remove_finalizer(self.client, "configmaps", obj, FINALIZER)
            else:
                await ki.ensure_finalizer(self.client, "configmaps", obj, FINALIZER)
            return ki.Result()

    reconciler = Cleanup()
    mgr = ki.Manager(kube_client)
    builder = mgr.controller(reconciler).for_("configmaps", field_selector="metadata.name=cm")
    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    async with running(mgr):
        assert reconciler.client is mgr.client and reconciler.manager is mgr
        await wait_until(lambda: ("cm", False) in seen, what="first reconcile")

        async def has_finalizer() -> bool:
            obj = await kube_client.get("configmaps", "cm", NS)
            return FINALIZER in (obj["metadata"].get("finalizers") or [])

        await wait_until(has_finalizer, what="finalizer added")
        await kube_client.delete("configmaps", "cm", namespace=NS)
        await wait_until(lambda: ("cm", True) in seen, what="deleting object reconciled")
        await wait_until(lambda: builder.controller.stats.skipped_deleted >= 1, what="deleted object skipped")
    assert seen.count(("cm", True)) >= 1 and all(name == "cm" for name, _ in seen)


async def test_reconcile_timeout_cancels_counts_and_retries(kube_client) -> None:
    calls = Counter()
    cancelled = asyncio.Event()

    async def reconcile(req: ki.Request) -> ki.Result:
        calls[req.name] += 1
        if req.name == "cm" and calls[req.name] == 1:
            try:
                await asyncio.Event().wait()  # hangs
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return ki.Result()

    mgr = ki.Manager(kube_client)
    builder = mgr.controller(reconcile, name="slow").for_("configmaps").reconcile_timeout(0.2)
    before = metrics.RECONCILE_TIMEOUTS.labels("slow")._value.get()
    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    async with running(mgr):
        await wait_until(lambda: calls["cm"] >= 2, what="retried after the timeout")
    stats = builder.controller.stats
    assert cancelled.is_set() and stats.timeouts == 1 and stats.successes >= 1
    assert metrics.RECONCILE_TIMEOUTS.labels("slow")._value.get() == before + 1


async def test_every_and_external_sources(kube_client) -> None:
    calls = Counter()
    external: asyncio.Queue[object] = asyncio.Queue()

    async def requests():
        while True:
            yield await external.get()

    async def reconcile(req: ki.Request) -> None:
        calls[req.name] += 1

    mgr = ki.Manager(kube_client)
    mgr.controller(reconcile, name="timer").for_("configmaps").every(0.1).source(requests())
    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    async with running(mgr):
        await wait_until(lambda: calls["cm"] >= 3, what="reconciled on a timer")
        external.put_nowait(ki.Request("elsewhere", "from-outside"))
        external.put_nowait(configmap("as-object", ns="x"))
        external.put_nowait(42)  # neither: logged and skipped
        await wait_until(lambda: calls["from-outside"] == 1 and calls["as-object"] == 1, what="source requests")
    # a key not in the primary cache is not put on the timer
    assert calls["from-outside"] == 1


async def test_priority_queue_builder_and_priorities(kube_client) -> None:
    mgr = ki.Manager(kube_client)
    builder = mgr.controller(lambda req: None, name="prio").for_("configmaps").priority_queue(max_wait=5.0)
    ctrl = await builder.build()
    assert isinstance(ctrl.queue, PriorityQueue) and ctrl.queue.max_wait == 5.0
    handler = EnqueueHandler(ctrl.queue)
    await handler.on_add(configmap("initial"), is_in_initial_list=True)
    await handler.on_update(configmap("resync"), configmap("resync"), is_resync=True)
    await handler.on_add(configmap("live"))
    order = []
    for _ in range(3):
        req = await ctrl.queue.get()
        ctrl.queue.done(req)
        order.append(req.name)
    assert order == ["live", "initial", "resync"]
    ctrl._apply_result(ki.Request(NS, "urgent"), ki.Result(requeue_after=0.01, priority=50))
    ctrl.queue.add(ki.Request(NS, "normal"))
    ctrl.queue.add(ki.Request(NS, "low"), LOW_PRIORITY)
    await wait_until(lambda: len(ctrl.queue) == 3, what="requeue ready")
    assert (await ctrl.queue.get()).name == "urgent"
    await ctrl.queue.aclose()
    await mgr.factory.shutdown()


async def test_start_stop_logged_once_and_events_flushed_at_shutdown(kube_client, caplog) -> None:
    caplog.set_level(logging.INFO, "kinformer.controller.controller")
    mgr = ki.Manager(kube_client)
    recorder = mgr.event_recorder("copier")

    async def reconcile(req: ki.Request) -> None:
        if req.name == "cm":  # (not the kube-root-ca.crt ConfigMap every namespace has)
            obj = await mgr.client.get("configmaps", req.name, req.namespace)
            recorder.event(obj, "Normal", "Seen", "reconciled")

    mgr.controller(reconcile, name="logged").for_("configmaps").workers(2)
    await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    async with running(mgr):
        await wait_until(lambda: recorder._cache, what="an event recorded")
    events = (await kube_client.list(EVENTS_RESOURCE, NS)).items
    assert [e["reason"] for e in events] == ["Seen"]
    started = [r.getMessage() for r in caplog.records if "started" in r.getMessage()]
    stopped = [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]
    assert started == ["controller logged: started (resource configmaps, 2 workers, no leader election)"]
    assert len(stopped) == 1 and stopped[0].startswith("controller logged: stopped")


def _secret(name: str, *owners: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "ownerReferences": list(owners)}}


async def test_owns_hands_over_only_objects_owned_by_the_owner_kind_and_watches_takes_accepts(kube_client) -> None:
    """for_(accepts=), owns() (an ownerReference of the owner's kind, the controller one) and watches(accepts=)
    keep everything else from the controller's handlers: it is not even counted as an event."""
    seen: Counter[str] = Counter()

    async def reconcile(req: ki.Request) -> None:
        seen[req.name] += 1

    cm = await kube_client.create("configmaps", configmap("cm"), namespace=NS)
    await kube_client.create("configmaps", configmap("unwanted"), namespace=NS)
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": cm["metadata"]["uid"]}
    for secret in (_secret("mine", {**ref, "controller": True}), _secret("loose", ref), _secret("plain"),
                   _secret("foreign", {**ref, "kind": "Foo", "apiVersion": "example.com/v1", "controller": True})):
        await kube_client.create("secrets", secret, namespace=NS)
    for name in ("wanted", "ignored"):
        await kube_client.create("serviceaccounts", {"metadata": {"name": name}}, namespace=NS)
    mgr = ki.Manager(kube_client)
    builder = mgr.controller(reconcile, name="filtered") \
        .for_("configmaps", accepts=lambda o: o["metadata"]["name"] == "cm").owns("secrets") \
        .watches("serviceaccounts", mapper=lambda o: [ki.Request(NS, "from-sa")],
                 accepts=lambda o: o["metadata"]["name"] == "wanted")
    async with running(mgr):
        await wait_until(lambda: seen["cm"] >= 1 and seen["from-sa"] >= 1, what="reconciled")
        ctrl = builder.controller
        await wait_until(lambda: ctrl.started, what="handlers synced")
        assert ctrl.stats.events["add"] == 3  # cm, mine, wanted
        assert set(seen) == {"cm", "from-sa"}


async def test_watches_events_hands_over_only_the_informer_events_named(kube_client) -> None:
    """watches(events=("delete",)) is client-go's DeleteFunc alone: adds and updates are neither judged by
    ``accepts`` nor counted, a deletion is mapped and enqueued."""
    seen: Counter[str] = Counter()
    judged: list[str] = []

    async def reconcile(req: ki.Request) -> None:
        seen[req.name] += 1

    def accepts(o: dict[str, object]) -> bool:
        judged.append(o["metadata"]["name"])  # type: ignore[index]
        return True

    await kube_client.create("configmaps", configmap("primary"), namespace=NS)
    await kube_client.create("serviceaccounts", {"metadata": {"name": "sa"}}, namespace=NS)
    mgr = ki.Manager(kube_client)
    builder = mgr.controller(reconcile, name="deletes").for_("configmaps") \
        .watches("serviceaccounts", mapper=lambda o: [ki.Request(NS, "from-sa")], accepts=accepts,
                 events=("delete",))
    async with running(mgr):
        ctrl = builder.controller
        await wait_until(lambda: ctrl.started and seen["primary"] >= 1, what="synced")
        await kube_client.patch("serviceaccounts", "sa", {"metadata": {"labels": {"a": "b"}}}, namespace=NS)
        await kube_client.delete("serviceaccounts", "sa", namespace=NS)
        await wait_until(lambda: seen["from-sa"] >= 1, what="the deletion enqueued")
        assert judged == ["sa"] and ctrl.stats.events["delete"] == 1 and ctrl.stats.events["update"] == 0
    with pytest.raises(ValueError, match="events must be among"):
        mgr.controller(reconcile, name="bad").watches("secrets", events=("create",))
