"""Taints and tolerations as kube matches them (``k8s.io/api/core/v1``: ``Toleration.ToleratesTaint``), and
the taint keys the node controllers set.

A toleration tolerates a taint when its effect is empty or equal, its key empty or equal, and its operator
``Exists`` or ``Equal`` (the default) with an equal value; any other operator tolerates nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Taint = Mapping[str, Any]
Toleration = Mapping[str, Any]

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (see the module docstring)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def tolerated_by(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def node_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or ())


def pod_tolerations(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((pod.get("spec") or {}).get("tolerations") or ())


def first_untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration],
                      effects: tuple[str, ...]) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates, else None."""
    for taint in taints:
        if taint.get("effect") in effects and not tolerated_by(taint, tolerations):
            return taint
    return None


def describe(taint: Taint) -> str:
    """``{key: value}``, as the scheduler's messages print a taint."""
    return f"{{{taint.get('key', '')}: {taint.get('value') or ''}}}"
