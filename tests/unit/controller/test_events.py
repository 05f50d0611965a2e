"""EventRecorder against the embedded API server: events.k8s.io/v1 Events, series aggregation, limits, failures."""

from __future__ import annotations

import asyncio
import logging

import kinformer as ki
from kinformer.clock import FakeClock
from kinformer.controller.events import EVENTS_RESOURCE, EventRecorder
from testlib import configmap

NS = "default"


async def _events(client, namespace: str = NS) -> list[dict]:
    return [e.to_dict() for e in (await client.list(EVENTS_RESOURCE, namespace)).items]


async def test_event_is_written_with_reference_and_reporter(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with EventRecorder(kube_client, "copier", instance="copier-1") as recorder:
        assert recorder.event(cm, "Normal", "Copied", "copied to secret src") is None  # returns at once
        assert await recorder.flush(timeout=10)
    [event] = await _events(kube_client)
    assert event["metadata"]["name"].startswith("src.")
    assert event["metadata"]["namespace"] == NS
    assert event["regarding"] == {"apiVersion": "v1", "kind": "ConfigMap", "namespace": NS, "name": "src",
                                  "uid": cm["metadata"]["uid"], "resourceVersion": cm["metadata"]["resourceVersion"]}
    assert (event["reportingController"], event["reportingInstance"]) == ("copier", "copier-1")
    assert (event["type"], event["reason"], event["action"], event["note"]) == (
        "Normal", "Copied", "Copied", "copied to secret src")
    assert event["eventTime"].endswith("Z") and "series" not in event


async def test_repeats_aggregate_into_one_series(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with EventRecorder(kube_client, "copier") as recorder:
        for i in range(5):
            recorder.event(cm, "Warning", "Failed", f"attempt {i}")
            await asyncio.sleep(0)  # let some writes interleave with the repeats
        recorder.event(cm, "Normal", "Copied", "done")
        await recorder.flush(timeout=10)
        by_reason = {e["reason"]: e for e in await _events(kube_client)}
        assert set(by_reason) == {"Failed", "Copied"}
        assert by_reason["Failed"]["series"]["count"] == 5
        assert by_reason["Failed"]["series"]["lastObservedTime"] >= by_reason["Failed"]["eventTime"]
        assert "series" not in by_reason["Copied"]
        # the Event was deleted on the server (TTL): the next repeat re-creates it, series included
        await kube_client.delete(EVENTS_RESOURCE, by_reason["Failed"]["metadata"]["name"], namespace=NS)
        recorder.event(cm, "Warning", "Failed", "again")
        await recorder.flush(timeout=10)
    [failed] = [e for e in await _events(kube_client) if e["reason"] == "Failed"]
    assert failed["series"]["count"] == 6 and failed["note"] == "again"


async def test_series_expires_after_quiet_period(kube_client) -> None:
    clock = FakeClock()
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with EventRecorder(kube_client, "copier", clock=clock, series_expiry=60) as recorder:
        recorder.event(cm, "Normal", "Synced", "one")
        await recorder.flush(timeout=10)
        clock.step(61)
        recorder.event(cm, "Normal", "Synced", "two")
        await recorder.flush(timeout=10)
    events = await _events(kube_client)
    assert sorted(e["note"] for e in events) == ["one", "two"] and all("series" not in e for e in events)


async def test_per_object_rate_limit_drops_distinct_events(kube_client, caplog) -> None:
    a = await kube_client.create("configmaps", configmap("a"), namespace=NS)
    b = await kube_client.create("configmaps", configmap("b"), namespace=NS)
    caplog.set_level(logging.DEBUG, logger="kinformer.controller.events")
    async with EventRecorder(kube_client, "copier", burst=3) as recorder:
        for i in range(5):
            recorder.event(a, "Normal", f"Step{i}", "x")
        for _ in range(10):
            recorder.event(a, "Normal", "Step0", "repeat")  # aggregation costs no token
        recorder.event(b, "Normal", "Step0", "other object has its own bucket")
        await recorder.flush(timeout=10)
    events = await _events(kube_client)
    assert sorted(e["reason"] for e in events if e["regarding"]["name"] == "a") == ["Step0", "Step1", "Step2"]
    assert [e["reason"] for e in events if e["regarding"]["name"] == "b"] == ["Step0"]
    assert recorder.dropped == 2 and recorder.stats.reasons == {"rate limited": 2}
    # dropped quietly, as client-go's spam filter does: logged at debug level only
    assert [r.levelno for r in caplog.records if "rate limited" in r.getMessage()] == [logging.DEBUG] * 2


async def test_failures_are_logged_never_raised(caplog) -> None:
    caplog.set_level(logging.INFO, "kinformer.controller.events")
    async with ki.Client("http://127.0.0.1:9", timeout=2, max_retries=0) as client:
        recorder = EventRecorder(client, "copier", max_tries=2, retry_interval=0.01)
        cm = configmap("x")
        recorder.event(cm, "Normal", "Copied", "server is down")
        recorder.event(cm, "Bogus", "Copied", "bad type")
        recorder.event({"metadata": {}}, "Normal", "Copied", "no name")
        recorder.event(None, "Normal", "Copied", "not an object")  # type: ignore[arg-type]
        assert await recorder.flush(timeout=10)
        await recorder.close()
        recorder.event(cm, "Normal", "Copied", "after close")
    assert recorder.stats.reasons == {"retries exhausted": 1, "invalid": 3, "closed": 1}
    assert "retry 1/1" in caplog.text


async def test_rejected_event_is_dropped(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with EventRecorder(kube_client, "copier") as recorder:
        recorder.event(cm, "Normal", "Copied", "fine")
        await recorder.flush(timeout=10)
        name = (await _events(kube_client))[0]["metadata"]["name"]
        # a second recorder whose clock gives the same name: the server answers AlreadyExists (a 4xx)
        other = EventRecorder(kube_client, "copier")
        other.names.last_ns = int(name.rsplit(".", 1)[1], 16) - 1
        other.clock = FakeClock(wall_start=0.0)
        other.event(cm, "Normal", "Copied", "dup")
        await other.close()
    assert other.stats.reasons == {"rejected": 1} and len(await _events(kube_client)) == 1


async def test_event_from_a_thread_and_long_note(kube_client) -> None:
    cm = await kube_client.create("configmaps", configmap("src"), namespace=NS)
    async with EventRecorder(kube_client, "copier") as recorder:
        await asyncio.to_thread(recorder.event, cm, "Normal", "FromThread", "é" * 1000)
        await recorder.flush(timeout=10)
    [event] = await _events(kube_client)
    assert event["reason"] == "FromThread" and len(event["note"].encode()) <= 1024
    assert event["note"] == "é" * 512


async def test_cluster_scoped_object_events_go_to_default(kube_client) -> None:
    ns = await kube_client.get("namespaces", "default")
    async with EventRecorder(kube_client, "copier") as recorder:
        recorder.event(ns, "Normal", "Seen", "namespace")
        await recorder.flush(timeout=10)
    [event] = await _events(kube_client)
    assert event["metadata"]["namespace"] == "default" and event["regarding"]["kind"] == "Namespace"
