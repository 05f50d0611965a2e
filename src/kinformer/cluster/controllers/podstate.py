"""What the workload controllers read from a pod, and the pod they make from a template, as kube's
``podutil`` and ``controller.GetPodFromTemplate`` (kube 1.32).

* ready: the ``Ready`` condition is ``True``;
* available: ready, and (with ``minReadySeconds`` > 0) ready since strictly more than ``minReadySeconds``,
  judged from the condition's ``lastTransitionTime`` against the injected clock's wall time;
* a pod made from a template copies its labels, annotations, finalizers and spec, and is controlled by the
  owner (``controller`` and ``blockOwnerDeletion`` set).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kinformer.client import to_plain

from .refs import controller_ref

Obj = Mapping[str, Any]


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or None."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def ready_condition(pod: Obj) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_pod_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_pod_available(pod: Obj, min_ready_seconds: int, now_wall: float) -> bool:
    """``podutil.IsPodAvailable``."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    cond = ready_condition(pod)
    since = parse_time(cond.get("lastTransitionTime") if cond else None)
    return since is not None and since + min_ready_seconds < now_wall


def available_in(pod: Obj, min_ready_seconds: int, now_wall: float) -> float | None:
    """Seconds until a ready pod becomes available (None when it is not ready or already is)."""
    if min_ready_seconds <= 0 or not is_pod_ready(pod):
        return None
    cond = ready_condition(pod)
    since = parse_time(cond.get("lastTransitionTime") if cond else None)
    if since is None or since + min_ready_seconds < now_wall:
        return None
    return since + min_ready_seconds - now_wall


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


__all__ = ["available_in", "is_pod_available", "is_pod_ready", "is_terminating", "parse_time", "phase",
           "pod_from_template", "ready_condition"]
