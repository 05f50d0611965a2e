"""Shared by the scheduler, node lifecycle and taint eviction tests: Node and Pod bodies, and bounded waits.

No kubelet runs in these tests: nodes are created directly with their capacity, and a test renews a
node's Lease itself where it plays the kubelet's heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster_helpers import running_status, wait_for
from kinformer.client import Client
from kinformer.clock import Clock, FakeClock
from kinformer.cluster.metatime import rfc3339
from kinformer.controller.leaderelection import micro_time
from kinformer.errors import NotFound
from kinformer.server import APIServer

NODE_LEASE_NAMESPACE = "kube-node-lease"


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110, labels: Mapping[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, unschedulable: bool = False,
         extra: Mapping[str, str] | None = None, ready: str | None = None,
         clock: Clock | None = None) -> dict[str, Any]:
    """A Node offering ``cpu``/``memory``/``pods`` (capacity = allocatable), optionally Ready as of ``clock``."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi", **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"capacity": resources, "allocatable": resources}
    if ready is not None:
        assert clock is not None
        now = rfc3339(clock.wall())
        status["conditions"] = [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                                 "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                                 "lastTransitionTime": now}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": status}


async def add_node(client: Client, name: str, **options: Any) -> Any:
    """Create the :func:`node` ``name``, then write its status (this server resets a new Node's status, as it
    resets every built-in's with a status subresource)."""
    body = node(name, **options)
    await client.create("nodes", {k: v for k, v in body.items() if k != "status"})
    return await client.patch_status("nodes", name, {"status": body["status"]}, "merge")


def pod(name: str, *, cpu: str | None = None, memory: str | None = None, namespace: str = "default",
        **spec: Any) -> dict[str, Any]:
    """A one-container Pod requesting ``cpu``/``memory``; ``spec`` entries are merged into its spec."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [container], **spec}}


async def renew_lease(client: Client, node_name: str, clock: Clock) -> None:
    """Play the kubelet's heartbeat: create or renew the node's Lease in kube-node-lease."""
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node_name, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {"holderIdentity": node_name, "leaseDurationSeconds": 40, "renewTime": micro_time(clock.wall())}}
    try:
        await client.patch("leases", node_name, {"spec": {"renewTime": micro_time(clock.wall())}}, "merge",
                           NODE_LEASE_NAMESPACE)
    except NotFound:
        await client.create("leases", body, NODE_LEASE_NAMESPACE)


@dataclass
class Env:
    """A server (and its cluster) on a fake clock, with a client: where the node tests play the kubelets."""

    server: APIServer
    client: Client
    clock: FakeClock

    async def heartbeat(self, *nodes: str) -> None:
        """Renew the nodes' Leases and wait until the cluster's Lease informer saw the renewals."""
        assert self.server.cluster is not None
        leases = self.server.cluster.manager.informer("leases", namespace=NODE_LEASE_NAMESPACE)
        for name in nodes:
            await renew_lease(self.client, name, self.clock)
        want = micro_time(self.clock.wall())

        async def seen() -> bool:
            return all((leases.indexer.get_by_key(f"{NODE_LEASE_NAMESPACE}/{n}") or {}).get("spec", {})
                       .get("renewTime") == want for n in nodes)
        await wait_for(seen, what=f"the renewals of {nodes}")

    async def tick_until(self, probe: Any, what: str, *, healthy: tuple[str, ...] = ("healthy",),
                         limit: float = 120.0) -> Any:
        """Advance the clock a second at a time, the ``healthy`` nodes heartbeating, until ``probe()``."""
        start = self.clock.now()

        async def step() -> Any:
            value = await probe()
            if value:
                return value
            assert self.clock.now() - start < limit, f"{what}: not after {limit}s of fake time"
            await self.heartbeat(*healthy)
            self.clock.step(1.0)
            return None
        return await wait_for(step, what=what, timeout=60)


async def running_pod(env: Env, name: str, node_name: str, **spec: Any) -> None:
    """Play the kubelet: a pod bound to ``node_name``, Running and Ready."""
    created = await env.client.create("pods", pod(name, nodeName=node_name, **spec), "default")
    status = running_status(created, since=rfc3339(env.clock.wall()))
    await env.client.patch_status("pods", name, {"status": status}, "strategic", "default")


async def ready_node(env: Env, name: str) -> None:
    await add_node(env.client, name, ready="True", clock=env.clock)
    await env.heartbeat(name)
