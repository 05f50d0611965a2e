"""What the job, cronjob and ttl-after-finished controllers share about batch/v1 objects: Job conditions
(the JobCondition rules, which differ from metav1.Condition's), whether a Job finished, and the FailedCreate
event; timestamps are :mod:`..metatime`'s (RFC 3339, whole seconds, UTC).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from typing import Any

from kinformer.controller.conditions import find_condition

from ..metatime import parse_time
from ..metatime import rfc3339 as format_time
from .podcontrol import error_message, namespace_terminating

__all__ = ["as_dict", "condition", "ensure_condition", "finished_condition", "format_time", "is_finished",
           "new_condition", "parse_time", "report_failed_create"]


def as_dict(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A private, mutable deep copy of a (possibly cached, read-only) object."""
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is not None:
        return dict(to_dict())
    return copy.deepcopy(dict(obj))


def condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The Job condition of ``type_`` in ``obj``'s status, or None."""
    return find_condition(obj.get("status") or {}, type_)


def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    stamp = format_time(now)
    return {"type": type_, "status": status, "lastProbeTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def ensure_condition(status: MutableMapping[str, Any], type_: str, value: str, reason: str, message: str,
                     now: float) -> bool:
    """kube's ``ensureJobConditionStatus``: replace the condition of ``type_`` when its status, reason or
    message differ; add it only when ``value`` is not "False". True when something changed."""
    conditions = status.setdefault("conditions", [])
    for i, cond in enumerate(conditions):
        if cond.get("type") == type_:
            if (cond.get("status"), cond.get("reason"), cond.get("message")) == (value, reason, message):
                return False
            conditions[i] = new_condition(type_, value, reason, message, now)
            return True
    if value == "False":
        return False
    conditions.append(new_condition(type_, value, reason, message, now))
    return True


def finished_condition(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Job's Complete or Failed condition when it is True (the Job finished), else None."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond
    return None


def is_finished(job: Mapping[str, Any]) -> bool:
    return finished_condition(job) is not None


def report_failed_create(recorder: Any, owner: Mapping[str, Any], err: BaseException, prefix: str) -> None:
    """The FailedCreate Warning kube's controllers record on ``owner`` ("<prefix>: <error>"); none when the
    namespace is terminating (every creation fails there)."""
    if not namespace_terminating(err):
        recorder.event(owner, "Warning", "FailedCreate", f"{prefix}: {error_message(err)}")
