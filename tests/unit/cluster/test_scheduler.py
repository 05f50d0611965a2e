"""kube-scheduler in the cluster: filters, kube's FitError message, events, retries and the assume cache
(kube's pkg/scheduler unit and integration tests assert the same outcomes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cluster_helpers import condition, events, wait_for
from kinformer.client import Client
from kinformer.cluster import ClusterOptions
from kinformer.cluster.podresources import pod_requests
from kinformer.server import APIServer
from unit.cluster._hsched_helpers import add_node, pod

OPTIONS = ClusterOptions(scheduler_pod_initial_backoff=0.05, scheduler_pod_max_backoff=0.2)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with APIServer(controllers=["scheduler"], cluster_options=OPTIONS) as server, \
            Client(server.url) as client:
        yield client


async def bound_to(client: Client, name: str) -> str:
    async def probe() -> str | None:
        return (await client.get("pods", name, "default"))["spec"].get("nodeName")
    return str(await wait_for(probe, what=f"pod {name} to be bound"))


async def unschedulable(client: Client, name: str) -> Any:
    async def probe() -> Any:
        cond = condition(await client.get("pods", name, "default"), "PodScheduled")
        return cond if cond and cond["status"] == "False" and cond["reason"] == "Unschedulable" else None
    return await wait_for(probe, what=f"pod {name} to be unschedulable")


async def test_pod_is_bound_with_scheduled_event_and_condition(client: Client) -> None:
    await add_node(client, "node-a")
    await client.create("pods", pod("web"), "default")
    assert await bound_to(client, "web") == "node-a"
    assert condition(await client.get("pods", "web", "default"), "PodScheduled")["status"] == "True"
    scheduled = await wait_for(lambda: events(client, "web", "Scheduled"), what="the Scheduled event")
    assert scheduled[0]["message"] == "Successfully assigned default/web to node-a"
    assert scheduled[0]["type"] == "Normal"
    assert scheduled[0]["reportingComponent"] == "default-scheduler"
    assert scheduled[0]["involvedObject"]["kind"] == "Pod"


async def test_other_scheduler_and_gated_pods_are_left_alone(client: Client) -> None:
    await add_node(client, "node-a")
    await client.create("pods", pod("other", schedulerName="my-scheduler"), "default")
    await client.create("pods", pod("gated", schedulingGates=[{"name": "wait"}]), "default")
    await client.create("pods", pod("mine"), "default")
    await bound_to(client, "mine")  # the scheduler has run past the two others by now
    for name in ("other", "gated"):
        assert not (await client.get("pods", name, "default"))["spec"].get("nodeName")


async def test_least_allocated_node_wins(client: Client) -> None:
    await add_node(client, "node-a", cpu="4")
    await add_node(client, "node-b", cpu="4")
    await client.create("pods", pod("first", cpu="3", memory="1Gi", nodeName="node-a"), "default")
    await client.create("pods", pod("second", cpu="1", memory="1Gi"), "default")
    assert await bound_to(client, "second") == "node-b"


async def test_filters_message_matches_kube(client: Client) -> None:
    """One node per filter; the message is kube's FitError with its histogram and preemption part."""
    await add_node(client, "cordoned", unschedulable=True)
    await add_node(client, "tainted", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    await add_node(client, "evicting", taints=[{"key": "gone", "effect": "NoExecute"}])
    await add_node(client, "small", cpu="1")
    await add_node(client, "smaller", cpu="1", memory="1Gi")
    await add_node(client, "full", pods=0)
    await add_node(client, "unlabelled", cpu="8")
    await add_node(client, "labelled", cpu="1", labels={"disk": "ssd"})
    body = pod("big", cpu="2", memory="2Gi", nodeSelector={"disk": "ssd"},
               tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}])
    await client.create("pods", body, "default")
    cond = await unschedulable(client, "big")
    # every node but "labelled" fails the nodeSelector before resources are looked at
    assert cond["message"] == (
        "0/8 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: db}, "
        "1 node(s) had untolerated taint {gone: }, 1 node(s) were unschedulable, "
        "4 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/8 nodes are available: 1 No preemption victims found for incoming pod, "
        "7 Preemption is not helpful for scheduling.")
    failed = await wait_for(lambda: events(client, "big", "FailedScheduling"), what="the FailedScheduling event")
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == cond["message"]


async def test_resource_shortfalls_each_count_and_too_many_pods(client: Client) -> None:
    await add_node(client, "a", cpu="1", memory="1Gi")
    await add_node(client, "b", cpu="1", memory="1Gi", extra={"example.com/gpu": "1"})
    await add_node(client, "c", pods=0)
    body = pod("hungry", cpu="2", memory="2Gi", preemptionPolicy="Never")
    body["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "2"
    await client.create("pods", body, "default")
    cond = await unschedulable(client, "hungry")
    assert cond["message"] == (
        "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient memory, "
        "3 Insufficient example.com/gpu. preemption: not eligible due to preemptionPolicy=Never.")


async def test_no_nodes_message(client: Client) -> None:
    await client.create("pods", pod("lonely"), "default")
    assert (await unschedulable(client, "lonely"))["message"] == "no nodes available to schedule pods"


async def test_tolerations_node_name_and_unschedulable_toleration(client: Client) -> None:
    await add_node(client, "tainted", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"},
                                                         {"key": "soft", "effect": "PreferNoSchedule"}])
    await add_node(client, "cordoned", unschedulable=True)
    tolerant = pod("tolerant", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "db"}])
    await client.create("pods", tolerant, "default")
    assert await bound_to(client, "tolerant") == "tainted"
    cordon_ok = pod("cordon-ok", affinity=_required([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["cordoned"]}]}]),
        tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}])
    await client.create("pods", cordon_ok, "default")
    assert await bound_to(client, "cordon-ok") == "cordoned"


def _required(terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


@pytest.mark.parametrize(("expression", "expected"), [
    ({"key": "zone", "operator": "In", "values": ["b"]}, "zb"),
    ({"key": "zone", "operator": "NotIn", "values": ["a", "b"]}, "none"),
    ({"key": "gpu", "operator": "Exists"}, "zb"),
    ({"key": "zone", "operator": "DoesNotExist"}, "none"),
    ({"key": "cores", "operator": "Gt", "values": ["8"]}, "zb"),
    ({"key": "cores", "operator": "Lt", "values": ["8"]}, "za"),
])
async def test_required_node_affinity_operators(client: Client, expression: dict[str, Any], expected: str) -> None:
    await add_node(client, "za", labels={"zone": "a", "cores": "4"})
    await add_node(client, "zb", labels={"zone": "b", "gpu": "yes", "cores": "16"})
    await add_node(client, "none", labels={"cores": "x"})
    await client.create("pods", pod("picky", affinity=_required([{"matchExpressions": [expression]}])), "default")
    assert await bound_to(client, "picky") == expected


async def test_unschedulable_pod_is_retried_when_a_node_appears(client: Client) -> None:
    await add_node(client, "small", cpu="1")
    await client.create("pods", pod("waiting", cpu="2"), "default")
    await unschedulable(client, "waiting")
    await add_node(client, "large", cpu="4")
    assert await bound_to(client, "waiting") == "large"


async def test_unschedulable_pod_is_retried_when_an_assigned_pod_goes(client: Client) -> None:
    await add_node(client, "only", cpu="2")
    await client.create("pods", pod("hog", cpu="2", nodeName="only"), "default")
    await client.create("pods", pod("next", cpu="1"), "default")
    await unschedulable(client, "next")
    await client.delete("pods", "hog", "default", grace_period_seconds=0)
    assert await bound_to(client, "next") == "only"


async def test_twenty_pods_at_once_never_overcommit(client: Client) -> None:
    """Each node fits 4 pods of 1 cpu: 12 are bound, 8 stay pending, and no node holds more than 4."""
    for name in ("n1", "n2", "n3"):
        await add_node(client, name, cpu="4")
    for i in range(20):
        await client.create("pods", pod(f"p{i:02d}", cpu="1"), "default")

    async def settled() -> list[Any] | None:
        pods = (await client.list("pods", "default")).items
        bound = [p for p in pods if p["spec"].get("nodeName")]
        pending = [p for p in pods if (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable"]
        return pods if len(bound) == 12 and len(pending) == 8 else None

    pods = await wait_for(settled, what="12 pods bound and 8 unschedulable", timeout=30)
    per_node: dict[str, int] = {}
    for p in pods:
        if p["spec"].get("nodeName"):
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
    assert per_node == {"n1": 4, "n2": 4, "n3": 4}


async def test_a_cycle_reads_the_requests_of_only_the_pods_that_changed(client: Client,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """kube's scheduler cache: a bound pod's usage is computed when the informer shows it bound and kept until
    the pod changes, so scheduling pods one after another costs a few requests computations per pod, not one
    per pod already on a node (which made 300 pods quadratic)."""
    import kinformer.cluster.schedcache as cache_module
    import kinformer.cluster.scheduler as scheduler_module

    computed: list[str] = []

    def counting(pod: Any) -> dict[str, int]:
        computed.append(pod["metadata"]["name"])
        return pod_requests(pod)

    monkeypatch.setattr(scheduler_module, "pod_requests", counting)
    monkeypatch.setattr(cache_module, "pod_requests", counting)
    await add_node(client, "node-a", pods=110)
    for i in range(20):
        await client.create("pods", pod(f"p{i:02d}"), "default")
        await bound_to(client, f"p{i:02d}")
    assert 20 <= len(computed) <= 3 * 20, f"{len(computed)} computations for 20 pods"


async def test_a_binding_that_fails_is_scheduled_again(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """kube's handleSchedulingFailure: the binding cycle's error forgets the assumed pod and queues it again."""
    from kinformer.errors import ServerError

    refused: list[str] = []
    create = Client.create

    async def refuse_first_binding(self: Client, resource: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "binding" and not refused:
            refused.append(body["metadata"]["name"])
            raise ServerError("etcdserver: request timed out")
        return await create(self, resource, body, *args, **kwargs)

    monkeypatch.setattr(Client, "create", refuse_first_binding)
    await add_node(client, "node-a")
    await client.create("pods", pod("web"), "default")
    assert await bound_to(client, "web") == "node-a"
    assert refused == ["web"]


def test_pod_requests_take_init_container_max_sidecars_and_overhead() -> None:
    body = pod("p", cpu="500m", memory="1Gi", overhead={"cpu": "100m"}, initContainers=[
        {"name": "init", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}},
        {"name": "sidecar", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
    ])
    assert pod_requests(body) == {"cpu": 2100, "memory": 1024 ** 3}
    body["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "100m"
    assert pod_requests(body) == {"cpu": 850, "memory": 1024 ** 3}


async def test_node_name_affinity_prefilter_message(client: Client) -> None:
    """A DaemonSet-style pod pinned by matchFields metadata.name to a full node (kube's NodeAffinity PreFilter)."""
    await add_node(client, "target", pods=0)
    await add_node(client, "other-1")
    await add_node(client, "other-2")
    pinned = _required([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["target"]}]}])
    await client.create("pods", pod("pinned", affinity=pinned), "default")
    assert (await unschedulable(client, "pinned"))["message"] == (
        "0/3 nodes are available: 1 Too many pods, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling.")
    conflicting = _required([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                                              {"key": "metadata.name", "operator": "In", "values": ["b"]}]}])
    await client.create("pods", pod("conflict", affinity=conflicting), "default")
    assert (await unschedulable(client, "conflict"))["message"] == (
        "0/3 nodes are available: pod affinity terms conflict. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")


def test_bad_scheduler_options_are_refused() -> None:
    with pytest.raises(ValueError, match="scheduler_pod_max_backoff must be > 0"):
        ClusterOptions(scheduler_pod_max_backoff=0)


async def test_host_port_taken_on_a_node_sends_the_pod_elsewhere(client: Client) -> None:
    await add_node(client, "a")
    await add_node(client, "b", cpu="1")  # less room: "a" would win on score alone
    port = {"containerPort": 80, "hostPort": 8080}
    holder = pod("holder", nodeName="a")
    holder["spec"]["containers"][0]["ports"] = [port]
    await client.create("pods", holder, "default")
    second = pod("second")
    second["spec"]["containers"][0]["ports"] = [port]
    await client.create("pods", second, "default")
    assert await bound_to(client, "second") == "b"


def test_the_pending_pods_watch_is_handed_pods_to_place_and_pods_waiting_as_unschedulable() -> None:
    """``Scheduler.concerns`` (the primary watch's accepts): unbound pods of this scheduler, and a pod in the
    unschedulable set whatever it became (its reconcile drops it from the set); nothing else."""
    from types import SimpleNamespace

    from kinformer.cluster.scheduler import Backoff, Scheduler
    from kinformer.controller import Request

    waiting = pod("waiting")
    scheduler = SimpleNamespace(unschedulable={})
    bound = {**waiting, "spec": {**waiting["spec"], "nodeName": "n1"}}
    other = {**waiting, "spec": {**waiting["spec"], "schedulerName": "other"}}
    assert Scheduler.concerns(scheduler, waiting)
    assert not Scheduler.concerns(scheduler, bound) and not Scheduler.concerns(scheduler, other)
    scheduler.unschedulable[Request.for_object(waiting)] = Backoff(1, 0.0)
    assert Scheduler.concerns(scheduler, bound) and Scheduler.concerns(scheduler, other)
