"""The DaemonSet controller against the embedded server, named after kube's e2e tests
(test/e2e/apps/daemon_set.go); the tests create Node objects and play the scheduler and the kubelet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hsets_helpers import NS, add_node, kubelet, pods, set_phase

from cluster_helpers import events, wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster.controllers.daemonset import BACKOFF_GC_INTERVAL, BACKOFF_INITIAL, BACKOFF_MAX, FailedPodBackoff
from kinformer.cluster.controllers.daemonset_nodes import target_node
from kinformer.server import APIServer

SELECTOR = "app=ds"


def daemonset(**spec: Any) -> dict[str, Any]:
    template_spec = spec.pop("template_spec", {})
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "ds"}},
                     "template": {"metadata": {"labels": {"app": "ds"}},
                                  "spec": {"containers": [{"name": "app", "image": "httpd:2.4"}],
                                           **template_spec}},
                     **spec}}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with APIServer(controllers=["daemonset"]) as server, Client(server.url) as api:
        yield api


async def live(client: Client) -> list[Any]:
    return [p for p in await pods(client, SELECTOR) if not p["metadata"].get("deletionTimestamp")]


async def nodes_running(client: Client) -> dict[str, str]:
    """node -> the name of the live daemon pod Running there."""
    return {p["spec"]["nodeName"]: p["metadata"]["name"] for p in await live(client)
            if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"}


async def on_nodes(client: Client, expected: set[str]) -> Any:
    """True once exactly one daemon pod runs on each of ``expected`` and none elsewhere."""
    current = await live(client)
    placed = [p["spec"].get("nodeName") or "" for p in current]
    return sorted(placed) == sorted(expected) and all(
        (p.get("status") or {}).get("phase") == "Running" for p in current)


async def ds_status(client: Client, **expected: Any) -> Any:
    status = (await client.get("daemonsets", "ds", namespace=NS)).get("status") or {}
    return status if all(status.get(k) == v for k, v in expected.items()) else None


async def test_should_run_and_stop_simple_daemon(client: Client) -> None:
    for name in ("node-1", "node-2", "node-3"):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True):
        await client.create("daemonsets", daemonset())
        await wait_for(lambda: on_nodes(client, {"node-1", "node-2", "node-3"}), what="a pod on each node")
        status = await wait_for(lambda: ds_status(client, numberReady=3, numberAvailable=3), what="3 ready")
        assert status["desiredNumberScheduled"] == 3 and status["currentNumberScheduled"] == 3
        assert status["updatedNumberScheduled"] == 3 and status["numberMisscheduled"] == 0
        assert status["observedGeneration"] == 1
        # a daemon pod that is deleted is revived
        victim = (await live(client))[0]
        await client.delete("pods", victim["metadata"]["name"], namespace=NS)

        async def revived() -> Any:
            names = (await nodes_running(client)).values()
            return len(names) == 3 and victim["metadata"]["name"] not in names

        await wait_for(revived, what="the deleted pod replaced")
        created = await wait_for(lambda: _events_if(client, "SuccessfulCreate", 4), what="4 SuccessfulCreate events")
        assert all(e["message"].startswith("Created pod: ds-") and e["type"] == "Normal" for e in created)
        # stop: deleting the DaemonSet deletes its pods (garbage collection)
        await client.delete("daemonsets", "ds", namespace=NS, propagation_policy="Foreground")
        await wait_for(lambda: _no_pods(client), what="every daemon pod deleted")


async def _events_if(client: Client, reason: str, count: int) -> Any:
    """The set's events of ``reason`` once there are ``count`` of them (the recorder writes in the background)."""
    found = await events(client, "ds", reason)
    return found if len(found) == count else None


async def _no_pods(client: Client) -> bool:
    return not await pods(client, SELECTOR)


async def test_should_run_and_stop_complex_daemon(client: Client) -> None:
    await add_node(client, "node-1")
    await add_node(client, "node-2")
    async with kubelet(client, SELECTOR, schedule=True):
        await client.create("daemonsets", daemonset(template_spec={"nodeSelector": {"color": "blue"}}))
        await wait_for(lambda: ds_status(client, observedGeneration=1), what="the set seen")
        assert await live(client) == []  # no node is blue
        await client.patch("nodes", "node-1", {"metadata": {"labels": {"color": "blue"}}})
        await wait_for(lambda: on_nodes(client, {"node-1"}), what="a pod on the blue node")
        await wait_for(lambda: ds_status(client, desiredNumberScheduled=1, numberReady=1), what="1 ready")
        # the node turns green: its pod goes
        await client.patch("nodes", "node-1", {"metadata": {"labels": {"color": "green"}}})
        await wait_for(lambda: on_nodes(client, set()), what="the pod unscheduled from the green node")
        # the set follows green nodes now
        await client.patch("daemonsets", "ds", {"spec": {"template": {"spec": {"nodeSelector": {"color": "green"}}},
                                                         "updateStrategy": {"type": "RollingUpdate"}}}, namespace=NS)
        await wait_for(lambda: on_nodes(client, {"node-1"}), what="a pod on the green node")
        status = await wait_for(lambda: ds_status(client, observedGeneration=2, numberReady=1), what="1 ready")
        assert status["desiredNumberScheduled"] == 1


async def test_should_retry_creating_failed_daemon_pods(client: Client) -> None:
    await add_node(client, "node-1")
    async with kubelet(client, SELECTOR, schedule=True):
        await client.create("daemonsets", daemonset())
        await wait_for(lambda: on_nodes(client, {"node-1"}), what="a pod on node-1")
        failed = (await live(client))[0]
        await set_phase(client, failed, "Failed")

        async def replaced() -> Any:
            running = await nodes_running(client)
            return running.get("node-1") not in (None, failed["metadata"]["name"])

        await wait_for(replaced, what="the failed pod replaced")
    warnings = await wait_for(lambda: _events_if(client, "FailedDaemonPod", 1), what="the FailedDaemonPod event")
    assert warnings[0]["type"] == "Warning"
    assert warnings[0]["message"] == (f"Found failed daemon pod {NS}/{failed['metadata']['name']} on node node-1, "
                                   "will try to kill it")


async def test_daemon_pods_are_aimed_at_their_node_and_tolerate_node_problems(client: Client) -> None:
    await add_node(client, "node-1", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}])
    await add_node(client, "node-2", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    await client.create("daemonsets", daemonset())
    pod = (await wait_for(lambda: pods(client, SELECTOR), what="a pod"))[0]
    await wait_for(lambda: ds_status(client, desiredNumberScheduled=1), what="1 desired")
    assert len(await pods(client, SELECTOR)) == 1  # node-2's taint is not tolerated
    spec, labels = pod["spec"], pod["metadata"]["labels"]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}
    assert "nodeName" not in spec  # the scheduler binds it
    assert {(t["key"], t["effect"]) for t in spec["tolerations"]} >= {
        ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}
    assert labels["pod-template-generation"] == "1"
    revision = await client.get("controllerrevisions", f"ds-{labels['controller-revision-hash']}", namespace=NS)
    assert revision["revision"] == 1
    # a node that goes away takes its unscheduled pod with it; a new node gets one
    await client.delete("nodes", "node-1")
    await wait_for(lambda: _no_pods(client), what="the pod of the removed node deleted")
    await add_node(client, "node-3")
    placed = await wait_for(lambda: pods(client, SELECTOR), what="a pod for node-3")
    assert placed[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-3"]


NODES = {"node-1", "node-2", "node-3"}


async def _running_on_three_nodes(client: Client, **spec: Any) -> None:
    """Three nodes and the set available on each (call inside ``kubelet(..., schedule=True)``)."""
    await client.create("daemonsets", daemonset(**spec))
    await wait_for(lambda: ds_status(client, numberAvailable=3), what="3 available")


async def _set_image(client: Client, image: str) -> None:
    await client.patch("daemonsets", "ds", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": image}]}}}}, namespace=NS)


async def _images(client: Client) -> dict[str, str]:
    return {p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"] for p in await live(client)
            if p["spec"].get("nodeName")}


async def test_should_update_pod_when_spec_was_updated_and_update_strategy_is_rolling_update(
        client: Client) -> None:
    for name in sorted(NODES):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True):
        await _running_on_three_nodes(client)
        first_hash = (await live(client))[0]["metadata"]["labels"]["controller-revision-hash"]
        await _set_image(client, "httpd:2.5")

        async def rolled() -> Any:
            running = [p for p in await live(client) if (p.get("status") or {}).get("phase") == "Running"]
            assert len(running) >= 2, "more than maxUnavailable (1) pods unavailable"
            return await _images(client) == dict.fromkeys(NODES, "httpd:2.5") and await ds_status(
                client, updatedNumberScheduled=3, numberAvailable=3, observedGeneration=2)

        await wait_for(rolled, what="every pod updated")
    new_hash = (await live(client))[0]["metadata"]["labels"]["controller-revision-hash"]
    assert new_hash != first_hash
    assert all(p["metadata"]["labels"]["pod-template-generation"] == "2" for p in await live(client))
    assert (await client.get("controllerrevisions", f"ds-{new_hash}", namespace=NS))["revision"] == 2


async def test_should_rollback_without_unnecessary_restarts(client: Client) -> None:
    for name in sorted(NODES):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True, unready_images=("httpd:no-such-tag",)):
        await _running_on_three_nodes(client)
        originals = {p["metadata"]["name"] for p in await live(client)}
        await _set_image(client, "httpd:no-such-tag")

        async def stuck() -> Any:  # one pod replaced by a pod that never gets ready: the roll out stops there
            images = await _images(client)
            running = await nodes_running(client)
            return sorted(images.values()).count("httpd:no-such-tag") == 1 and len(running) == 3

        await wait_for(stuck, what="the roll out stuck on an unready pod")
        untouched = {p["metadata"]["name"] for p in await live(client)} & originals
        assert len(untouched) == 2
        await _set_image(client, "httpd:2.4")
        await wait_for(lambda: ds_status(client, numberAvailable=3, updatedNumberScheduled=3, observedGeneration=3),
                    what="rolled back")
        assert set((await _images(client)).values()) == {"httpd:2.4"}
        # the pods that were never updated were not restarted
        assert untouched <= {p["metadata"]["name"] for p in await live(client)}


async def test_should_surge_pods_onto_nodes_when_spec_was_updated_and_update_strategy_is_rolling_update(
        client: Client) -> None:
    for name in sorted(NODES):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True):
        await _running_on_three_nodes(client, updateStrategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
        await _set_image(client, "httpd:2.5")

        async def surged() -> Any:
            current = await live(client)
            per_node: dict[str, int] = {}
            for pod in current:
                node = target_node(pod) or ""
                per_node[node] = per_node.get(node, 0) + 1
            assert sum(n - 1 for n in per_node.values()) <= 1, f"more than maxSurge extra pods: {per_node}"
            assert len(await nodes_running(client)) == 3, "a node without a running pod (maxUnavailable 0)"
            done = await _images(client) == dict.fromkeys(NODES, "httpd:2.5") and len(current) == 3
            return done and await ds_status(client, updatedNumberScheduled=3, numberAvailable=3)

        await wait_for(surged, what="every pod replaced, one node at a time")


async def test_daemon_pods_are_bound_by_the_scheduler_to_the_node_they_are_aimed_at() -> None:
    async with APIServer(controllers=["daemonset", "scheduler"]) as server, Client(server.url) as client:
        for name in sorted(NODES):
            await add_node(client, name)
        async with kubelet(client, SELECTOR, bound_only=True):
            await client.create("daemonsets", daemonset())
            await wait_for(lambda: on_nodes(client, NODES), what="a pod bound to each node by the scheduler")
            for pod in await live(client):
                assert pod["spec"]["nodeName"] == target_node({"spec": {"affinity": pod["spec"]["affinity"]}})
            await wait_for(lambda: ds_status(client, numberAvailable=3, numberReady=3), what="3 available")


async def test_on_delete_strategy_updates_a_pod_only_when_it_is_deleted(client: Client) -> None:
    for name in sorted(NODES):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True):
        await _running_on_three_nodes(client, updateStrategy={"type": "OnDelete"})
        await _set_image(client, "httpd:2.5")
        status = await wait_for(lambda: ds_status(client, observedGeneration=2), what="the update seen")
        assert "updatedNumberScheduled" not in status  # 0: omitted, as Go does
        assert set((await _images(client)).values()) == {"httpd:2.4"}
        victim = next(p for p in await live(client) if p["spec"]["nodeName"] == "node-2")
        await client.delete("pods", victim["metadata"]["name"], namespace=NS)

        async def node2_updated() -> Any:
            return await _images(client) == {"node-1": "httpd:2.4", "node-2": "httpd:2.5", "node-3": "httpd:2.4"}

        await wait_for(node2_updated, what="node-2's pod made again from the new template")
        await wait_for(lambda: ds_status(client, updatedNumberScheduled=1, numberAvailable=3), what="1 updated")


async def test_a_no_schedule_taint_keeps_the_running_pod_as_misscheduled(client: Client) -> None:
    await add_node(client, "node-1")
    async with kubelet(client, SELECTOR, schedule=True):
        await client.create("daemonsets", daemonset())
        await wait_for(lambda: on_nodes(client, {"node-1"}), what="a pod on node-1")
        await client.patch("nodes", "node-1", {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
        status = await wait_for(lambda: ds_status(client, numberMisscheduled=1), what="the pod counted misscheduled")
        assert status["desiredNumberScheduled"] == 0 and len(await live(client)) == 1
        await client.patch("nodes", "node-1", {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
        await wait_for(lambda: _no_pods(client), what="the pod deleted under a NoExecute taint it does not tolerate")


async def test_no_node_gets_a_second_pod_while_the_first_creation_is_not_observed_yet(client: Client) -> None:
    """kube's expectations: here every write is read back before the set's next sync, so the events of the
    set's own creations (and of ten nodes) never make it create twice."""
    nodes = {f"node-{i}" for i in range(10)}
    for name in sorted(nodes):
        await add_node(client, name)
    async with kubelet(client, SELECTOR, schedule=True):
        await client.create("daemonsets", daemonset())
        await wait_for(lambda: ds_status(client, numberAvailable=10), what="10 available")

    await wait_for(lambda: _events_if(client, "SuccessfulCreate", 10), what="10 SuccessfulCreate events")
    assert not await events(client, "ds", "SuccessfulDelete")
    assert sorted(target_node(p) or "" for p in await pods(client, SELECTOR)) == sorted(nodes)


def test_failed_pod_backoff_forgets_pairs_not_failing_for_twice_the_longest_delay() -> None:
    """kube's failedPodsBackoff is garbage-collected (Backoff.GC every BackoffGCInterval): a (set, node) pair
    whose pods stopped failing is forgotten, so the back-off holds only the pairs that failed lately."""
    clock = FakeClock()
    backoff = FailedPodBackoff(clock)
    for node in ("a", "b", "c"):
        backoff.next(f"default/ds/{node}")
    assert len(backoff) == 3 and backoff.in_backoff("default/ds/a") == BACKOFF_INITIAL
    clock.step(2 * BACKOFF_MAX + BACKOFF_GC_INTERVAL)
    backoff.next("default/ds/d")
    assert len(backoff) == 1 and backoff.in_backoff("default/ds/a") is None
