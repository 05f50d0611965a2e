"""The node lifecycle and taint eviction controllers on a fake clock: a node whose heartbeats stop turns
Unknown and is tainted, its pods go NotReady and are evicted after their tolerationSeconds; a node that comes
back loses the taints (kube's pkg/controller/nodelifecycle and tainteviction tests assert the same)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from cluster_helpers import condition, events, wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.cluster.controllers.nodelifecycle import reconciled_taints
from kinformer.cluster.controllers.tainteviction import toleration_seconds
from kinformer.cluster.metatime import rfc3339
from kinformer.errors import NotFound
from kinformer.server import APIServer
from unit.cluster._hsched_helpers import Env, pod, ready_node, running_pod

GRACE = 8.0
TOLERATION = 30
OPTIONS = ClusterOptions(node_monitor_period=1.0, node_monitor_grace_period=GRACE)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock(wall_start=datetime(2026, 1, 1).timestamp())
    async with APIServer(clock=clock, controllers=["nodelifecycle", "taint-eviction-controller"],
                         cluster_options=OPTIONS, default_toleration_seconds=TOLERATION) as server, \
            Client(server.url) as client:
        yield Env(server, client, clock)


def taint_keys(node: Any) -> set[tuple[str, str]]:
    return {(x["key"], x["effect"]) for x in node["spec"].get("taints") or ()}


async def pod_gone(client: Client, name: str) -> bool:
    try:
        await client.get("pods", name, "default")
    except NotFound:
        return True
    return False


async def test_stopped_node_goes_unknown_tainted_then_evicts_after_toleration_seconds(env: Env) -> None:
    await ready_node(env, "healthy")
    await ready_node(env, "lost")
    await running_pod(env, "web", "lost")
    await running_pod(env, "forever", "lost", tolerations=[
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}])
    started = env.clock.now()

    async def unknown() -> Any:
        node = await env.client.get("nodes", "lost")
        ready = condition(node, "Ready")
        return node if ready and ready["status"] == "Unknown" else None
    node = await env.tick_until(unknown, "the lost node to turn Unknown")
    assert env.clock.now() - started >= GRACE
    ready = condition(node, "Ready")
    assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    for type_ in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        assert condition(node, type_)["reason"] == "NodeStatusNeverUpdated"
    assert condition(await env.client.get("nodes", "healthy"), "Ready")["status"] == "True"

    async def tainted() -> Any:
        node = await env.client.get("nodes", "lost")
        return node if {("node.kubernetes.io/unreachable", "NoSchedule"),
                        ("node.kubernetes.io/unreachable", "NoExecute")} <= taint_keys(node) else None
    node = await env.tick_until(tainted, "the unreachable taints")
    added = next(x["timeAdded"] for x in node["spec"]["taints"] if x["effect"] == "NoExecute")
    assert not (await env.client.get("nodes", "healthy"))["spec"].get("taints")

    async def not_ready() -> bool:
        return condition(await env.client.get("pods", "web", "default"), "Ready")["status"] == "False"
    await env.tick_until(not_ready, "the pod to be marked NotReady")
    assert await events(env.client, "web", "NodeNotReady")
    node_events = await wait_for(lambda: events(env.client, "lost", "NodeNotReady"), what="the node's event")
    assert node_events[0]["message"] == "Node lost status is now: NodeNotReady"
    assert node_events[0]["involvedObject"]["kind"] == "Node"

    await env.tick_until(lambda: pod_gone(env.client, "web"), "the eviction of the pod", limit=2 * TOLERATION)
    assert env.clock.wall() >= datetime.fromisoformat(added).timestamp() + TOLERATION
    marked = await events(env.client, "web", "TaintManagerEviction")
    assert marked[0]["message"] == "Marking for deletion Pod default/web"
    assert not await pod_gone(env.client, "forever")  # tolerates unreachable for ever


async def test_node_back_loses_taints_and_cancels_evictions(env: Env) -> None:
    await ready_node(env, "healthy")
    await ready_node(env, "flaky")
    await running_pod(env, "web", "flaky")

    async def tainted() -> bool:
        return ("node.kubernetes.io/unreachable", "NoExecute") in taint_keys(await env.client.get("nodes", "flaky"))
    await env.tick_until(tainted, "the unreachable taint")
    # the kubelet is back: it renews its Lease and posts Ready
    now = rfc3339(env.clock.wall())
    await env.client.patch_status("nodes", "flaky", {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
         "lastTransitionTime": now}]}}, "strategic")

    async def untainted() -> bool:
        return not taint_keys(await env.client.get("nodes", "flaky"))
    await env.tick_until(untainted, "the taints to go", healthy=("healthy", "flaky"))
    cancelled = await wait_for(lambda: events(env.client, "web", "TaintManagerEviction"), what="the cancellation")
    assert cancelled[0]["message"] == "Cancelling deletion of Pod default/web"
    for _ in range(TOLERATION + 5):  # well past the toleration: the pod stays
        await env.heartbeat("healthy", "flaky")
        env.clock.step(1.0)
    assert not await pod_gone(env.client, "web")


async def test_untolerated_no_execute_taint_evicts_at_once(env: Env) -> None:
    await ready_node(env, "healthy")
    await running_pod(env, "victim", "healthy")
    await running_pod(env, "survivor", "healthy", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    await env.client.patch("nodes", "healthy", {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
    await wait_for(lambda: pod_gone(env.client, "victim"), what="the untolerating pod to be deleted")
    assert not await pod_gone(env.client, "survivor")


async def test_cordoned_node_gets_the_unschedulable_taint(env: Env) -> None:
    await ready_node(env, "healthy")
    await env.client.patch("nodes", "healthy", {"spec": {"unschedulable": True}})

    async def cordoned() -> bool:
        return ("node.kubernetes.io/unschedulable", "NoSchedule") in taint_keys(await env.client.get("nodes",
                                                                                                     "healthy"))
    await wait_for(cordoned, what="the unschedulable taint")


async def test_default_toleration_seconds_admission_is_configurable(env: Env) -> None:
    created = await env.client.create("pods", pod("p"), "default")
    tolerations = {(x["key"], x.get("tolerationSeconds")) for x in created["spec"]["tolerations"]}
    assert tolerations == {("node.kubernetes.io/not-ready", TOLERATION), ("node.kubernetes.io/unreachable", TOLERATION)}
    everything = await env.client.create("pods", pod("q", tolerations=[{"operator": "Exists"}]), "default")
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_min_toleration_seconds_uses_the_first_matching_toleration() -> None:
    taints = [{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoExecute"}]
    assert toleration_seconds(taints, [{"key": "a", "operator": "Exists", "tolerationSeconds": 20},
                                       {"key": "b", "operator": "Exists", "tolerationSeconds": 5}]) == 5
    assert toleration_seconds(taints, [{"key": "a", "operator": "Exists"}]) == 0  # b is not tolerated
    assert toleration_seconds(taints, [{"operator": "Exists"}]) is None
    assert toleration_seconds(taints, [{"operator": "Exists", "effect": "NoSchedule"}]) == 0


def test_owned_taints_follow_conditions_and_others_are_kept() -> None:
    node = {"spec": {"taints": [{"key": "mine", "effect": "NoSchedule"},
                                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "x"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"},
                                      {"type": "DiskPressure", "status": "True"}]}}
    taints = reconciled_taints(node, 0.0)
    assert taints is not None
    assert {(x["key"], x["effect"]) for x in taints} == {
        ("mine", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/disk-pressure", "NoSchedule")}
    assert next(x for x in taints if x["effect"] == "NoExecute")["timeAdded"] == "x"  # kept as it was
    node["spec"]["taints"] = taints
    assert reconciled_taints(node, 0.0) is None


def test_taint_eviction_looks_again_only_when_taints_tolerations_or_placement_change() -> None:
    """kube's taint eviction NodeUpdated / PodUpdated return early unless the node's NoExecute taints, or the
    pod's node or tolerations, changed: heartbeats and pod status writes do not requeue every pod of a node."""
    from kinformer.cluster.controllers.tainteviction import NoExecuteTaintsChanged, PodPlacementChanged

    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}
    beat = {**node, "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:00:10Z"}]}}
    tainted = {**node, "spec": {"taints": [*node["spec"]["taints"],
                                           {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}}
    nodes = NoExecuteTaintsChanged()
    assert not nodes.update(node, beat) and nodes.update(beat, tainted) and nodes.update(node, beat, is_resync=True)

    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}
    running = {**pod, "status": {"phase": "Running"}}
    tolerating = {**running, "spec": {"nodeName": "n", "tolerations": [{"operator": "Exists"}]}}
    deleted = {**running, "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    pods = PodPlacementChanged()
    assert not pods.update(pod, running)
    assert pods.update(running, tolerating) and pods.update(running, deleted)


def test_taint_eviction_is_handed_pods_on_no_execute_tainted_nodes_and_pods_with_an_eviction() -> None:
    """``TaintEviction.may_act`` (the pods watch's accepts): a pod on a node the cache shows with a NoExecute
    taint, or one with an eviction scheduled (its change may cancel it, e.g. its deletion); an unassigned pod
    or one on an untainted node is not looked at (a node tainted later wakes its pods through the nodes watch)."""
    from types import SimpleNamespace

    from kinformer.cache.store import Indexer, meta_namespace_key
    from kinformer.cluster.controllers.tainteviction import TaintEviction
    from kinformer.controller import Request

    nodes: Indexer = Indexer(meta_namespace_key)
    nodes.add({"metadata": {"name": "calm"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})
    nodes.add({"metadata": {"name": "stormy"}, "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
    nodes.add({"metadata": {"name": "bare"}, "spec": {}})
    nodes.add({"metadata": {"name": "untainted"}, "spec": {"taints": []}})
    ctx = SimpleNamespace(client=None, clock=FakeClock(), recorder=lambda _name: None)
    eviction = TaintEviction(ctx, SimpleNamespace(), SimpleNamespace(indexer=nodes))  # type: ignore[arg-type]

    def on(node: str | None) -> dict[str, Any]:
        return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": node} if node else {}}

    assert eviction.may_act(on("stormy"))
    assert not eviction.may_act(on("calm")) and not eviction.may_act(on(None)) and not eviction.may_act(on("gone"))
    assert not eviction.may_act(on("bare")) and not eviction.may_act(on("untainted"))
    eviction.scheduled[Request("default", "p")] = 0.0
    assert eviction.may_act(on("calm")) and eviction.may_act(on(None))
