"""Graceful deletion of pods, as kube-apiserver's ``rest.BeforeDelete`` and the pod strategy's
``CheckGracefulDelete`` decide it.

* The grace period is DeleteOptions' ``gracePeriodSeconds``, else the pod's
  ``spec.terminationGracePeriodSeconds`` (else 0); it is 0 for a pod not bound to a node and for a pod that
  has Succeeded or Failed.
* A grace period above 0 marks the pod: ``deletionTimestamp`` = now + grace, ``deletionGracePeriodSeconds`` =
  grace; the kubelet stops the pod and deletes it with grace 0 (then it goes, unless finalizers hold it).
* A pod already marked may only have its grace shortened (the deletionTimestamp moves back by the difference);
  a delete with an equal or longer grace, or none, changes nothing; grace 0 deletes it.

The server applies this only when it runs simulated kubelets (``APIServer(nodes=N)``): a server without
nodes has no kubelet to finish a graceful deletion, so it deletes pods at once, as before.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from typing import Any, Literal

from ...timestamps import rfc3339
from ..machinery import status as st

Graceful = Literal["graceful", "pending"] | None


def _requested(options: Mapping[str, Any]) -> int | None:
    value = options.get("gracePeriodSeconds")
    if value is None:
        return None
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        raise st.bad_request(f"invalid gracePeriodSeconds: {value!r}") from None


def _stamp(wall: float) -> str:
    return rfc3339(int(wall))


def _parse(stamp: str) -> float:
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def pod_grace_period(pod: Mapping[str, Any], options: Mapping[str, Any]) -> int:
    """CheckGracefulDelete: the grace period a delete of ``pod`` with ``options`` gets."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    requested = _requested(options)
    period = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    return period


def before_delete(pod: dict[str, Any], options: Mapping[str, Any], wall: float) -> Graceful:
    """Mark ``pod`` for graceful deletion when its grace period says so (mutating its metadata).

    Returns "graceful" when the pod was (re)marked and must be kept, "pending" when a graceful deletion is
    already under way and nothing changes, None when the delete is immediate (finalizers still apply).
    """
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        current = meta.get("deletionGracePeriodSeconds")
        if not current:
            return None  # marked by finalizers (grace 0): the finalizer rules decide
        requested = _requested(options)
        if requested is None or requested >= int(current):
            return "pending"
        if requested == 0:
            return None
        meta["deletionTimestamp"] = _stamp(_parse(meta["deletionTimestamp"]) - int(current) + requested)
        meta["deletionGracePeriodSeconds"] = requested
        return "graceful"
    period = pod_grace_period(pod, options)
    if period == 0:
        return None
    meta["deletionTimestamp"] = _stamp(wall + period)
    meta["deletionGracePeriodSeconds"] = period
    if meta.get("generation"):
        meta["generation"] += 1
    return "graceful"
