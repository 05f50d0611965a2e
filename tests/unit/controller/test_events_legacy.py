"""LegacyEventRecorder against the embedded API server: core/v1 Events as client-go's tools/record writes them
(its events_cache_test.go and event_test.go: count bumps, the combine-after-10 rule, the spam filter)."""

from __future__ import annotations

import asyncio

from kinformer.clock import FakeClock
from kinformer.controller.eventcorrelator import COMBINED_PREFIX
from kinformer.controller.legacyevents import CORE_EVENTS_RESOURCE, LegacyEventRecorder
from testlib import configmap

NS = "default"


async def _events(client, namespace: str = NS) -> list[dict]:
    items = [e.to_dict() for e in (await client.list(CORE_EVENTS_RESOURCE, namespace)).items]
    return sorted(items, key=lambda e: e["metadata"]["name"])


async def test_event_is_a_core_v1_event_with_source_and_count(kube_client) -> None:
    clock = FakeClock()
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "deployment-controller", clock=clock) as recorder:
        assert recorder.event(cm, "Normal", "ScalingReplicaSet", "Scaled up replica set src-1 from 0 to 3") is None
        assert await recorder.flush(timeout=10)
    [event] = await _events(kube_client)
    assert event["metadata"]["name"] == f"src.{int(clock.wall() * 1e9):x}"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "src",
                                       "uid": cm["metadata"]["uid"],
                                       "resourceVersion": cm["metadata"]["resourceVersion"]}
    assert event["source"] == {"component": "deployment-controller"}
    assert (event["reportingComponent"], event.get("reportingInstance", "")) == ("deployment-controller", "")
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Normal", "ScalingReplicaSet", "Scaled up replica set src-1 from 0 to 3", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2023-11-14T22:13:20Z"


async def test_identical_events_bump_count_and_last_timestamp(kube_client) -> None:
    clock = FakeClock()
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "replicaset-controller", clock=clock) as recorder:
        recorder.event(cm, "Normal", "SuccessfulCreate", "Created pod: a")
        await recorder.flush(timeout=10)
        clock.step(5)
        recorder.event(cm, "Normal", "SuccessfulCreate", "Created pod: a")
        recorder.event(cm, "Normal", "SuccessfulCreate", "Created pod: b")  # another message: another Event
        await recorder.flush(timeout=10)
        for _ in range(3):  # repeats while a write is pending coalesce into one patch with the last count
            recorder.event(cm, "Normal", "SuccessfulCreate", "Created pod: a")
        await recorder.flush(timeout=10)
    a, b = await _events(kube_client)
    assert (a["message"], a["count"], b["message"], b["count"]) == ("Created pod: a", 5, "Created pod: b", 1)
    assert (a["firstTimestamp"], a["lastTimestamp"]) == ("2023-11-14T22:13:20Z", "2023-11-14T22:13:25Z")
    assert recorder.stats.written == 4 and recorder.dropped == 0


async def test_deleted_event_is_created_again_with_its_count(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "endpoint-controller") as recorder:
        recorder.event(cm, "Warning", "FailedToUpdateEndpoint", "boom")
        await recorder.flush(timeout=10)
        [first] = await _events(kube_client)
        await kube_client.delete(CORE_EVENTS_RESOURCE, first["metadata"]["name"], namespace=NS)  # its TTL ran out
        recorder.event(cm, "Warning", "FailedToUpdateEndpoint", "boom")
        await recorder.flush(timeout=10)
    [again] = await _events(kube_client)
    assert again["metadata"]["name"] == first["metadata"]["name"] and again["count"] == 2


def _distinct(recorder: LegacyEventRecorder, obj: dict, reason: str, verb: str, pods: range) -> None:
    """One event of ``reason`` per pod, each with its own message (as the replica set controller's)."""
    for i in pods:
        recorder.event(obj, "Normal", reason, f"{verb} pod: p{i}")


async def test_similar_events_are_combined_from_the_tenth_distinct_message(kube_client) -> None:
    clock = FakeClock()
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "replicaset-controller", clock=clock) as recorder:
        _distinct(recorder, cm, "SuccessfulCreate", "Created", range(9))
        await recorder.flush(timeout=10)
        assert len(await _events(kube_client)) == 9
        _distinct(recorder, cm, "SuccessfulCreate", "Created", range(9, 10))
        await recorder.flush(timeout=10)
        clock.step(1)
        _distinct(recorder, cm, "SuccessfulCreate", "Created", range(10, 11))
        recorder.event(cm, "Warning", "SuccessfulCreate", "another type is another group")
        await recorder.flush(timeout=10)
    events = await _events(kube_client)
    combined = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert len(events) == 11 and len(combined) == 1
    [c] = combined
    assert (c["message"], c["count"], c["reason"]) == (COMBINED_PREFIX + "Created pod: p10", 2, "SuccessfulCreate")
    assert c["source"] == {"component": "replicaset-controller"} and not c.get("reportingComponent")
    assert c["lastTimestamp"] > c["firstTimestamp"]
    assert sorted(e["message"] for e in events if e not in combined) == sorted(
        [f"Created pod: p{i}" for i in range(9)] + ["another type is another group"])


async def test_aggregation_restarts_after_ten_quiet_minutes(kube_client) -> None:
    clock = FakeClock()
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "replicaset-controller", clock=clock) as recorder:
        _distinct(recorder, cm, "SuccessfulDelete", "Deleted", range(9))
        clock.step(601)
        _distinct(recorder, cm, "SuccessfulDelete", "Deleted", range(9, 10))
        await recorder.flush(timeout=10)
    events = await _events(kube_client)
    assert len(events) == 10 and not any(e["message"].startswith(COMBINED_PREFIX) for e in events)


async def test_spam_filter_allows_a_burst_then_one_per_refill(kube_client) -> None:
    clock = FakeClock()
    a = await kube_client.create("configmaps", configmap("a"), namespace=NS)
    b = await kube_client.create("configmaps", configmap("b"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "podgc", clock=clock, burst=3, refill_interval=300) as recorder:
        for _ in range(5):  # repeats take tokens too; the skipped ones are still counted
            recorder.event(a, "Normal", "Repeat", "same")
        recorder.event(b, "Normal", "Repeat", "other object has its own bucket")
        await recorder.flush(timeout=10)
        assert [(e["involvedObject"]["name"], e["count"]) for e in await _events(kube_client)] == [("a", 3), ("b", 1)]
        clock.step(300)
        recorder.event(a, "Normal", "Repeat", "same")
        recorder.event(a, "Normal", "Repeat", "same")
        await recorder.flush(timeout=10)
    counts = {e["involvedObject"]["name"]: e["count"] for e in await _events(kube_client)}
    assert counts == {"a": 6, "b": 1}
    assert recorder.stats.reasons == {"rate limited": 3}


async def test_eventf_and_annotated_eventf_format_the_message(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with LegacyEventRecorder(kube_client, "statefulset-controller", host="node-1") as recorder:
        recorder.eventf(cm, "Normal", "SuccessfulCreate", "create Pod %s in StatefulSet %s successful", "w-0", "w")
        recorder.annotated_eventf(cm, {"team": "a"}, "Warning", "Odd", "100%% odd")
        await asyncio.to_thread(recorder.event, cm, "Normal", "FromThread", "from a worker thread")
        recorder.event(cm, "Bogus", "Odd", "bad type")
        recorder.eventf({"metadata": {}}, "Normal", "Odd", "no name %d", 1)
        await recorder.flush(timeout=10)
    by_reason = {e["reason"]: e for e in await _events(kube_client)}
    assert by_reason["SuccessfulCreate"]["message"] == "create Pod w-0 in StatefulSet w successful"
    assert by_reason["Odd"]["message"] == "100% odd"  # formatted without arguments too, as Sprintf
    assert by_reason["Odd"]["metadata"]["annotations"] == {"team": "a"}
    assert by_reason["FromThread"]["source"] == {"component": "statefulset-controller", "host": "node-1"}
    assert by_reason["FromThread"]["reportingInstance"] == "node-1"
    assert recorder.stats.reasons == {"invalid": 2}
