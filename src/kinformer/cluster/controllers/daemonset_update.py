"""A DaemonSet's rolling update, as kube 1.32's pkg/controller/daemon/update.go: which old pods to delete and
on which nodes to surge a new pod, given the daemon pods on each node.

* a pod is updated when its ``controller-revision-hash`` is the current revision's hash, or its
  ``pod-template-generation`` is the set's template generation;
* ``maxUnavailable`` and ``maxSurge`` are scaled from the number of nodes that should run the pod (percentages
  rounded up); both 0 means ``maxUnavailable: 1``;
* without surge: unavailable new pods (and nodes with no pod, or with an old and a new one) count against
  ``maxUnavailable``; unavailable old pods are always replaced; available old pods are replaced while the
  budget lasts. The manage loop then creates the new pods;
* with surge: a new pod is created beside each unavailable old pod, and beside available old pods up to
  ``maxSurge`` at a time; an old pod goes once the new pod beside it is available; old pods on nodes that no
  longer fit go once as many pods are available elsewhere as should run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..podutil import is_pod_available
from .history import CONTROLLER_REVISION_HASH_LABEL
from .intstr import scaled_value

Obj = Mapping[str, Any]
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


def template_generation(ds: Obj) -> int | None:
    value = (ds["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def is_pod_updated(pod: Obj, hash_: str, generation: int | None) -> bool:
    """``IsPodUpdated``."""
    labels = pod["metadata"].get("labels") or {}
    template_matches = generation is not None and labels.get(TEMPLATE_GENERATION_LABEL) == str(generation)
    return (bool(hash_) and labels.get(CONTROLLER_REVISION_HASH_LABEL) == hash_) or template_matches


def _rolling(ds: Obj) -> Mapping[str, Any] | None:
    strategy = ds["spec"].get("updateStrategy") or {}
    return strategy.get("rollingUpdate") if strategy.get("type", "RollingUpdate") == "RollingUpdate" else None


def surge_count(ds: Obj, desired: int) -> int:
    rolling = _rolling(ds)
    return 0 if rolling is None else scaled_value(rolling.get("maxSurge"), desired, True)


def unavailable_count(ds: Obj, desired: int) -> int:
    rolling = _rolling(ds)
    return 0 if rolling is None else scaled_value(rolling.get("maxUnavailable"), desired, True)


def allows_surge(ds: Obj) -> bool:
    try:
        return surge_count(ds, 1) != 0
    except ValueError:
        return False


def updated_and_old(ds: Obj, pods: Sequence[Obj], hash_: str) -> tuple[Obj | None, Obj | None, bool]:
    """``findUpdatedPodsOnNode``: (the new pod, the old pod, ok); not ok when a node has two of either."""
    new = old = None
    generation = template_generation(ds)
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if is_pod_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


@dataclass
class RollingPlan:
    """What a rolling update pass decided: pods to delete and nodes to create a new pod on."""

    delete: list[str] = field(default_factory=list)
    create: list[str] = field(default_factory=list)


@dataclass
class RollingUpdate:
    """One rolling update pass over ``node_pods`` (node name -> daemon pods; every node that should run the
    pod is present, with no pods if it has none)."""

    ds: Obj
    node_pods: Mapping[str, Sequence[Obj]]
    hash: str
    now_wall: float
    should_run: Callable[[str], bool]
    max_surge: int
    max_unavailable: int
    desired: int

    def available(self, pod: Obj) -> bool:
        return is_pod_available(pod, int(self.ds["spec"].get("minReadySeconds") or 0), self.now_wall)

    def plan(self) -> RollingPlan:
        return self._replace() if self.max_surge == 0 else self._surge()

    def _replace(self) -> RollingPlan:
        unavailable, allowed, candidates = 0, [], []
        for pods in self.node_pods.values():
            new, old, ok = updated_and_old(self.ds, pods, self.hash)
            if not ok or (old is None) == (new is None):
                unavailable += 1  # the manage loop creates or trims here: count it unavailable
            elif new is not None:
                unavailable += not self.available(new)
            elif old is not None and not self.available(old):
                allowed.append(old["metadata"]["name"])
                unavailable += 1
            elif old is not None and unavailable < self.max_unavailable:
                candidates.append(old["metadata"]["name"])
        budget = min(max(0, self.max_unavailable - unavailable), len(candidates))
        return RollingPlan(delete=allowed + candidates[:budget])

    def _surge(self) -> RollingPlan:
        plan, surging, available = RollingPlan(), 0, 0
        allowed_nodes: list[str] = []
        candidate_nodes: list[str] = []
        misplaced: list[str] = []
        for node_name, pods in self.node_pods.items():
            new, old, ok = updated_and_old(self.ds, pods, self.hash)
            if not ok:
                surging += 1
                continue
            current = old if old is not None else new
            available += current is not None and self.available(current)
            if old is None:
                continue
            if new is None:
                if not self.available(old):
                    (allowed_nodes.append(node_name) if self.should_run(node_name)
                     else plan.delete.append(old["metadata"]["name"]))
                elif not self.should_run(node_name):
                    misplaced.append(old["metadata"]["name"])
                elif surging < self.max_surge:
                    candidate_nodes.append(node_name)
            elif not self.available(new):
                surging += 1
            else:
                plan.delete.append(old["metadata"]["name"])
        deletable = min(max(0, available - self.desired), len(misplaced))
        plan.delete.extend(misplaced[:deletable])
        room = min(max(0, self.max_surge - surging), len(candidate_nodes))
        plan.create = allowed_nodes + candidate_nodes[:room]
        return plan


__all__ = ["RollingPlan", "RollingUpdate", "allows_surge", "is_pod_updated", "surge_count", "template_generation",
           "unavailable_count", "updated_and_old"]
