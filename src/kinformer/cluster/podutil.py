"""What the cluster's parts read from a pod's status and metadata, as kube's ``podutil`` (pkg/api/v1/pod)
and controller_utils.go read it (kube 1.32). The one home of these predicates.

* a pod's phase is ``""`` until the kubelet (or a test) writes one;
* *terminal*: Succeeded or Failed, it holds nothing on its node any more;
* *being deleted*: ``metadata.deletionTimestamp`` is set (on any object);
* *active*: neither terminal nor being deleted (``controller.FilterActivePods``);
* *ready*: its Ready condition is True; *available*: ready, and with ``minReadySeconds`` ready for strictly
  longer than that (``lastTransitionTime + minReadySeconds`` before now, ``podutil.IsPodAvailable``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinformer.controller.conditions import find_condition

from .metatime import parse_time

__all__ = ["is_being_deleted", "is_pod_active", "is_pod_available", "is_pod_ready", "is_running_and_ready",
           "is_terminal", "phase", "ready_condition"]

Obj = Mapping[str, Any]


def phase(pod: Obj) -> str:
    """``status.phase``, ``""`` when none was written yet."""
    return (pod.get("status") or {}).get("phase") or ""


def is_terminal(pod: Obj) -> bool:
    """Succeeded or Failed: the pod holds no resources on its node any more."""
    return phase(pod) in ("Succeeded", "Failed")


def is_being_deleted(obj: Obj) -> bool:
    """``metadata.deletionTimestamp`` is set."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def is_pod_active(pod: Obj) -> bool:
    """Neither terminal nor being deleted (``FilterActivePods``)."""
    return not is_terminal(pod) and not is_being_deleted(pod)


def ready_condition(pod: Obj) -> Mapping[str, Any] | None:
    """The pod's Ready condition, or None."""
    return find_condition(pod.get("status") or {}, "Ready")


def is_pod_ready(pod: Obj) -> bool:
    """The Ready condition is True (``podutil.IsPodReady``)."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_running_and_ready(pod: Obj) -> bool:
    """Running with its Ready condition True (the StatefulSet controller's ``isRunningAndReady``)."""
    return phase(pod) == "Running" and is_pod_ready(pod)


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready, and (with ``min_ready_seconds``) ready since strictly more than that long (``IsPodAvailable``)."""
    if not is_pod_ready(pod):
        return False
    if not min_ready_seconds:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds < now
