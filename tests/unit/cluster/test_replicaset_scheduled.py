"""The replicaset controller with kube-scheduler on Node objects: scale-down deletes pods doubled up on a node
before the only pod on another node (``getPodsRankedByRelatedPodsOnSameNode``)."""

from __future__ import annotations

import pytest
from _hdeploy_helpers import NS, mark_all_ready, pods, replicaset
from _hsched_helpers import add_node

import kinformer as ki
from cluster_helpers import wait_for
from kinformer.server import APIServer

pytestmark = pytest.mark.timeout(60)


async def test_scale_down_deletes_a_pod_doubled_up_on_a_node_first() -> None:
    async with APIServer(storage="memory", controllers=["replicaset", "scheduler"]) as server, \
            ki.Client(server.url) as client:
        await add_node(client, "node-a")
        await client.create("replicasets", replicaset("spread", 2, {"app": "spread"}), namespace=NS)
        await wait_for(lambda: _scheduled(client, 2), what="2 pods scheduled")
        await add_node(client, "node-b")
        await client.patch("replicasets", "spread", {"spec": {"replicas": 3}}, namespace=NS)
        placed = await wait_for(lambda: _scheduled(client, 3), what="3 pods scheduled")
        by_node: dict[str, list[str]] = {}
        for pod in placed:
            by_node.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
        crowded = next(names for names in by_node.values() if len(names) == 2)
        await mark_all_ready(client, "app=spread")
        await client.patch("replicasets", "spread", {"spec": {"replicas": 2}}, namespace=NS)
        left = await wait_for(lambda: _count(client, 2), what="2 pods left")
        assert {p["spec"]["nodeName"] for p in left} == set(by_node)  # one pod per node is kept
        assert len({p["metadata"]["name"] for p in left} & set(crowded)) == 1


async def _scheduled(client: ki.Client, n: int) -> list | None:
    found = [p for p in await pods(client, "app=spread") if p["spec"].get("nodeName")]
    return found if len(found) == n else None


async def _count(client: ki.Client, n: int) -> list | None:
    found = await pods(client, "app=spread")
    return found if len(found) == n else None
