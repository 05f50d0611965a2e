"""One scheduling cycle of kube-scheduler's default profile, as pure functions of a snapshot.

NodeAffinity's PreFilter first narrows the nodes to those its required terms name in ``matchFields``
``metadata.name In`` (when every term names some): the others are "node(s) didn't satisfy plugin(s)
[NodeAffinity]", and terms naming no common node reject every node ("pod affinity terms conflict").
Then filters run per node in kube's order and the first that rejects a node gives its reasons:

* NodeUnschedulable: ``spec.unschedulable`` unless the pod tolerates ``node.kubernetes.io/unschedulable``
  (NoSchedule) -> "node(s) were unschedulable";
* NodeName: ``spec.nodeName`` set to another node -> "node(s) didn't match the requested node name";
* TaintToleration: the first NoSchedule or NoExecute taint the pod does not tolerate ->
  "node(s) had untolerated taint {key: value}" (PreferNoSchedule never filters);
* NodeAffinity: ``nodeSelector`` and required node affinity -> "node(s) didn't match Pod's node
  affinity/selector";
* NodePorts: a container ``hostPort`` another pod on the node holds (same protocol and port, the host IPs
  equal or either ``0.0.0.0``) -> "node(s) didn't have free ports for the requested pod ports";
* NodeResourcesFit: "Too many pods" against allocatable ``pods``, then "Insufficient <resource>" for cpu,
  memory, ephemeral-storage and each extended resource (sorted) the pod requests beyond what is left.

The first four are unresolvable by preemption; ports and resource shortfalls are not. When no node fits, the
message is kube's ``FitError``: ``0/N nodes are available: <count> <reason>, ... preemption: ...`` (the
reasons' histogram sorted as strings), and the preemption part what kube's DefaultPreemption says when it
finds no victim: this scheduler never preempts (see :mod:`kinformer.cluster.scheduler`).

Scoring (feasible nodes): NodeResourcesFit's LeastAllocated plus NodeResourcesBalancedAllocation over cpu
and memory, both on the pod's non-zero requests; ties go to the node whose name sorts first (kube picks
at random among ties). Not modelled: volumes, pod (anti-)affinity, topology spread, image
locality and preferred affinity / PreferNoSchedule scoring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import taints as t
from .nodeaffinity import required_affinity_matches
from .podresources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources, non_zero_requests

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
NO_NODES = "no nodes available to schedule pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
REASON_PREFILTERED = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
REASON_CONFLICT = "pod affinity terms conflict"
MAX_SCORE = 100


@dataclass(frozen=True)
class PodUsage:
    """What one pod takes of its node, as the filters and scores read it: its requests, its non-zero cpu and
    memory for scoring and its host ports. A function of the pod's spec only."""

    requests: Mapping[str, int]
    non_zero_cpu: int
    non_zero_memory: int
    host_ports: frozenset[HostPort]

    @classmethod
    def of(cls, pod: Mapping[str, Any], requests: Mapping[str, int]) -> PodUsage:
        cpu, memory = non_zero_requests(pod)
        ports = host_ports(pod)
        return cls(requests, cpu, memory, frozenset(ports) if ports else _NO_PORTS)


_NO_PORTS: frozenset[Any] = frozenset()  # what most pods ask for, shared (each frozenset is a tracked container)


@dataclass
class NodeInfo:
    """A node with what its pods (bound or assumed) take of it; ``offered`` is the node's allocatable
    (:func:`~.podresources.allocatable`). ``node`` is None while pods are counted on a node the informer does
    not show (kube's NodeInfo without a node). Invariant: the totals are the sums over the pods added and not
    removed; ``host_ports`` counts the pods holding each port."""

    name: str
    node: Mapping[str, Any] | None
    offered: Resources
    requested: Resources = field(default_factory=dict)
    pods: int = 0
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    host_ports: dict[HostPort, int] = field(default_factory=dict)

    def add_pod(self, usage: PodUsage) -> None:
        self._count(usage, 1)

    def remove_pod(self, usage: PodUsage) -> None:
        """Take off a pod added before, with the very usage it was added with."""
        self._count(usage, -1)

    def _count(self, usage: PodUsage, sign: int) -> None:
        self.pods += sign
        requested = self.requested
        for name, value in usage.requests.items():
            requested[name] = requested.get(name, 0) + sign * value
        self.non_zero_cpu += sign * usage.non_zero_cpu
        self.non_zero_memory += sign * usage.non_zero_memory
        ports = self.host_ports
        for port in usage.host_ports:
            held = ports.get(port, 0) + sign
            if held:
                ports[port] = held
            else:
                del ports[port]


HostPort = tuple[str, str, int]  # (host IP, protocol, port)
ANY_IP = "0.0.0.0"


def host_ports(pod: Mapping[str, Any]) -> set[HostPort]:
    """The host ports the pod's containers ask for."""
    return {(port.get("hostIP") or ANY_IP, port.get("protocol") or "TCP", int(port["hostPort"]))
            for container in (pod.get("spec") or {}).get("containers") or ()
            for port in container.get("ports") or () if port.get("hostPort")}


def _ports_conflict(wanted: set[HostPort], used: Mapping[HostPort, int]) -> bool:
    for ip, protocol, port in wanted:
        if ip == ANY_IP:
            if any(p == port and proto == protocol for _, proto, p in used):
                return True
        elif (ip, protocol, port) in used or (ANY_IP, protocol, port) in used:
            return True
    return False


@dataclass(frozen=True)
class Rejection:
    """Why a node does not fit: kube's Status reasons, and whether preemption could help."""

    reasons: tuple[str, ...]
    resolvable: bool


def affinity_node_names(pod: Mapping[str, Any]) -> set[str] | None:
    """NodeAffinity's PreFilter: the only node names the required terms allow, or None for any node."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    allowed: set[str] | None = None
    for term in required.get("nodeSelectorTerms") or ():
        named: set[str] | None = None
        for requirement in term.get("matchFields") or ():
            if requirement.get("key") == "metadata.name" and requirement.get("operator") == "In":
                values = set(requirement.get("values") or ())
                named = values if named is None else named & values
        if named is None:
            return None  # this term allows any node, and terms are ORed
        allowed = named if allowed is None else allowed | named
    return allowed


def _node_rejection(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """The first of NodeUnschedulable, NodeName, TaintToleration and NodeAffinity to reject, if any."""
    spec = node.get("spec") or {}
    tolerations = t.pod_tolerations(pod)
    unschedulable_taint = {"key": t.UNSCHEDULABLE, "effect": t.NO_SCHEDULE}
    if spec.get("unschedulable") and not t.tolerated_by(unschedulable_taint, tolerations):
        return REASON_UNSCHEDULABLE
    wanted = (pod.get("spec") or {}).get("nodeName")
    if wanted and wanted != node["metadata"]["name"]:
        return REASON_NODE_NAME
    taint = t.first_untolerated(t.node_taints(node), tolerations, (t.NO_SCHEDULE, t.NO_EXECUTE))
    if taint is not None:
        return f"node(s) had untolerated taint {t.describe(taint)}"
    if not required_affinity_matches(pod, node):
        return REASON_AFFINITY
    return None


def _insufficient(info: NodeInfo, requests: Mapping[str, int]) -> list[str]:
    """NodeResourcesFit's reasons, in kube's order."""
    offered = info.offered
    reasons = []
    if info.pods + 1 > offered.get(PODS, 0):
        reasons.append(REASON_TOO_MANY_PODS)
    extended = sorted(name for name in requests if name not in (CPU, MEMORY, EPHEMERAL_STORAGE))
    for name in (CPU, MEMORY, EPHEMERAL_STORAGE, *extended):
        wanted = requests.get(name, 0)
        if wanted > 0 and wanted > offered.get(name, 0) - info.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def check(pod: Mapping[str, Any], requests: Mapping[str, int], info: NodeInfo) -> Rejection | None:
    """Run the filters on one node: None when the pod fits."""
    assert info.node is not None, "a node the informer does not show is never offered"
    reason = _node_rejection(pod, info.node)
    if reason is not None:
        return Rejection((reason,), resolvable=False)
    if _ports_conflict(host_ports(pod), info.host_ports):
        return Rejection((REASON_PORTS,), resolvable=True)
    reasons = _insufficient(info, requests)
    return Rejection(tuple(reasons), resolvable=True) if reasons else None


def _histogram(counts: Mapping[str, int]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def _preemption_message(pod: Mapping[str, Any], rejections: Sequence[Rejection]) -> str:
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return "not eligible due to preemptionPolicy=Never."
    counts: dict[str, int] = {}
    for rejection in rejections:
        reason = NO_VICTIMS if rejection.resolvable else NOT_HELPFUL
        counts[reason] = counts.get(reason, 0) + 1
    return f"0/{len(rejections)} nodes are available: {_histogram(counts)}."


def fit_error(pod: Mapping[str, Any], rejections: Sequence[Rejection], prefilter: str | None = None) -> str:
    """kube's ``FitError`` message for a pod every node rejected (one Rejection per node), or that the
    PreFilter message ``prefilter`` rejected on every node."""
    if not rejections:
        return NO_NODES
    counts: dict[str, int] = {}
    for rejection in rejections:
        for reason in rejection.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    reasons = prefilter if prefilter is not None else _histogram(counts)
    return (f"0/{len(rejections)} nodes are available: {reasons}. "
            f"preemption: {_preemption_message(pod, rejections)}")


def _fraction_free(used: int, total: int) -> float:
    return 0.0 if total <= 0 or used > total else (total - used) / total


def score(pod: Mapping[str, Any], info: NodeInfo) -> int:
    """LeastAllocated plus BalancedAllocation for cpu and memory, each 0..100 (higher is better)."""
    offered = info.offered
    cpu, memory = non_zero_requests(pod)
    free_cpu = _fraction_free(info.non_zero_cpu + cpu, offered.get(CPU, 0))
    free_memory = _fraction_free(info.non_zero_memory + memory, offered.get(MEMORY, 0))
    least_allocated = math.floor(MAX_SCORE * (free_cpu + free_memory) / 2)
    used_cpu, used_memory = 1 - free_cpu, 1 - free_memory
    balanced = math.floor(MAX_SCORE * (1 - abs(used_cpu - used_memory) / 2))
    return least_allocated + balanced


def select(pod: Mapping[str, Any], feasible: Sequence[NodeInfo]) -> NodeInfo:
    """The best-scoring feasible node; ties broken by name."""
    return min(feasible, key=lambda info: (-score(pod, info), info.name))
