"""The disruption controller and the server's eviction, end to end; named after kube's e2e
(test/e2e/apps/disruption.go). The test plays the kubelet (pod readiness) and the workload controllers (pods
owned by a ReplicaSet are created here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hsvc_helpers import NS, cluster_client, evict, pod, run_pod, wait_list, wait_object

import kinformer as ki

PDBS = "poddisruptionbudgets.policy"


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with cluster_client("disruption", pdb_deletion_timeout=1.0) as c:
        yield c


async def create_pdb(client: ki.Client, **spec: Any) -> None:
    await client.create(PDBS, {"metadata": {"name": "foo", "namespace": NS},
                               "spec": {"selector": {"matchLabels": {"foo": "bar"}}, **spec}})


async def running_pods(client: ki.Client, count: int, *, ready: bool = True,
                       owner: dict[str, Any] | None = None) -> None:
    for i in range(count):
        body = pod(f"pod-{i}", {"foo": "bar"})
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        await client.create("pods", body)
        await run_pod(client, f"pod-{i}", f"10.0.1.{i + 1}", ready=ready)


async def replica_set(client: ki.Client, replicas: int) -> dict[str, Any]:
    """A ReplicaSet of ``replicas`` and the controller reference its pods carry."""
    rs = await client.create("replicasets.apps", {
        "metadata": {"name": "rs", "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"foo": "bar"}},
                 "template": {"metadata": {"labels": {"foo": "bar"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": rs["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


async def wait_status(client: ki.Client, **expected: Any) -> dict[str, Any]:
    pdb = await wait_object(client, PDBS, "foo", lambda p: p is not None and all(
        (p.get("status") or {}).get(k) == v for k, v in expected.items()))
    return dict(pdb["status"])


def condition(status: dict[str, Any]) -> tuple[str, str]:
    (cond,) = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    return cond["status"], cond["reason"]


async def test_should_create_a_pod_disruption_budget_and_observe_its_status(client: ki.Client) -> None:
    await create_pdb(client, minAvailable=1)
    status = await wait_status(client, observedGeneration=1)
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"],
            status["disruptionsAllowed"]) == (0, 1, 0, 0)
    assert condition(status) == ("False", "InsufficientPods")
    events = await wait_list(client, "events", lambda evs: any(e.get("reason") == "NoPods" for e in evs))
    assert {(e["type"], e["message"]) for e in events if e.get("reason") == "NoPods"} == \
        {("Normal", "No matching pods found")}
    await running_pods(client, 3)
    status = await wait_status(client, currentHealthy=3, disruptionsAllowed=2)
    assert (status["desiredHealthy"], status["expectedPods"]) == (1, 3)
    assert condition(status) == ("True", "SufficientPods")


async def test_evictions_no_pdb_should_allow_an_eviction(client: ki.Client) -> None:
    await running_pods(client, 1)
    await evict(client, "pod-0")
    await wait_object(client, "pods", "pod-0", lambda p: p is None or p["metadata"].get("deletionTimestamp"))


async def test_evictions_too_few_pods_absolute_should_not_allow_an_eviction(client: ki.Client) -> None:
    await create_pdb(client, minAvailable=2)
    await running_pods(client, 2)
    await wait_status(client, currentHealthy=2, disruptionsAllowed=0)
    with pytest.raises(ki.TooManyRequests):
        await evict(client, "pod-0")


async def test_evictions_enough_pods_absolute_should_allow_an_eviction_and_record_it(client: ki.Client) -> None:
    await create_pdb(client, minAvailable=2)
    await running_pods(client, 3)
    await wait_status(client, currentHealthy=3, disruptionsAllowed=1)
    await evict(client, "pod-0")
    with pytest.raises(ki.TooManyRequests):
        await evict(client, "pod-1")
    status = await wait_status(client, currentHealthy=2, expectedPods=2, disruptionsAllowed=0)
    assert condition(status) == ("False", "InsufficientPods")


async def test_evictions_enough_pods_replicaset_percentage_should_allow_an_eviction(client: ki.Client) -> None:
    owner = await replica_set(client, 10)
    await create_pdb(client, minAvailable="20%")
    await running_pods(client, 10, owner=owner)
    status = await wait_status(client, currentHealthy=10, disruptionsAllowed=8)
    assert (status["expectedPods"], status["desiredHealthy"]) == (10, 2)
    await evict(client, "pod-0")


async def test_evictions_too_few_pods_replicaset_percentage_should_not_allow_an_eviction(client: ki.Client) -> None:
    owner = await replica_set(client, 3)
    await create_pdb(client, minAvailable="90%")
    await running_pods(client, 3, owner=owner)
    await wait_status(client, currentHealthy=3, desiredHealthy=3, expectedPods=3, disruptionsAllowed=0)
    with pytest.raises(ki.TooManyRequests):
        await evict(client, "pod-0")


async def test_evictions_maxunavailable_allow_single_eviction_percentage_should_allow_an_eviction(
        client: ki.Client) -> None:
    owner = await replica_set(client, 4)
    await create_pdb(client, maxUnavailable="10%")
    await running_pods(client, 4, owner=owner)
    await wait_status(client, currentHealthy=4, desiredHealthy=3, expectedPods=4, disruptionsAllowed=1)
    await evict(client, "pod-0")
    with pytest.raises(ki.TooManyRequests):
        await evict(client, "pod-1")


async def test_a_pod_whose_controller_has_no_scale_fails_the_sync_safely(client: ki.Client) -> None:
    cm = await client.create("configmaps", {"metadata": {"name": "owner", "namespace": NS}})
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": cm["metadata"]["uid"],
             "controller": True}
    await create_pdb(client, maxUnavailable=1)
    await running_pods(client, 2, owner=owner)
    pdb = await wait_object(client, PDBS, "foo", lambda p: p is not None and any(
        c.get("reason") == "SyncFailed" for c in (p.get("status") or {}).get("conditions") or ()))
    (cond,) = pdb["status"]["conditions"]
    assert cond["status"] == "False" and cond["message"] == 'found no controllers for pod "pod-0"'
    assert pdb["status"].get("disruptionsAllowed", 0) == 0
    events = await wait_list(client, "events", lambda evs: any(
        e.get("reason") == "CalculateExpectedPodCountFailed" for e in evs))
    (failed,) = {e["message"] for e in events if e.get("reason") == "CalculateExpectedPodCountFailed"}
    assert failed == 'Failed to calculate the number of expected pods: found no controllers for pod "pod-0"'


async def test_should_not_evict_unready_pods_with_the_if_healthy_budget_policy_but_with_always_allow(
        client: ki.Client) -> None:
    await create_pdb(client, minAvailable=1)
    await running_pods(client, 1, ready=False)
    await wait_status(client, currentHealthy=0, desiredHealthy=1, expectedPods=1)
    with pytest.raises(ki.TooManyRequests):
        await evict(client, "pod-0")
    await client.patch(PDBS, "foo", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, namespace=NS)
    await wait_status(client, observedGeneration=2)
    await evict(client, "pod-0")


async def test_an_eviction_not_followed_by_a_deletion_expires_from_disrupted_pods(client: ki.Client) -> None:
    await create_pdb(client, minAvailable=1)
    await running_pods(client, 2)
    status = await wait_status(client, currentHealthy=2, disruptionsAllowed=1)
    pdb = await client.get(PDBS, "foo", namespace=NS)
    evicted_at = pdb["metadata"]["creationTimestamp"]
    await client.patch_status(PDBS, "foo", {"status": {"disruptedPods": {"pod-1": evicted_at},
                                                       "disruptionsAllowed": 0}}, namespace=NS)
    status = await wait_status(client, currentHealthy=2, disruptionsAllowed=1)
    assert "disruptedPods" not in status


async def test_should_observe_that_the_pdb_status_is_not_updated_for_unmanaged_pods(client: ki.Client) -> None:
    await create_pdb(client, maxUnavailable=1)
    await running_pods(client, 2)
    status = await wait_status(client, currentHealthy=2)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (0, 0, 0)
    events = await wait_list(client, "events", lambda evs: any(e.get("reason") == "UnmanagedPods" for e in evs))
    (message,) = {e["message"] for e in events if e.get("reason") == "UnmanagedPods"}
    assert message.startswith("Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:"
                              "map[string]string{foo: bar,},MatchExpressions:[]LabelSelectorRequirement{},}) were "
                              "found to be unmanaged.")


async def test_a_pod_relabelled_out_of_the_budget_is_no_longer_counted(client: ki.Client) -> None:
    """The pods watch is handed only pods a budget selects; the update that takes a pod out still arrives."""
    await create_pdb(client, minAvailable=1)
    await running_pods(client, 3)
    await wait_status(client, currentHealthy=3, expectedPods=3)
    await client.patch("pods", "pod-0", {"metadata": {"labels": {"foo": "baz"}}}, "merge", namespace=NS)
    await wait_status(client, currentHealthy=2, expectedPods=2, disruptionsAllowed=1)
