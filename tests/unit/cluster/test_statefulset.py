"""The StatefulSet controller against the embedded server, named after kube's e2e tests
(test/e2e/apps/statefulset.go); the tests play the kubelet (pods Running and Ready)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from _hsets_helpers import NS, kubelet, live_pod_names, pods, set_phase, set_running

from cluster_helpers import events, wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.errors import NotFound
from kinformer.server import APIServer

SELECTOR = "app=db"


def statefulset(replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
            "spec": {"replicas": replicas, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}},
                                  "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}},
                     **spec}}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with APIServer(controllers=["statefulset"]) as server, Client(server.url) as api:
        yield api


async def ready_all(client: Client) -> None:
    """Make every pod of the set that is not Running yet Running and Ready."""
    for pod in await pods(client, SELECTOR):
        if (pod.get("status") or {}).get("phase") != "Running" and not pod["metadata"].get("deletionTimestamp"):
            await set_running(client, pod)


async def get_set(client: Client) -> Any:
    return await client.get("statefulsets", "db", namespace=NS)


async def test_should_provide_basic_identity(client: Client) -> None:
    await client.create("statefulsets", statefulset(replicas=1, volumeClaimTemplates=[
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}]))
    pod = (await wait_for(lambda: pods(client, SELECTOR), what="db-0"))[0]
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "db-0"
    assert spec["hostname"] == "db-0" and spec["subdomain"] == "db"
    sts = await get_set(client)
    assert meta["labels"]["statefulset.kubernetes.io/pod-name"] == "db-0"
    assert meta["labels"]["apps.kubernetes.io/pod-index"] == "0"
    assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                        "uid": sts["metadata"]["uid"], "controller": True,
                                        "blockOwnerDeletion": True}]
    claim = await client.get("persistentvolumeclaims", "data-db-0", namespace=NS)
    assert claim["metadata"]["labels"] == {"app": "db"}
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}} in spec["volumes"]
    revision = meta["labels"]["controller-revision-hash"]
    assert revision.startswith("db-")
    await client.get("controllerrevisions", revision, namespace=NS)

    async def notes() -> set[str]:
        return {e["message"] for e in await events(client, "db", "SuccessfulCreate")}

    assert await wait_for(lambda: _if_size(notes, 2), what="SuccessfulCreate events") == {
        "create Claim data-db-0 Pod db-0 in StatefulSet db success", "create Pod db-0 in StatefulSet db successful"}
    # deleted, the pod comes back with the same identity and the same claim
    await client.delete("pods", "db-0", namespace=NS)

    async def back() -> Any:
        current = await pods(client, SELECTOR)
        return current and current[0]["metadata"]["uid"] != meta["uid"] and current[0]

    again = await wait_for(back, what="db-0 made again")
    assert again["metadata"]["name"] == "db-0" and again["spec"]["hostname"] == "db-0"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}} in again["spec"]["volumes"]
    assert (await client.get("persistentvolumeclaims", "data-db-0", namespace=NS))["metadata"]["uid"] == \
        claim["metadata"]["uid"]


async def test_ordinals_start_names_the_pods_from_it(client: Client) -> None:
    await client.create("statefulsets", statefulset(replicas=2, podManagementPolicy="Parallel",
                                                    ordinals={"start": 5}))
    assert await wait_for(lambda: _names_are(client, ["db-5", "db-6"]), what="db-5 and db-6")
    assert [p["metadata"]["labels"]["apps.kubernetes.io/pod-index"] for p in await pods(client, SELECTOR)] == \
        ["5", "6"]
    await client.patch("statefulsets", "db", {"spec": {"ordinals": {"start": 6}}}, namespace=NS)
    assert await wait_for(lambda: _names_are(client, ["db-6", "db-7"]), what="db-5 condemned, db-7 made")


async def test_scaling_should_happen_in_predictable_order_and_halt_if_any_stateful_pod_is_unhealthy(
        client: Client) -> None:
    await client.create("statefulsets", statefulset(replicas=1))
    await wait_for(lambda: _names_are(client, ["db-0"]), what="db-0")
    # scale up halts while db-0 is not Ready
    await client.patch("statefulsets", "db", {"spec": {"replicas": 3}}, namespace=NS)
    await wait_for(lambda: _status_if(client, observedGeneration=2), what="the scale up seen")
    assert await live_pod_names(client, SELECTOR) == ["db-0"]
    for count in (1, 2, 3):
        expected = [f"db-{i}" for i in range(count)]

        async def created_in_order(expected: list[str] = expected) -> bool:
            names = await live_pod_names(client, SELECTOR)
            assert names == expected[:len(names)], names  # never a pod before its predecessor is Ready
            return names == expected

        await wait_for(created_in_order, what=f"{expected}")
        await ready_all(client)  # the next pod comes only once this one is Running and Ready
    status = await wait_for(lambda: _status_if(client, readyReplicas=3), what="3 ready replicas")
    assert status["replicas"] == 3 and status["availableReplicas"] == 3
    # scale down halts while the pods are unhealthy
    for pod in await pods(client, SELECTOR):
        await set_running(client, pod, ready=False)
    await wait_for(lambda: _status_if(client, readyReplicas=None), what="no ready replica")
    await client.patch("statefulsets", "db", {"spec": {"replicas": 0}}, namespace=NS)
    await wait_for(lambda: _status_if(client, observedGeneration=3), what="the scale down seen")
    assert await live_pod_names(client, SELECTOR) == ["db-0", "db-1", "db-2"]
    # healthy again: db-2, then db-1, then db-0 go, in reverse order (the survivors are always a prefix)
    for pod in await pods(client, SELECTOR):
        await set_running(client, pod)

    async def gone_in_reverse_order() -> bool:
        names = await live_pod_names(client, SELECTOR)
        assert names == [f"db-{i}" for i in range(len(names))], names
        return not names

    await wait_for(gone_in_reverse_order, what="every pod deleted")
    deleted = await wait_for(lambda: _if_size(lambda: _notes(client, "SuccessfulDelete"), 3), what="3 deletions")
    assert deleted == {f"delete Pod db-{i} in StatefulSet db successful" for i in range(3)}


async def test_burst_scaling_should_run_to_completion_even_with_unhealthy_pods(client: Client) -> None:
    await client.create("statefulsets", statefulset(replicas=3, podManagementPolicy="Parallel"))
    assert await wait_for(lambda: _names_are(client, ["db-0", "db-1", "db-2"]), what="3 pods at once")
    await client.patch("statefulsets", "db", {"spec": {"replicas": 0}}, namespace=NS)
    await wait_for(lambda: _names_are(client, []), what="every unready pod deleted")


async def test_failed_pods_are_recreated(client: Client) -> None:
    await client.create("statefulsets", statefulset(replicas=1))
    first = (await wait_for(lambda: pods(client, SELECTOR), what="db-0"))[0]
    await set_phase(client, first, "Failed")

    async def recreated() -> Any:
        current = await pods(client, SELECTOR)
        return current and current[0]["metadata"]["uid"] != first["metadata"]["uid"]

    await wait_for(recreated, what="db-0 made again")


async def _deletion_order(client: Client) -> list[str]:
    """The pods the controller deleted, in the order of its SuccessfulDelete events."""
    # an Event's name ends in the hex nanoseconds it was first recorded at: one recorder's names sort in time
    deleted = sorted(await events(client, "db", "SuccessfulDelete"), key=lambda e: e["metadata"]["name"])
    return [e["message"].split()[2] for e in deleted]


async def _notes(client: Client, reason: str) -> set[str]:
    return {e["message"] for e in await events(client, "db", reason)}


async def _if_size(notes: Any, size: int) -> Any:
    seen = await notes()
    return seen if len(seen) == size else None


async def _status_if(client: Client, **expected: Any) -> Any:
    status = (await get_set(client)).get("status") or {}
    return status if all(status.get(k) == v for k, v in expected.items()) else None


async def _names_are(client: Client, names: list[str]) -> bool:
    return await live_pod_names(client, SELECTOR) == names


async def _revisions(client: Client) -> Any:
    status = (await get_set(client)).get("status") or {}
    return status.get("currentRevision"), status.get("updateRevision")


async def _rolled_to(client: Client, revision: str, image: str) -> Any:
    status = await _status_if(client, currentRevision=revision, updateRevision=revision, updatedReplicas=3,
                              readyReplicas=3, currentReplicas=3)
    if status is None:
        return None
    current = await pods(client, SELECTOR)
    return all(p["metadata"]["labels"]["controller-revision-hash"] == revision
               and p["spec"]["containers"][0]["image"] == image for p in current) and status


async def test_should_perform_rolling_updates_and_roll_backs_of_template_modifications(client: Client) -> None:
    async with kubelet(client, SELECTOR):
        await client.create("statefulsets", statefulset(replicas=3))
        status = await wait_for(lambda: _status_if(client, readyReplicas=3), what="3 ready replicas")
        first = status["currentRevision"]
        assert status["updateRevision"] == first
        await client.patch("statefulsets", "db", {"spec": {"template": {"spec": {"containers": [
            {"name": "db", "image": "postgres:17"}]}}}}, namespace=NS)
        second = (await wait_for(lambda: _changed_update_revision(client, first), what="a new update revision"))
        await wait_for(lambda: _rolled_to(client, second, "postgres:17"), what="rolled to the new revision")
        deletions = await wait_for(lambda: _if_size(lambda: _deletion_order(client), 3), what="3 deletions")
        assert deletions == ["db-2", "db-1", "db-0"]  # highest ordinal first
        # roll back: the first revision is the update revision again, with the next revision number
        await client.patch("statefulsets", "db", {"spec": {"template": {"spec": {"containers": [
            {"name": "db", "image": "postgres:16"}]}}}}, namespace=NS)
        await wait_for(lambda: _rolled_to(client, first, "postgres:16"), what="rolled back")
    revision = await client.get("controllerrevisions", first, namespace=NS)
    assert revision["revision"] == 3
    assert (await client.get("controllerrevisions", second, namespace=NS))["revision"] == 2


async def _changed_update_revision(client: Client, old: str) -> Any:
    _, update = await _revisions(client)
    return update if update and update != old else None


async def test_should_perform_canary_updates_and_phased_rolling_updates(client: Client) -> None:
    async with kubelet(client, SELECTOR):
        await client.create("statefulsets", statefulset(replicas=3, updateStrategy={
            "type": "RollingUpdate", "rollingUpdate": {"partition": 3}}))
        first = (await wait_for(lambda: _status_if(client, readyReplicas=3), what="3 ready"))["currentRevision"]
        await client.patch("statefulsets", "db", {"spec": {"template": {"spec": {"containers": [
            {"name": "db", "image": "postgres:17"}]}}}}, namespace=NS)
        second = await wait_for(lambda: _changed_update_revision(client, first), what="a new update revision")
        status = await wait_for(lambda: _status_if(client, observedGeneration=2), what="the update seen")
        assert status["currentRevision"] == first and "updatedReplicas" not in status  # 0: omitted, as Go does
        await client.patch("statefulsets", "db", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}},
                           namespace=NS)

        async def canary() -> Any:
            by_name = {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"]
                       for p in await pods(client, SELECTOR) if (p.get("status") or {}).get("phase") == "Running"}
            return by_name == {"db-0": first, "db-1": first, "db-2": second}

        await wait_for(canary, what="only db-2 updated")
        await client.patch("statefulsets", "db", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}},
                           namespace=NS)
        await wait_for(lambda: _rolled_to(client, second, "postgres:17"), what="phased roll out complete")


CLAIMS = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}]


async def _claim_owners(client: Client, name: str) -> Any:
    try:
        claim = await client.get("persistentvolumeclaims", name, namespace=NS)
    except NotFound:
        return None
    return [(r["kind"], r["name"]) for r in claim["metadata"].get("ownerReferences") or ()]


async def test_pvc_retention_policy_delete_when_scaled_and_when_deleted(client: Client) -> None:
    async with kubelet(client, SELECTOR):
        await client.create("statefulsets", statefulset(replicas=2, volumeClaimTemplates=CLAIMS,
                                                        persistentVolumeClaimRetentionPolicy={
                                                            "whenDeleted": "Delete", "whenScaled": "Delete"}))
        await wait_for(lambda: _status_if(client, readyReplicas=2), what="2 ready")
        for name in ("data-db-0", "data-db-1"):  # whenDeleted: the set owns its claims
            owners = await wait_for(lambda name=name: _claim_owners(client, name), what=f"{name}")
            assert owners == [("StatefulSet", "db")]
        await client.patch("statefulsets", "db", {"spec": {"replicas": 1}}, namespace=NS)
        # whenScaled: the condemned pod owns its claim, which goes with it (garbage collection)
        await wait_for(lambda: _names_are(client, ["db-0"]), what="db-1 deleted")
        await wait_for(lambda: _absent(client, "data-db-1"), what="data-db-1 collected")
        assert await _claim_owners(client, "data-db-0") == [("StatefulSet", "db")]


async def _absent(client: Client, claim: str) -> bool:
    return await _claim_owners(client, claim) is None


async def test_pvcs_are_retained_by_default(client: Client) -> None:
    async with kubelet(client, SELECTOR):
        await client.create("statefulsets", statefulset(replicas=2, volumeClaimTemplates=CLAIMS))
        await wait_for(lambda: _status_if(client, readyReplicas=2), what="2 ready")
        await client.patch("statefulsets", "db", {"spec": {"replicas": 1}}, namespace=NS)
        await wait_for(lambda: _names_are(client, ["db-0"]), what="db-1 deleted")
        assert await _claim_owners(client, "data-db-1") == []  # no owner: kept for the next db-1


async def test_on_delete_strategy_updates_a_pod_only_when_it_is_deleted(client: Client) -> None:
    async with kubelet(client, SELECTOR):
        await client.create("statefulsets", statefulset(replicas=2, updateStrategy={"type": "OnDelete"}))
        first = (await wait_for(lambda: _status_if(client, readyReplicas=2), what="2 ready"))["currentRevision"]
        await client.patch("statefulsets", "db", {"spec": {"template": {"spec": {"containers": [
            {"name": "db", "image": "postgres:17"}]}}}}, namespace=NS)
        second = await wait_for(lambda: _changed_update_revision(client, first), what="a new update revision")
        status = await wait_for(lambda: _status_if(client, observedGeneration=2), what="the update seen")
        assert status["currentReplicas"] == 2 and "updatedReplicas" not in status
        await client.delete("pods", "db-1", namespace=NS)

        async def db1_updated() -> Any:
            by_name = {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"]
                       for p in await pods(client, SELECTOR)}
            return by_name == {"db-0": first, "db-1": second}

        await wait_for(db1_updated, what="db-1 made again at the update revision")
        await wait_for(lambda: _status_if(client, currentReplicas=1, updatedReplicas=1, readyReplicas=2),
                    what="one current, one updated")


async def test_min_ready_seconds_delays_availability() -> None:
    clock = FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    async with APIServer(clock=clock, controllers=["statefulset"]) as server, Client(server.url) as client:
        await client.create("statefulsets", statefulset(replicas=1, minReadySeconds=10))
        pod = (await wait_for(lambda: pods(client, SELECTOR), what="db-0"))[0]
        await set_running(client, pod, wall=clock.wall())
        status = await wait_for(lambda: _status_if(client, readyReplicas=1), what="1 ready")
        assert status["availableReplicas"] == 0
        # kube syncs the set again minReadySeconds after each sync that found a pod not available yet: at
        # +10 s the pod has been ready for exactly minReadySeconds (not more: still unavailable), at +20 s it is
        start = clock.now()

        async def tick() -> Any:
            if await _status_if(client, availableReplicas=1):
                return clock.now() - start
            assert clock.now() - start <= 30, "not available after 30 s of fake time"
            clock.step(1)
            return None

        assert 10 < await wait_for(tick, what="available after minReadySeconds", timeout=60) <= 21


async def test_orphan_pods_are_adopted(client: Client) -> None:
    orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db-0", "namespace": NS,
                                                             "labels": {"app": "db"}},
              "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}
    await client.create("pods", orphan)
    await client.create("statefulsets", statefulset(replicas=1))
    sts = await get_set(client)

    async def adopted() -> Any:
        refs = (await client.get("pods", "db-0", namespace=NS))["metadata"].get("ownerReferences") or []
        return [r["uid"] for r in refs if r.get("controller")] == [sts["metadata"]["uid"]]

    await wait_for(adopted, what="db-0 adopted")
    async with kubelet(client, SELECTOR):  # the identity is fixed once the pod is Running and Ready
        labels = await wait_for(lambda: _labelled(client), what="identity labels restored")
    assert labels["apps.kubernetes.io/pod-index"] == "0"


async def _labelled(client: Client) -> Any:
    """db-0's labels once it has its identity (the adopted pod, fixed, or the one made at the update revision
    after the rolling update replaced it: it had no revision)."""
    try:
        labels = (await client.get("pods", "db-0", namespace=NS))["metadata"].get("labels") or {}
    except NotFound:
        return None
    return labels if "statefulset.kubernetes.io/pod-name" in labels else None
