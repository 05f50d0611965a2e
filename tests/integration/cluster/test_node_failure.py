"""A node that dies, end to end: the scheduler, node lifecycle and taint eviction together on a fake clock.

The test plays the kubelets (it renews the Leases of the nodes that live). A pod scheduled onto the node
that dies is evicted after the DefaultTolerationSeconds admission's tolerationSeconds, and a pod created
meanwhile is scheduled around the node's unreachable taint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import pytest

from cluster_helpers import wait_for
from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.errors import NotFound
from kinformer.server import APIServer
from unit.cluster._hsched_helpers import Env, pod, ready_node

TOLERATION = 20
CONTROLLERS = ["scheduler", "nodelifecycle", "taint-eviction-controller"]


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    clock = FakeClock(wall_start=datetime(2026, 1, 1).timestamp())
    options = ClusterOptions(node_monitor_period=1.0, node_monitor_grace_period=6.0)
    async with APIServer(clock=clock, controllers=CONTROLLERS, cluster_options=options,
                         default_toleration_seconds=TOLERATION) as server, Client(server.url) as client:
        yield Env(server, client, clock)


async def node_of(client: Client, name: str) -> str:
    async def probe() -> str | None:
        return (await client.get("pods", name, "default"))["spec"].get("nodeName")
    return str(await wait_for(probe, what=f"pod {name} to be bound"))


async def test_pods_leave_a_dead_node_and_new_pods_avoid_it(env: Env) -> None:
    await ready_node(env, "alive")
    await ready_node(env, "doomed")
    # "alive" is busier, so the first pod lands on "doomed"
    await env.client.create("pods", pod("busy", cpu="3", nodeName="alive"), "default")
    await env.client.create("pods", pod("web", cpu="1"), "default")
    assert await node_of(env.client, "web") == "doomed"

    async def doomed_tainted() -> bool:
        node = await env.client.get("nodes", "doomed")
        return any(x["key"] == "node.kubernetes.io/unreachable" for x in node["spec"].get("taints") or ())
    await env.tick_until(doomed_tainted, "the dead node's taint", healthy=("alive",))
    await env.client.create("pods", pod("late", cpu="500m"), "default")
    assert await node_of(env.client, "late") == "alive"

    async def evicted() -> bool:
        try:
            await env.client.get("pods", "web", "default")
        except NotFound:
            return True
        return False
    await env.tick_until(evicted, "the eviction", healthy=("alive",), limit=3 * TOLERATION)
