"""Simulated nodes: registration (as the kubelet registers its Node), Lease renewals and Ready heartbeats on the
cluster's clock, and stop_node/start_node and the ``kinformer.io/stopped`` annotation they write (kube's node
e2e: a node whose kubelet stops posts nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from cluster_helpers import condition, wait_for, wait_for_object
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.cluster.metatime import rfc3339
from kinformer.cluster.nodes import NODE_LEASE_NAMESPACE, STOPPED_ANNOTATION, micro_time
from kinformer.server import APIServer

OPTIONS = ClusterOptions(node_lease_renew_interval=10.0, node_status_update_frequency=10.0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_start=1_800_000_000.0)


@pytest.fixture
async def fake_cluster(clock: FakeClock) -> AsyncIterator[tuple[APIServer, Client]]:
    async with APIServer(clock=clock, nodes=2, cluster_options=OPTIONS, compaction_interval=0) as server, \
            Client(server.url) as client:
        yield server, client


async def test_nodes_register_with_labels_capacity_conditions_and_addresses() -> None:
    options = ClusterOptions(node_cpu="8", node_memory="32Gi")
    async with APIServer(nodes=3, cluster_options=options) as server, Client(server.url) as client:
        nodes = {n["metadata"]["name"]: n for n in (await client.list("nodes")).items}
        assert sorted(nodes) == ["node-1", "node-2", "node-3"]
        node = nodes["node-2"]
        assert dict(node["metadata"]["labels"]).items() >= {"kubernetes.io/hostname": "node-2",
                                                           "kubernetes.io/os": "linux",
                                                           "kubernetes.io/arch": "amd64"}.items()
        assert node["spec"]["podCIDR"] == "10.244.2.0/24" and node["spec"]["podCIDRs"] == ["10.244.2.0/24"]
        status = node["status"]
        assert status["capacity"]["cpu"] == "8" and status["allocatable"]["memory"] == "32Gi"
        assert status["capacity"]["pods"] == "110"
        ready = condition(node, "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
        assert {condition(node, k)["status"] for k in ("MemoryPressure", "DiskPressure", "PIDPressure")} == {"False"}
        assert {"type": "InternalIP", "address": "172.18.0.3"} in status["addresses"]
        info = status["nodeInfo"]
        assert info["kubeletVersion"].startswith("v1.") and info["operatingSystem"] == "linux"
        lease = await client.get("leases", "node-2", NODE_LEASE_NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "node-2"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        owner = dict(lease["metadata"]["ownerReferences"][0])
        assert owner.items() >= {"kind": "Node", "name": "node-2", "uid": node["metadata"]["uid"]}.items()


async def test_lease_is_renewed_every_renew_interval(fake_cluster: tuple[APIServer, Client],
                                                     clock: FakeClock) -> None:
    _, client = fake_cluster
    first = (await client.get("leases", "node-1", NODE_LEASE_NAMESPACE))["spec"]["renewTime"]
    assert first == micro_time(clock.wall())
    clock.step(9.0)
    clock.step(1.0)
    await wait_for_object(client, "leases", "node-1", lambda o: o["spec"]["renewTime"] == micro_time(clock.wall()),
                          NODE_LEASE_NAMESPACE)


async def test_ready_heartbeat_advances_and_transition_time_stays(fake_cluster: tuple[APIServer, Client],
                                                                  clock: FakeClock) -> None:
    _, client = fake_cluster
    before = condition(await client.get("nodes", "node-1"), "Ready")
    clock.step(10.0)
    node = await wait_for_object(client, "nodes", "node-1",
                                 lambda o: condition(o, "Ready")["lastHeartbeatTime"] == rfc3339(clock.wall()))
    assert condition(node, "Ready")["lastTransitionTime"] == before["lastTransitionTime"]


async def _assert_node_1_silent(client: Client, clock: FakeClock, stopped_at: str) -> None:
    """Step past every period: node-2 renews and posts, node-1 (stopped) does neither."""
    clock.step(10.0)
    # node-2, woken by the same step, is the barrier: once it renewed, node-1 would have too
    await wait_for_object(client, "leases", "node-2", lambda o: o["spec"]["renewTime"] == micro_time(clock.wall()),
                          NODE_LEASE_NAMESPACE)
    await wait_for_object(client, "nodes", "node-2",
                          lambda o: condition(o, "Ready")["lastHeartbeatTime"] == rfc3339(clock.wall()))
    assert (await client.get("leases", "node-1", NODE_LEASE_NAMESPACE))["spec"]["renewTime"] == stopped_at
    assert condition(await client.get("nodes", "node-1"), "Ready")["lastHeartbeatTime"] != rfc3339(clock.wall())


async def _wait_renewed(client: Client, clock: FakeClock) -> None:
    await wait_for_object(client, "leases", "node-1", lambda o: o["spec"]["renewTime"] == micro_time(clock.wall()),
                          NODE_LEASE_NAMESPACE)


async def test_stop_node_stops_heartbeats_and_renewals_until_started(fake_cluster: tuple[APIServer, Client],
                                                                      clock: FakeClock) -> None:
    server, client = fake_cluster
    assert server.cluster is not None
    stopped_at = (await client.get("leases", "node-1", NODE_LEASE_NAMESPACE))["spec"]["renewTime"]
    await server.cluster.stop_node("node-1")
    assert (await client.get("nodes", "node-1"))["metadata"]["annotations"][STOPPED_ANNOTATION] == "true"
    await _assert_node_1_silent(client, clock, stopped_at)
    await server.cluster.start_node("node-1")
    assert STOPPED_ANNOTATION not in (await client.get("nodes", "node-1"))["metadata"]["annotations"]
    await _wait_renewed(client, clock)


@pytest.mark.parametrize("started_by", ["removed", "false"])
async def test_stopped_annotation_stops_the_kubelet_until_removed(fake_cluster: tuple[APIServer, Client],
                                                                   clock: FakeClock, started_by: str) -> None:
    """``kubectl annotate node node-1 kinformer.io/stopped=true`` is stop_node; removing it (or "false") starts."""
    server, client = fake_cluster
    assert server.cluster is not None and server.cluster.node_agents is not None
    agents = server.cluster.node_agents
    stopped_at = (await client.get("leases", "node-1", NODE_LEASE_NAMESPACE))["spec"]["renewTime"]
    await client.patch("nodes", "node-1", {"metadata": {"annotations": {STOPPED_ANNOTATION: "true"}}}, "merge")
    async with asyncio.timeout(10):
        await agents.wait_running("node-1", running=False)
    await _assert_node_1_silent(client, clock, stopped_at)
    value = None if started_by == "removed" else "false"
    await client.patch("nodes", "node-1", {"metadata": {"annotations": {STOPPED_ANNOTATION: value}}}, "merge")
    async with asyncio.timeout(10):
        await agents.wait_running("node-1", running=True)
    clock.step(10.0)
    await _wait_renewed(client, clock)


async def test_stop_node_of_unknown_node_names_the_known_ones() -> None:
    async with APIServer(nodes=1) as server:
        assert server.cluster is not None
        with pytest.raises(KeyError, match="known: node-1"):
            await server.cluster.stop_node("node-9")


async def test_deleted_node_registers_again(fake_cluster: tuple[APIServer, Client], clock: FakeClock) -> None:
    _, client = fake_cluster
    old = (await client.get("nodes", "node-1"))["metadata"]["uid"]
    await client.delete("nodes", "node-1")
    clock.step(10.0)

    async def registered_anew() -> bool:
        clock.step(1.0)  # the kubelet retries on its clock
        nodes = {n["metadata"]["name"]: n for n in (await client.list("nodes")).items}
        return "node-1" in nodes and nodes["node-1"]["metadata"]["uid"] != old

    await wait_for(registered_anew, what="node-1 registered again")
