"""Which pods a Job owns (kube's PodControllerRefManager.ClaimPods, as the Job controller uses it).

* A pod the Job controls stays claimed while its labels match the Job's selector; one that stopped matching
  is released (its controller reference removed), unless the Job is being deleted.
* An orphan (no controller reference) that matches and is not being deleted is adopted (a controller
  reference to the Job with ``blockOwnerDeletion``), unless the Job is being deleted; the Job is read afresh
  from the API first, so a Job deleted and re-created under the same name adopts nothing for the old one.
* Pods controlled by anything else are never touched.

Both writes are JSON patches guarded by the pod's resourceVersion, so a concurrent change fails the sync
(retried) instead of being overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.selectors import LabelSelector, label_selector_from_dict

__all__ = ["ClaimPlan", "controller_ref", "job_reference", "ownership_patch", "plan_claims"]

Pod = Mapping[str, Any]


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def job_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"], "controller": True,
            "blockOwnerDeletion": True}


@dataclass
class ClaimPlan:
    """The pods the Job keeps, the orphans it may adopt and the pods it releases."""

    keep: list[Pod] = field(default_factory=list)
    adopt: list[Pod] = field(default_factory=list)
    release: list[Pod] = field(default_factory=list)


def _selector(job: Mapping[str, Any]) -> LabelSelector:
    return label_selector_from_dict((job.get("spec") or {}).get("selector"))


def plan_claims(job: Mapping[str, Any], owned: Iterable[Pod], namespace_pods: Iterable[Pod]) -> ClaimPlan:
    """Sort the Job's ``owned`` pods and the orphans among ``namespace_pods`` (see the module doc)."""
    selector, plan = _selector(job), ClaimPlan()
    deleting = bool(job["metadata"].get("deletionTimestamp"))
    for pod in owned:
        if selector.matches(pod["metadata"].get("labels")) or deleting:
            plan.keep.append(pod)
        else:
            plan.release.append(pod)
    if deleting:
        return plan
    for pod in namespace_pods:
        meta = pod["metadata"]
        if controller_ref(pod) is None and not meta.get("deletionTimestamp") and selector.matches(meta.get("labels")):
            plan.adopt.append(pod)
    return plan


def ownership_patch(pod: Pod, references: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A JSON patch setting the pod's ownerReferences, applied only to the version of the pod seen."""
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": pod["metadata"]["resourceVersion"]},
            {"op": "add", "path": "/metadata/ownerReferences", "value": references}]
