"""Built-in kinds served at two versions: HorizontalPodAutoscalers are stored as autoscaling/v2 and every
request and answer of autoscaling/v1 is converted, as kube-apiserver does; Events are stored once as core/v1
Events and served by both core/v1 and events.k8s.io/v1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import orjson

from testlib import call

V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                        "averageValue": "1Gi"}}}
METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"


def cpu(utilization: int) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                       "averageUtilization": utilization}}}


def hpa_v1(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 5, **spec}}


def hpa_v2(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
            "spec": {"scaleTargetRef": REF, "maxReplicas": 5, **spec}}


async def stored(server: Any, name: str) -> dict[str, Any]:
    kv = await server.storage.get(f"/registry/autoscaling/horizontalpodautoscalers/default/{name}")
    return orjson.loads(kv.value)


async def test_created_as_v1_is_stored_and_read_as_v2(server, http):
    code, created = await call(http, "POST", V1, hpa_v1("a", targetCPUUtilizationPercentage=50))
    assert code == 201, created
    assert created["apiVersion"] == "autoscaling/v1"
    assert created["spec"] == {"scaleTargetRef": REF, "maxReplicas": 5, "minReplicas": 1,
                               "targetCPUUtilizationPercentage": 50}
    raw = await stored(server, "a")
    assert raw["apiVersion"] == "autoscaling/v2" and raw["spec"]["metrics"] == [cpu(50)]
    assert "targetCPUUtilizationPercentage" not in raw["spec"]
    code, got = await call(http, "GET", f"{V2}/a")
    assert code == 200 and got["apiVersion"] == "autoscaling/v2"
    assert got["spec"] == {"scaleTargetRef": REF, "maxReplicas": 5, "minReplicas": 1, "metrics": [cpu(50)]}


async def test_v1_without_target_reads_as_80_percent_cpu_in_v2(http):
    assert (await call(http, "POST", V1, hpa_v1("a")))[0] == 201
    _, got = await call(http, "GET", f"{V2}/a")
    assert got["spec"]["metrics"] == [cpu(80)]
    _, v1 = await call(http, "GET", f"{V1}/a")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 80


async def test_created_as_v2_reads_as_v1_with_annotations_and_writes_back(http):
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60}}
    code, created = await call(http, "POST", V2, hpa_v2("b", metrics=[MEMORY, cpu(70)], behavior=behavior))
    assert code == 201, created
    code, v1 = await call(http, "GET", f"{V1}/b")
    assert code == 200 and v1["apiVersion"] == "autoscaling/v1"
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 70 and "metrics" not in v1["spec"]
    ann = v1["metadata"]["annotations"]
    assert json.loads(ann[METRICS_ANNOTATION]) == [
        {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "1Gi"}}]
    assert json.loads(ann["autoscaling.alpha.kubernetes.io/behavior"])["ScaleDown"]["StabilizationWindowSeconds"] == 60
    # A v1 client that puts back what it read loses nothing of the v2 object.
    v1["spec"]["maxReplicas"] = 8
    code, put = await call(http, "PUT", f"{V1}/b", v1)
    assert code == 200, put
    assert put["apiVersion"] == "autoscaling/v1" and put["metadata"]["annotations"] == ann
    _, got = await call(http, "GET", f"{V2}/b")
    assert got["spec"]["metrics"] == [MEMORY, cpu(70)] and got["spec"]["maxReplicas"] == 8
    assert got["spec"]["behavior"] == created["spec"]["behavior"]
    assert "annotations" not in got["metadata"]


async def test_list_through_both_versions(http):
    await call(http, "POST", V1, hpa_v1("a", targetCPUUtilizationPercentage=40))
    await call(http, "POST", V2, hpa_v2("b", metrics=[MEMORY]))
    _, l1 = await call(http, "GET", V1)
    _, l2 = await call(http, "GET", V2)
    assert l1["apiVersion"] == "autoscaling/v1" and l2["apiVersion"] == "autoscaling/v2"
    assert {i["apiVersion"] for i in l1["items"]} == {"autoscaling/v1"}
    assert {i["apiVersion"] for i in l2["items"]} == {"autoscaling/v2"}
    assert [i["spec"].get("targetCPUUtilizationPercentage") for i in l1["items"]] == [40, None]
    assert "metrics" not in l1["items"][1]["spec"] and METRICS_ANNOTATION in l1["items"][1]["metadata"]["annotations"]
    assert [i["spec"]["metrics"] for i in l2["items"]] == [[cpu(40)], [MEMORY]]


async def read_events(resp: aiohttp.ClientResponse, n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        while len(events) < n:
            line = await resp.content.readline()
            assert line, "the watch ended early"
            events.append(json.loads(line))
    return events


async def test_watch_through_both_versions(http):
    _, first = await call(http, "POST", V2, hpa_v2("a", metrics=[cpu(30)]))
    rv = first["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": rv}
    async with http.get(V1, params=params) as w1, http.get(V2, params=params) as w2:
        assert w1.status == 200 and w2.status == 200
        await call(http, "POST", V1, hpa_v1("b", targetCPUUtilizationPercentage=60))
        await call(http, "PATCH", f"{V2}/a", {"spec": {"metrics": [MEMORY]}}, ctype="application/merge-patch+json")
        e1, e2 = await read_events(w1, 2), await read_events(w2, 2)
    assert [(e["type"], e["object"]["apiVersion"]) for e in e1] == [("ADDED", "autoscaling/v1"),
                                                                     ("MODIFIED", "autoscaling/v1")]
    assert [(e["type"], e["object"]["apiVersion"]) for e in e2] == [("ADDED", "autoscaling/v2"),
                                                                     ("MODIFIED", "autoscaling/v2")]
    assert e1[0]["object"]["spec"]["targetCPUUtilizationPercentage"] == 60
    assert e2[0]["object"]["spec"]["metrics"] == [cpu(60)]
    assert "targetCPUUtilizationPercentage" not in e1[1]["object"]["spec"]
    assert METRICS_ANNOTATION in e1[1]["object"]["metadata"]["annotations"]
    assert e2[1]["object"]["spec"]["metrics"] == [MEMORY]


async def test_patches_through_v1_apply_to_the_v1_object(http):
    await call(http, "POST", V2, hpa_v2("a", metrics=[MEMORY, cpu(70)]))
    code, out = await call(http, "PATCH", f"{V1}/a", {"spec": {"targetCPUUtilizationPercentage": 45}},
                           ctype="application/strategic-merge-patch+json")
    assert code == 200, out
    assert out["apiVersion"] == "autoscaling/v1" and out["spec"]["targetCPUUtilizationPercentage"] == 45
    _, got = await call(http, "GET", f"{V2}/a")
    assert got["spec"]["metrics"] == [MEMORY, cpu(45)]  # the other metric rode through the annotation
    code, out = await call(http, "PATCH", f"{V1}/a", [{"op": "replace", "path": "/spec/maxReplicas", "value": 9}],
                           ctype="application/json-patch+json")
    assert code == 200 and out["spec"]["maxReplicas"] == 9
    code, out = await call(http, "PATCH", f"{V1}/a", {"metadata": {"annotations": {METRICS_ANNOTATION: None}}},
                           ctype="application/merge-patch+json")
    assert code == 200, out
    _, got = await call(http, "GET", f"{V2}/a")
    assert got["spec"]["metrics"] == [cpu(45)]


async def test_status_through_v1_and_tables_from_either_version(http):
    await call(http, "POST", V1, hpa_v1("a", targetCPUUtilizationPercentage=50))
    _, cur = await call(http, "GET", f"{V1}/a")
    cur["status"] = {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 65}
    code, out = await call(http, "PUT", f"{V1}/a/status", cur)
    assert code == 200, out
    assert out["status"]["currentCPUUtilizationPercentage"] == 65
    _, got = await call(http, "GET", f"{V2}/a")
    assert got["status"]["currentMetrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 65}}}]
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    for base in (V1, V2):
        async with http.get(f"{base}/a", headers=headers, params={"includeObject": "Object"}) as r:
            assert r.status == 200 and "as=Table" in r.headers["Content-Type"]
            table = await r.json()
        assert table["rows"][0]["cells"][2] == "cpu: 65%/50%"
        assert table["rows"][0]["object"]["apiVersion"] == f"autoscaling/{base.split('/')[3]}"


async def test_v2_writes_drop_the_v1_round_trip_annotations(server, http):
    obj = hpa_v2("a", metrics=[cpu(30)])
    obj["metadata"]["annotations"] = {METRICS_ANNOTATION: json.dumps([{"type": "Pods"}]), "team": "x"}
    code, created = await call(http, "POST", V2, obj)
    assert code == 201, created
    assert created["metadata"]["annotations"] == {"team": "x"}
    assert (await stored(server, "a"))["metadata"]["annotations"] == {"team": "x"}


async def test_an_object_stored_as_v1_before_conversion_reads_converted_through_v2(server, http):
    legacy = hpa_v1("old", targetCPUUtilizationPercentage=35, minReplicas=1)
    legacy["metadata"].update(namespace="default", uid="u-old", creationTimestamp="2026-01-01T00:00:00Z")
    key = "/registry/autoscaling/horizontalpodautoscalers/default/old"
    kv = await server.storage.create(key, orjson.dumps(legacy))
    rv = {"resourceVersion": str(kv.mod_revision)}  # served from the watch cache once it has the revision
    for params in (None, rv):  # from storage, then from the watch cache
        code, got = await call(http, "GET", f"{V2}/old", params=params)
        assert code == 200 and got["apiVersion"] == "autoscaling/v2" and got["spec"]["metrics"] == [cpu(35)]
        assert "targetCPUUtilizationPercentage" not in got["spec"]
        _, items = await call(http, "GET", V2, params=params)
        assert [i["spec"]["metrics"] for i in items["items"]] == [[cpu(35)]]
    _, v1 = await call(http, "GET", f"{V1}/old")
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 35


async def test_metadata_only_answers_carry_the_requested_versions_annotations(http):
    await call(http, "POST", V2, hpa_v2("a", metrics=[MEMORY]))
    for base, want in ((V1, True), (V2, False)):
        for path, kind in ((f"{base}/a", "PartialObjectMetadata"), (base, "PartialObjectMetadataList")):
            headers = {"Accept": f"application/json;as={kind};g=meta.k8s.io;v=v1"}
            async with http.get(path, headers=headers) as r:
                assert r.status == 200
                doc = await r.json()
            meta = doc["metadata"] if kind == "PartialObjectMetadata" else doc["items"][0]["metadata"]
            assert (METRICS_ANNOTATION in (meta.get("annotations") or {})) is want, (path, meta)


# -- Events: one storage, two views ------------------------------------------------------------------------

CORE_EVENTS = "/api/v1/namespaces/default/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"
REGARDING = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "cm", "uid": "u-1"}


def events_v1(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2024-05-01T10:00:00.000000Z", "reportingController": "example.com/copier",
            "reportingInstance": "copier-1", "action": "Copy", "reason": "Copied", "note": "copied it",
            "type": "Normal", "regarding": REGARDING, **fields}


def core_event(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u-2"},
            "reason": "BackOff", "message": "restarting", "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T10:00:00Z", "lastTimestamp": "2024-05-01T10:05:00Z", "count": 4,
            "type": "Warning", **fields}


async def test_an_event_written_through_either_api_is_one_object_read_through_both(server, http):
    code, created = await call(http, "POST", EVENTS_V1, events_v1("recorded"))
    assert code == 201, created
    code, core = await call(http, "GET", f"{CORE_EVENTS}/recorded")
    assert code == 200 and core["apiVersion"] == "v1"
    assert core["metadata"]["uid"] == created["metadata"]["uid"]
    assert core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert {k: core[k] for k in ("involvedObject", "reason", "message", "type", "eventTime", "action",
                                 "reportingComponent", "reportingInstance", "source", "firstTimestamp")} == {
        "involvedObject": REGARDING, "reason": "Copied", "message": "copied it", "type": "Normal",
        "eventTime": "2024-05-01T10:00:00.000000Z", "action": "Copy", "reportingComponent": "example.com/copier",
        "reportingInstance": "copier-1", "source": {}, "firstTimestamp": None}
    assert "count" not in core and "note" not in core and "regarding" not in core

    assert (await call(http, "POST", CORE_EVENTS, core_event("legacy")))[0] == 201
    code, seen = await call(http, "GET", f"{EVENTS_V1}/legacy")
    assert code == 200 and seen["apiVersion"] == "events.k8s.io/v1"
    assert {k: seen[k] for k in ("regarding", "note", "reason", "type", "deprecatedSource",
                                 "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount",
                                 "eventTime")} == {
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u-2"}, "note": "restarting",
        "reason": "BackOff", "type": "Warning", "deprecatedSource": {"component": "kubelet", "host": "node-1"},
        "deprecatedFirstTimestamp": "2024-05-01T10:00:00Z", "deprecatedLastTimestamp": "2024-05-01T10:05:00Z",
        "deprecatedCount": 4, "eventTime": None}
    assert "message" not in seen and "involvedObject" not in seen and "source" not in seen
    for path in (CORE_EVENTS, EVENTS_V1):  # both lists hold both, each in its own shape
        code, lst = await call(http, "GET", path)
        assert code == 200 and sorted(o["metadata"]["name"] for o in lst["items"]) == ["legacy", "recorded"]
        assert {o["apiVersion"] for o in lst["items"]} == {"v1" if path == CORE_EVENTS else "events.k8s.io/v1"}
    assert await server.storage.get("/registry/events.k8s.io/events/default/recorded") is None  # stored once


async def test_event_writes_through_one_api_change_what_the_other_shows(http):
    assert (await call(http, "POST", EVENTS_V1, events_v1("e")))[0] == 201
    series = {"count": 2, "lastObservedTime": "2024-05-01T10:01:00.000000Z"}
    code, patched = await call(http, "PATCH", f"{EVENTS_V1}/e", {"series": series, "note": "again"},
                               ctype="application/merge-patch+json")
    assert code == 200 and patched["series"] == series and patched["note"] == "again"
    _, core = await call(http, "GET", f"{CORE_EVENTS}/e")
    assert core["series"] == series and core["message"] == "again"
    core["message"] = "replaced"
    code, put = await call(http, "PUT", f"{CORE_EVENTS}/e", core)
    assert code == 200, put
    _, seen = await call(http, "GET", f"{EVENTS_V1}/e")
    assert seen["note"] == "replaced" and seen["metadata"]["resourceVersion"] == put["metadata"]["resourceVersion"]
    seen["note"] = "stale"
    seen["metadata"]["resourceVersion"] = core["metadata"]["resourceVersion"]
    assert (await call(http, "PUT", f"{EVENTS_V1}/e", seen))[0] == 409  # one object: one resourceVersion
    assert (await call(http, "DELETE", f"{EVENTS_V1}/e"))[0] == 200
    assert (await call(http, "GET", f"{CORE_EVENTS}/e"))[0] == 404


async def test_field_selectors_of_each_api_name_its_own_fields(http):
    assert (await call(http, "POST", EVENTS_V1, events_v1("mine")))[0] == 201
    assert (await call(http, "POST", CORE_EVENTS, core_event("kubelets")))[0] == 201

    async def names(path: str, selector: str) -> list[str]:
        code, lst = await call(http, "GET", path, params={"fieldSelector": selector})
        assert code == 200, lst
        return sorted(o["metadata"]["name"] for o in lst["items"])

    assert await names(CORE_EVENTS, "involvedObject.name=cm,involvedObject.kind=ConfigMap") == ["mine"]
    assert await names(CORE_EVENTS, "source=kubelet") == ["kubelets"]
    assert await names(CORE_EVENTS, "source=example.com/copier") == ["mine"]  # no source: the reporter
    assert await names(CORE_EVENTS, "reportingComponent=example.com/copier,type=Normal") == ["mine"]
    assert await names(EVENTS_V1, "regarding.name=p,regarding.uid=u-2") == ["kubelets"]
    assert await names(EVENTS_V1, "reportingController=example.com/copier") == ["mine"]
    assert await names(EVENTS_V1, "reason!=Copied,metadata.namespace=default") == ["kubelets"]
    for selector in ("involvedObject.name=p", "note=x", "source=kubelet"):  # core's labels are not events.k8s.io's
        code, err = await call(http, "GET", EVENTS_V1, params={"fieldSelector": selector})
        assert code == 400 and err["message"] == f"field label not supported: {selector.split('=')[0]}"


async def test_an_event_written_through_one_api_is_watched_through_the_other(http):
    _, first = await call(http, "POST", CORE_EVENTS, core_event("before"))
    params = {"watch": "1", "resourceVersion": first["metadata"]["resourceVersion"]}
    async with http.get(CORE_EVENTS, params=params) as core_w, \
            http.get(EVENTS_V1, params={**params, "fieldSelector": "regarding.name=cm"}) as v1_w:
        assert core_w.status == 200 and v1_w.status == 200
        assert (await call(http, "POST", EVENTS_V1, events_v1("recorded")))[0] == 201
        assert (await call(http, "DELETE", f"{CORE_EVENTS}/recorded"))[0] == 200
        core_events, v1_events = await read_events(core_w, 2), await read_events(v1_w, 2)
    assert [(e["type"], e["object"]["apiVersion"], e["object"].get("message")) for e in core_events] == [
        ("ADDED", "v1", "copied it"), ("DELETED", "v1", "copied it")]
    assert [(e["type"], e["object"]["apiVersion"], e["object"].get("note")) for e in v1_events] == [
        ("ADDED", "events.k8s.io/v1", "copied it"), ("DELETED", "events.k8s.io/v1", "copied it")]


async def test_a_create_through_events_k8s_io_is_held_to_its_rules_and_core_creates_are_not(http):
    """kube validates an Event with the request's version in hand: events.k8s.io/v1 wants an eventTime, a known
    type and no deprecated fields; the same event through core/v1 passes."""
    bad = events_v1("old-style", eventTime=None, type="Info", deprecatedCount=2)
    code, err = await call(http, "POST", EVENTS_V1, bad)
    assert code == 422 and err["reason"] == "Invalid", err
    assert {(c["field"], c["reason"]) for c in err["details"]["causes"]} == {
        ("eventTime", "FieldValueRequired"), ("type", "FieldValueInvalid"), ("count", "FieldValueInvalid")}
    assert err["message"].startswith('Event "old-style" is invalid: ')
    legacy = core_event("old-style", type="Info")
    assert (await call(http, "POST", CORE_EVENTS, legacy))[0] == 201
    code, seen = await call(http, "GET", f"{EVENTS_V1}/old-style")  # and it is read through events.k8s.io
    assert code == 200 and seen["type"] == "Info" and seen["deprecatedCount"] == 4


async def test_a_converted_create_and_replace_answer_and_store_what_a_read_shows(server, http):
    """The object a conversion makes is handed to the create and replace handlers as is (no re-decoding): the
    answers equal what reads through the same version show, and storage holds the core form alone."""
    code, created = await call(http, "POST", EVENTS_V1, events_v1("handed"))
    assert code == 201, created
    code, read = await call(http, "GET", f"{EVENTS_V1}/handed")
    assert code == 200 and read == created and created["note"] == "copied it"
    assert list(read) == list(created) and list(read["metadata"]) == list(created["metadata"])  # in one order
    # the answer is converted from the object the create handed to the watch cache, which stays the core form
    cached = server.cache.buckets["/registry/core/events/"].objects["/registry/core/events/default/handed"]
    assert cached.obj["apiVersion"] == "v1" and "note" not in cached.obj and orjson.loads(cached.raw) == cached.obj
    kv = await server.storage.get("/registry/core/events/default/handed")
    stored_event = orjson.loads(kv.value)
    assert stored_event["apiVersion"] == "v1" and stored_event["message"] == "copied it" and "note" not in stored_event
    code, replaced = await call(http, "PUT", f"{EVENTS_V1}/handed", {**created, "note": "replaced"})
    assert code == 200, replaced
    code, read = await call(http, "GET", f"{EVENTS_V1}/handed")
    assert code == 200 and read == replaced and replaced["note"] == "replaced"
    code, hpa = await call(http, "POST", V1, hpa_v1("handed", targetCPUUtilizationPercentage=60))
    assert code == 201 and hpa["spec"]["targetCPUUtilizationPercentage"] == 60
    assert (await call(http, "GET", f"{V1}/handed"))[1] == hpa
