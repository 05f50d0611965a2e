"""Status conditions by the metav1.Condition rules (apimachinery ``meta.SetStatusCondition``).

``set_condition(status, type="Ready", status="True", reason="Copied")`` upserts ``status["conditions"]``:

* one condition per ``type``; a new one is appended, an existing one updated in place (order kept);
* ``lastTransitionTime`` is set when the condition is added or its ``status`` changes, never otherwise;
* ``reason`` and ``message`` are always brought up to date, and ``observedGeneration`` when given.

``status`` is one of True, False, Unknown; ``reason`` is required (a CamelCase word, as metav1 validates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.timestamps import rfc3339 as _rfc3339

__all__ = ["CONDITION_STATUSES", "find_condition", "remove_condition", "set_condition"]

CONDITION_STATUSES = ("True", "False", "Unknown")
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def find_condition(target: Mapping[str, Any], type: str) -> Mapping[str, Any] | None:
    """The condition of ``type`` in ``target["conditions"]``, or None."""
    for cond in target.get("conditions") or ():
        if cond.get("type") == type:
            return cond
    return None


def remove_condition(target: MutableMapping[str, Any], type: str) -> bool:
    """Remove the condition of ``type``; True if there was one."""
    conditions = target.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != type]
    if len(kept) == len(conditions):
        return False
    target["conditions"] = kept
    return True


def set_condition(target: MutableMapping[str, Any], *, type: str, status: str, reason: str,
                  message: str = "", observed_generation: int | None = None, clock: Clock = REAL_CLOCK) -> bool:
    """Upsert the condition ``type`` in ``target["conditions"]``; True if anything changed."""
    if not type:
        raise ValueError("a condition needs a type")
    if status not in CONDITION_STATUSES:
        raise ValueError(f"condition status must be one of {CONDITION_STATUSES}, got {status!r}")
    if not _REASON.match(reason or "") or len(reason) > 1024:
        raise ValueError(f"condition reason must be a CamelCase word of at most 1024 characters, got {reason!r}")
    desired: dict[str, Any] = {"type": type, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        desired["observedGeneration"] = observed_generation
    conditions = target.get("conditions")
    if conditions is None:
        conditions = target["conditions"] = []
    for i, cond in enumerate(conditions):
        if cond.get("type") != type:
            continue
        updated = dict(cond)
        if cond.get("status") != status or not cond.get("lastTransitionTime"):
            updated["lastTransitionTime"] = _rfc3339(clock.wall())
        updated.update(desired)
        changed = updated != cond
        conditions[i] = updated
        return changed
    desired["lastTransitionTime"] = _rfc3339(clock.wall())
    conditions.append(desired)
    return True
