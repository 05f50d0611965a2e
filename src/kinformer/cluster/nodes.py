"""Simulated nodes: each registers its Node, renews its Lease and posts the Ready heartbeat, as a kubelet does.

Kube rules carried over (kubelet's node status and node lease, kwok's node stage):

* registration: the kubelet creates its Node (labels ``kubernetes.io/hostname``, ``kubernetes.io/os``,
  ``kubernetes.io/arch`` and their ``beta.`` twins; ``spec.podCIDR(s)``; capacity = allocatable; the
  conditions MemoryPressure, DiskPressure, PIDPressure (False) and Ready (True, KubeletReady); addresses
  InternalIP and Hostname; ``nodeInfo``; the kubelet port) and keeps an existing Node, rewriting its status;
* the Lease ``kube-node-lease/<node>`` (holder = the node, ``leaseDurationSeconds``, owned by the Node) is
  renewed every ``ClusterOptions.node_lease_renew_interval``;
* the Ready condition's ``lastHeartbeatTime`` is posted every ``node_status_update_frequency`` through
  ``nodes/<name>/status`` (a strategic merge patch, as the kubelet sends); ``lastTransitionTime`` changes only
  when a condition's status does.

Not simulated: the kubelet's status report frequency (it posts every period, changed or not), images,
volumes, resource pressure (the pressure conditions stay False), node shutdown.

A node is stopped by its Node's annotation ``kinformer.io/stopped: "true"`` (:data:`STOPPED_ANNOTATION`), which
``Cluster.stop_node`` writes and ``kubectl annotate node`` can write as well: one mechanism, read from the Node
informer. Removing the annotation (or any other value) starts the node again; so does deleting its Node (no
Node, no annotation: the kubelet registers it afresh).

Invariant: a stopped node writes nothing (no heartbeat, no renewal, its pods are left as they are) until it
is started again; every delay runs on the cluster's clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.errors import AlreadyExists, NotFound
from kinformer.timestamps import micro_time

from .metatime import rfc3339

if TYPE_CHECKING:
    from .cluster import ControllerContext
    from .options import ClusterOptions

log = logging.getLogger(__name__)

KUBELET_VERSION = "v1.32.0"
NODE_LEASE_NAMESPACE = "kube-node-lease"
KUBELET_PORT = 10250
#: The Node annotation that stops (``"true"``) a simulated node's kubelet; any other value or none runs it.
STOPPED_ANNOTATION = "kinformer.io/stopped"
#: The Node conditions a healthy kubelet reports: (type, reason, message); Ready is True, the others False.
_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "KubeletReady", "kubelet is posting ready status"),
)


def _digest(text: str, size: int = 32) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


@dataclass
class SimulatedNode:
    """One node: its name, its pod CIDR ``10.244.<index>.0/24`` and its InternalIP; ``running`` is cleared while
    the kubelet is down (:data:`STOPPED_ANNOTATION`) and ``halted`` is set then: always each other's opposite."""

    name: str
    index: int
    uid: str = ""
    running: asyncio.Event = field(default_factory=asyncio.Event)
    halted: asyncio.Event = field(default_factory=asyncio.Event)

    def set_running(self, running: bool) -> bool:
        """Start or stop the kubelet; True when that changed its state."""
        if running == self.running.is_set():
            return False
        (self.running if running else self.halted).set()
        (self.halted if running else self.running).clear()
        return True

    @property
    def pod_cidr(self) -> str:
        return f"10.244.{self.index}.0/24"

    @property
    def internal_ip(self) -> str:
        return f"172.18.0.{self.index + 1}"

    def pod_ip(self, host: int) -> str:
        return f"10.244.{self.index}.{host}"


def stopped(node: Mapping[str, Any]) -> bool:
    """Whether the Node object ``node`` asks its kubelet to stop (:data:`STOPPED_ANNOTATION` is ``"true"``)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(STOPPED_ANNOTATION) == "true")


def node_conditions(wall: float, previous: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A healthy kubelet's conditions, heartbeat at ``wall``; a condition whose status is unchanged keeps its
    lastTransitionTime from ``previous``."""
    now = rfc3339(wall)
    before = {c.get("type"): c for c in previous or ()}
    out = []
    for kind, reason, message in _CONDITIONS:
        status = "True" if kind == "Ready" else "False"
        old = before.get(kind) or {}
        transition = old.get("lastTransitionTime") if old.get("status") == status else None
        out.append({"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": transition or now})
    return out


def node_object(node: SimulatedNode, options: ClusterOptions, wall: float) -> dict[str, Any]:
    """The Node a kubelet registers (status included)."""
    resources = {"cpu": options.node_cpu, "memory": options.node_memory, "pods": str(options.node_pods),
                 "ephemeral-storage": "100Gi"}
    labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": labels,
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kinformer.io/simulated": "true"}},
        "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr]},
        "status": {
            "capacity": dict(resources), "allocatable": dict(resources),
            "conditions": node_conditions(wall),
            "addresses": [{"type": "InternalIP", "address": node.internal_ip},
                          {"type": "Hostname", "address": node.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
            "nodeInfo": {"machineID": _digest("machine/" + node.name), "systemUUID": _digest("uuid/" + node.name),
                         "bootID": _digest("boot/" + node.name), "kernelVersion": "6.8.0-kinformer",
                         "osImage": "kinformer simulated node", "containerRuntimeVersion": "containerd://1.7.0",
                         "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                         "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


def lease_object(node: SimulatedNode, node_uid: str, options: ClusterOptions, wall: float) -> dict[str, Any]:
    """The node's Lease in ``kube-node-lease``, owned by its Node."""
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node.name, "namespace": NODE_LEASE_NAMESPACE,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node_uid}]},
        "spec": {"holderIdentity": node.name, "leaseDurationSeconds": options.node_lease_duration_seconds,
                 "renewTime": micro_time(wall)},
    }


class NodeAgents:
    """The node half of every simulated kubelet: registration, lease renewals and heartbeats, one loop each
    node, owned by the cluster (``ctx.run``). Each node runs or stops as its Node's :data:`STOPPED_ANNOTATION`
    says, followed through the shared Node informer; ``on_started`` callbacks get the name of a node started
    again."""

    def __init__(self, ctx: ControllerContext, count: int) -> None:
        self.ctx = ctx
        self.nodes = {f"node-{i}": SimulatedNode(f"node-{i}", i) for i in range(1, count + 1)}
        self.on_started: list[Callable[[str], None]] = []
        for node in self.nodes.values():
            node.set_running(True)
            ctx.run(lambda node=node: self._run(node), f"node-{node.name}")  # type: ignore[misc]
        # coroutine callbacks: they run on the loop, which owns the nodes' asyncio Events (plain callables
        # would run on a listener thread of their own)
        ctx.manager.informer("nodes").add_event_handler(
            on_add=self._added, on_update=self._updated, on_delete=self._deleted)

    def get(self, name: str) -> SimulatedNode:
        """The simulated node ``name``; KeyError naming the known ones otherwise."""
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no simulated node {name!r}; known: {', '.join(self.nodes)}") from None

    async def _added(self, obj: Mapping[str, Any]) -> None:
        self._follow(obj)

    async def _updated(self, _old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._follow(new)

    def _follow(self, obj: Mapping[str, Any]) -> None:
        """Run or stop the node of Node ``obj`` as its annotation says."""
        self._set_running(obj["metadata"]["name"], not stopped(obj))

    async def _deleted(self, obj: Any) -> None:
        """A deleted Node's kubelet runs (and registers it again); ``obj`` may be a tombstone (its key)."""
        self._set_running(obj.key if isinstance(obj, DeletedFinalStateUnknown) else obj["metadata"]["name"], True)

    def _set_running(self, name: str, running: bool) -> None:
        node = self.nodes.get(name)
        if node is not None and node.set_running(running) and running:
            for callback in self.on_started:
                callback(name)

    async def wait_running(self, name: str, running: bool) -> None:
        """Return once node ``name`` runs (or is stopped), as its Node's annotation, once seen, makes it."""
        node = self.get(name)
        await (node.running if running else node.halted).wait()

    async def register_all(self) -> None:
        """Register every node now (the cluster's start waits for it, so a test sees its nodes at once)."""
        await asyncio.gather(*(self._register(node) for node in self.nodes.values()))

    async def _register(self, node: SimulatedNode) -> None:
        """Create the Node (or take over an existing one), write its status and its Lease."""
        client, wall = self.ctx.client, self.ctx.clock.wall()
        body = node_object(node, self.ctx.options, wall)
        try:
            created = await client.create("nodes", body)
        except AlreadyExists:
            created = await client.get("nodes", node.name)
            if stopped(created):  # left stopped (e.g. by the server's last run): a stopped kubelet writes nothing
                node.uid = str(created["metadata"]["uid"])
                node.set_running(False)
                return
        await client.patch_status("nodes", node.name, {"status": body["status"]}, "strategic")
        node.uid = str(created["metadata"]["uid"])
        await self._renew_lease(node)

    async def _run(self, node: SimulatedNode) -> None:
        """Renew the Lease and post heartbeats while the node runs, forever (cancelled at cluster stop)."""
        opts, clock = self.ctx.options, self.ctx.clock
        next_lease = clock.now() + opts.node_lease_renew_interval
        next_status = clock.now() + opts.node_status_update_frequency
        while True:
            await node.running.wait()
            now = clock.now()
            try:
                if not node.uid:
                    await self._register(node)
                    next_lease = now + opts.node_lease_renew_interval
                    next_status = now + opts.node_status_update_frequency
                if now >= next_lease:
                    await self._renew_lease(node)
                    next_lease = now + opts.node_lease_renew_interval
                if now >= next_status:
                    await self._heartbeat(node)
                    next_status = now + opts.node_status_update_frequency
            except Exception as e:
                if isinstance(e, NotFound):
                    node.uid = ""  # the Node was deleted: register it again, as the kubelet does
                else:
                    log.exception("simulated kubelet of %s: heartbeat failed; retrying", node.name)
                next_lease = next_status = now + min(opts.node_lease_renew_interval, 1.0)
            await clock.sleep(max(min(next_lease, next_status) - clock.now(), 0.0))

    async def _renew_lease(self, node: SimulatedNode) -> None:
        client, wall = self.ctx.client, self.ctx.clock.wall()
        renew = {"spec": {"holderIdentity": node.name, "renewTime": micro_time(wall),
                          "leaseDurationSeconds": self.ctx.options.node_lease_duration_seconds}}
        try:
            await client.patch("leases", node.name, renew, "merge", namespace=NODE_LEASE_NAMESPACE)
        except NotFound:
            await client.create("leases", lease_object(node, node.uid, self.ctx.options, wall),
                                namespace=NODE_LEASE_NAMESPACE)

    async def _heartbeat(self, node: SimulatedNode) -> None:
        current = await self.ctx.client.get("nodes", node.name)
        conditions = node_conditions(self.ctx.clock.wall(), (current.get("status") or {}).get("conditions"))
        await self.ctx.client.patch_status("nodes", node.name, {"status": {"conditions": conditions}}, "strategic")
