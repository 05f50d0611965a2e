"""The pod a workload controller makes from its template: kube's ``controller.GetPodFromTemplate`` (kube 1.32),
shared by the replicaset, statefulset, daemonset and job controllers. What they read from a pod is
:mod:`kinformer.cluster.podutil`'s.

* a pod made from a template copies its labels, annotations, finalizers and spec (a deep copy the caller owns:
  the statefulset and daemonset controllers change it), and is controlled by the owner (``controller`` and
  ``blockOwnerDeletion`` set), named ``<owner>-`` plus a random suffix;
* a template without labels makes no pod: ValueError("unable to create pods, no labels"), as kube.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinformer.client import to_plain

from .refs import controller_ref

Obj = Mapping[str, Any]


def pod_from_template(template: Obj, owner: Obj) -> dict[str, Any]:
    """``GetPodFromTemplate``: a pod named ``<owner>-<random>`` made from ``template`` and controlled by ``owner``."""
    meta = template.get("metadata") or {}
    if not meta.get("labels"):
        raise ValueError("unable to create pods, no labels")
    pod_meta: dict[str, Any] = {"generateName": f"{owner['metadata']['name']}-",
                                "namespace": owner["metadata"]["namespace"],
                                "ownerReferences": [controller_ref(owner)]}
    for field in ("labels", "annotations"):
        if meta.get(field):
            pod_meta[field] = dict(meta[field])
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": to_plain(template.get("spec") or {})}  # (to_plain makes a deep copy)


__all__ = ["pod_from_template"]
