"""The pod garbage collector on a fake clock: the pods of a deleted node go after the quarantine (so a
DaemonSet's pod leaves with its node), terminated pods beyond the threshold go oldest first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from _hsets_helpers import NS, add_node, kubelet, pods, set_phase

from cluster_helpers import wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.server import APIServer

OPTIONS = ClusterOptions(pod_gc_period=1.0, pod_gc_quarantine=4.0, terminated_pod_gc_threshold=2)


@pytest.fixture
async def env() -> AsyncIterator[tuple[Client, FakeClock]]:
    clock = FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    async with APIServer(clock=clock, controllers=["daemonset", "pod-garbage-collector"],
                         cluster_options=OPTIONS) as server, Client(server.url) as client:
        yield client, clock


async def tick_until(clock: FakeClock, probe: Any, what: str, limit: float = 30.0) -> float:
    """Advance the fake clock a second at a time until ``probe()``; returns the fake seconds it took."""
    start = clock.now()

    async def step() -> Any:
        if await probe():
            return clock.now() - start or 0.001
        assert clock.now() - start < limit, f"{what}: not after {limit} s of fake time"
        clock.step(1.0)
        return None

    return float(await wait_for(step, what=what, timeout=60))


async def test_pods_of_a_deleted_node_are_collected_after_the_quarantine(env: tuple[Client, FakeClock]) -> None:
    client, clock = env
    await add_node(client, "node-1")
    await add_node(client, "node-2")
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": NS},
                 "spec": {"selector": {"matchLabels": {"app": "ds"}},
                          "template": {"metadata": {"labels": {"app": "ds"}},
                                       "spec": {"containers": [{"name": "app", "image": "httpd"}]}}}}
    async with kubelet(client, "app=ds", schedule=True):
        await client.create("daemonsets", daemonset)

        async def bound(nodes: set[str]) -> bool:
            return {p["spec"].get("nodeName") for p in await pods(client, "app=ds")} == nodes

        await wait_for(lambda: bound({"node-1", "node-2"}), what="a pod bound on each node")
        await client.delete("nodes", "node-1")
        took = await tick_until(clock, lambda: bound({"node-2"}), "node-1's pod collected")
    assert took >= 4.0  # not before the quarantine


async def test_terminated_pods_beyond_the_threshold_are_collected_oldest_first(
        env: tuple[Client, FakeClock]) -> None:
    client, clock = env
    for i in range(4):
        pod = await client.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"done-{i}", "namespace": NS, "labels": {"app": "done"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        await set_phase(client, pod, "Succeeded")
        clock.step(1.0)  # distinct creation times

    async def two_left() -> bool:
        return [p["metadata"]["name"] for p in await pods(client, "app=done")] == ["done-2", "done-3"]

    await tick_until(clock, two_left, "the two oldest terminated pods collected")
