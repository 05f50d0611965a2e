"""What the StatefulSet and DaemonSet controllers read from a pod, and the pod they make from a template, as
kube's ``podutil`` and ``controller.GetPodFromTemplate`` (kube 1.32). Readiness and availability are
:mod:`.workload`'s (re-exported here).

* a pod made from a template copies its labels, annotations, finalizers and spec, and is controlled by the
  owner (``controller`` and ``blockOwnerDeletion`` set), named ``<owner>-`` plus a random suffix.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kinformer.client import to_plain

from .refs import controller_ref
from .workload import is_pod_available, is_pod_ready

Obj = Mapping[str, Any]


def phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def is_terminating(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def pod_from_template(template: Obj, owner: Obj) -> dict[str, Any]:
    """``GetPodFromTemplate``: a pod named ``<owner>-<random>`` made from ``template`` and controlled by ``owner``."""
    meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {"generateName": f"{owner['metadata']['name']}-",
                                "namespace": owner["metadata"]["namespace"],
                                "ownerReferences": [controller_ref(owner)]}
    for field in ("labels", "annotations"):
        if meta.get(field):
            pod_meta[field] = dict(meta[field])
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": copy.deepcopy(to_plain(template.get("spec") or {}))}


__all__ = ["is_pod_available", "is_pod_ready", "is_terminating", "phase", "pod_from_template"]
