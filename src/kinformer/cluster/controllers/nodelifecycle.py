"""kube-controller-manager's node lifecycle controller (``nodelifecycle``; kube's pkg/controller/nodelifecycle).

Health (a loop every ``node_monitor_period`` on the cluster's clock): a node is heard from when its Ready
condition's ``lastHeartbeatTime`` or its Lease's (``kube-node-lease/<node>``) ``renewTime`` changes; the
time is the controller's own clock when it notices, never the writer's. A node not heard from for
``node_monitor_grace_period`` (``node_startup_grace_period`` while it never posted a Ready condition) has
its Ready, MemoryPressure, DiskPressure and PIDPressure conditions set to Unknown — reason
``NodeStatusUnknown``, "Kubelet stopped posting node status." (``NodeStatusNeverUpdated``, "Kubelet never
posted node status." for a missing one, its heartbeat the node's creation) — keeping their heartbeats.
When that turns Ready from True, the node gets a ``NodeNotReady`` event and every pod on it its ``Ready``
condition set to False, with a ``NodeNotReady`` Warning event on the pod.

Taints (a reconciler of each node, on every change): the controller owns these taints and keeps them equal
to the node's conditions, leaving every other taint alone:

* NoSchedule: ``not-ready`` (Ready False), ``unreachable`` (Ready Unknown), ``memory-pressure``,
  ``disk-pressure``, ``pid-pressure``, ``network-unavailable`` (that condition True), ``unschedulable``
  (``spec.unschedulable``);
* NoExecute, with ``timeAdded``: ``not-ready`` (Ready False) or ``unreachable`` (Ready Unknown); both go
  when Ready is True again. The taint eviction controller acts on them.

Not implemented: zone states and their eviction rate limits (every node is tainted at once, as in a healthy
zone with no limit), the ``RegisteredNode`` / ``RemovingNode`` events, and Lease garbage collection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kinformer.controller import Result
from kinformer.controller.conditions import find_condition, set_condition
from kinformer.controller.reconcile import Request
from kinformer.errors import Conflict, NotFound

from .. import taints as t
from ..metatime import parse_time, rfc3339
from ..podindex import pod_reference, pods_informer, pods_on_node

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer

    from ..cluster import ControllerContext

log = logging.getLogger(__name__)

COMPONENT = "node-controller"
NODE_LEASE_NAMESPACE = "kube-node-lease"
HEALTH_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
#: condition type -> (status that taints, the NoSchedule taint key)
CONDITION_TAINTS = {
    "MemoryPressure": ("True", "node.kubernetes.io/memory-pressure"),
    "DiskPressure": ("True", "node.kubernetes.io/disk-pressure"),
    "PIDPressure": ("True", "node.kubernetes.io/pid-pressure"),
    "NetworkUnavailable": ("True", "node.kubernetes.io/network-unavailable"),
}
READY_TAINT_KEYS = {"False": t.NOT_READY, "Unknown": t.UNREACHABLE}
OWNED_TAINTS = frozenset({*((key, t.NO_SCHEDULE) for _, key in CONDITION_TAINTS.values()),
                          (t.UNSCHEDULABLE, t.NO_SCHEDULE), (t.NOT_READY, t.NO_SCHEDULE),
                          (t.UNREACHABLE, t.NO_SCHEDULE), (t.NOT_READY, t.NO_EXECUTE),
                          (t.UNREACHABLE, t.NO_EXECUTE)})

Obj = Mapping[str, Any]


def _status(node: Obj) -> Mapping[str, Any]:
    return node.get("status") or {}


# -- health -----------------------------------------------------------------------------------------------


@dataclass
class Health:
    """What the controller last saw of a node, and when (its clock) it last heard from the node."""

    probe: float
    heartbeat: Any
    renew: Any


def unknown_conditions(node: Obj, wall: float) -> list[dict[str, Any]] | None:
    """The node's conditions with the health ones set Unknown (see the module docstring); None if none changed."""
    conditions = [dict(c) for c in _status(node).get("conditions") or ()]
    now = rfc3339(wall)
    changed = False
    for type_ in HEALTH_CONDITIONS:
        current = next((c for c in conditions if c.get("type") == type_), None)
        if current is None:
            created = (node.get("metadata") or {}).get("creationTimestamp")
            conditions.append({"type": type_, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.", "lastHeartbeatTime": created,
                               "lastTransitionTime": now})
            changed = True
        elif current.get("status") != "Unknown":
            current.update(status="Unknown", reason="NodeStatusUnknown",
                           message="Kubelet stopped posting node status.", lastTransitionTime=now)
            changed = True
    return conditions if changed else None


class NodeMonitor:
    """The health loop (see the module docstring)."""

    def __init__(self, ctx: ControllerContext, nodes: SharedIndexInformer, pods: SharedIndexInformer) -> None:
        options = ctx.options
        self.client, self.clock, self.options = ctx.client, ctx.clock, options
        self.recorder = ctx.recorder(COMPONENT)
        self.nodes, self.pods = nodes, pods
        self.leases = ctx.manager.informer("leases", namespace=NODE_LEASE_NAMESPACE)
        self.health: dict[str, Health] = {}

    async def run(self) -> None:
        for informer in (self.nodes, self.pods, self.leases):
            await informer.wait_for_sync()
        while True:
            await self.monitor_once()
            await self.clock.sleep(self.options.node_monitor_period)

    async def monitor_once(self) -> None:
        """One pass over every cached node; a node whose update fails is retried on the next pass."""
        nodes = self.nodes.indexer.list()
        for gone in set(self.health) - {n["metadata"]["name"] for n in nodes}:
            del self.health[gone]
        for node in nodes:
            try:
                await self._monitor(node)
            except (Conflict, NotFound) as exc:
                log.info("node %s changed meanwhile (%s); next pass", node["metadata"]["name"], exc)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("monitoring node %s failed", node["metadata"]["name"])

    def _observe(self, node: Obj) -> tuple[Health, bool]:
        """Update what was seen of ``node``; (its health, whether it ever posted Ready)."""
        name = node["metadata"]["name"]
        ready = find_condition(_status(node), "Ready")
        lease = self.leases.indexer.get_by_key(f"{NODE_LEASE_NAMESPACE}/{name}")
        heartbeat = ready.get("lastHeartbeatTime") if ready else None
        renew = (lease.get("spec") or {}).get("renewTime") if lease else None
        now = self.clock.now()
        health = self.health.get(name)
        if health is None:
            created = parse_time(node["metadata"].get("creationTimestamp")) if ready is None else None
            probe = now - max(0.0, self.clock.wall() - created) if created is not None else now
            health = self.health[name] = Health(probe, heartbeat, renew)
        elif heartbeat != health.heartbeat or (renew is not None and renew != health.renew):
            health.probe, health.heartbeat, health.renew = now, heartbeat, renew
        return health, ready is not None

    async def _monitor(self, node: Obj) -> None:
        health, posted = self._observe(node)
        grace = self.options.node_monitor_grace_period if posted else self.options.node_startup_grace_period
        if self.clock.now() < health.probe + grace:
            return
        conditions = unknown_conditions(node, self.clock.wall())
        if conditions is None:
            return
        meta = node["metadata"]
        log.info("node %s: no heartbeat for %.0fs; conditions Unknown", meta["name"], grace)
        await self.client.patch_status("nodes", meta["name"], {
            "metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"conditions": conditions}})
        was_ready = (find_condition(_status(node), "Ready") or {}).get("status") == "True"
        if was_ready:
            self.recorder.event(node, "Normal", "NodeNotReady", f"Node {meta['name']} status is now: NodeNotReady")
            await self._mark_pods_not_ready(meta["name"])

    async def _mark_pods_not_ready(self, node_name: str) -> None:
        """kube's MarkPodsNotReady: each pod on the node with a Ready condition gets it False."""
        for pod in pods_on_node(self.pods, node_name):
            status = {"conditions": [dict(c) for c in (pod.get("status") or {}).get("conditions") or ()]}
            ready = find_condition(status, "Ready")
            if ready is None or not set_condition(status, type="Ready", status="False",
                                                  reason=ready.get("reason") or "NodeNotReady",
                                                  message=ready.get("message") or "", clock=self.clock):
                continue
            meta = pod["metadata"]
            try:
                await self.client.patch_status("pods", meta["name"], {
                    "status": {"conditions": [find_condition(status, "Ready")]}}, "strategic", meta["namespace"])
            except NotFound:
                continue
            self.recorder.event(pod_reference(pod), "Warning", "NodeNotReady",
                                "Node is not ready")


# -- taints -----------------------------------------------------------------------------------------------


def desired_taints(node: Obj) -> set[tuple[str, str]]:
    """The (key, effect) pairs of the owned taints the node's conditions and spec call for."""
    status = _status(node)
    wanted: set[tuple[str, str]] = set()
    for type_, (tainting, key) in CONDITION_TAINTS.items():
        if (find_condition(status, type_) or {}).get("status") == tainting:
            wanted.add((key, t.NO_SCHEDULE))
    ready = (find_condition(status, "Ready") or {}).get("status")
    if ready in READY_TAINT_KEYS:
        wanted.add((READY_TAINT_KEYS[ready], t.NO_SCHEDULE))
        wanted.add((READY_TAINT_KEYS[ready], t.NO_EXECUTE))
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.add((t.UNSCHEDULABLE, t.NO_SCHEDULE))
    return wanted


def reconciled_taints(node: Obj, wall: float) -> list[dict[str, Any]] | None:
    """The node's taints with the owned ones as desired (kept ones unchanged); None if nothing changes."""
    current = t.node_taints(node)
    wanted = desired_taints(node)
    kept = [taint for taint in current
            if (taint.get("key"), taint.get("effect")) not in OWNED_TAINTS
            or (taint.get("key"), taint.get("effect")) in wanted]
    have = {(taint.get("key"), taint.get("effect")) for taint in kept}
    added: list[dict[str, Any]] = []
    for key, effect in sorted(wanted - have):
        taint: dict[str, Any] = {"key": key, "effect": effect}
        if effect == t.NO_EXECUTE:
            taint["timeAdded"] = rfc3339(wall)
        added.append(taint)
    if not added and len(kept) == len(current):
        return None
    return kept + added


class NodeTainter:
    """The per-node reconciler keeping the owned taints equal to the node's conditions."""

    def __init__(self, ctx: ControllerContext, nodes: SharedIndexInformer) -> None:
        self.client, self.clock, self.nodes = ctx.client, ctx.clock, nodes

    async def reconcile(self, request: Request) -> Result | None:
        node = self.nodes.indexer.get_by_key(request.key)
        if node is None:
            return None
        taints = reconciled_taints(node, self.clock.wall())
        if taints is None:
            return None
        meta = node["metadata"]
        log.info("node %s: taints %s", meta["name"], [f"{x['key']}:{x['effect']}" for x in taints])
        try:
            await self.client.patch("nodes", meta["name"], {
                "metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": {"taints": taints}})
        except NotFound:
            return None
        return None  # a Conflict raises: retried with backoff against the newer node


def setup(ctx: ControllerContext) -> None:
    """Register the taint reconciler on nodes and the health loop."""
    nodes = ctx.manager.informer("nodes")
    monitor = NodeMonitor(ctx, nodes, pods_informer(ctx.manager))
    ctx.manager.controller(NodeTainter(ctx, nodes), name="nodelifecycle").for_("nodes").workers(ctx.options.workers)
    ctx.run(monitor.run, "node-monitor")
