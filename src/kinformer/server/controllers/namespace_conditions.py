"""The status conditions of a terminating namespace, as kube's namespace controller reports them.

While content remains, a namespace being deleted carries five conditions: discovery, group-version
parsing and content deletion succeeded (status False), ``NamespaceContentRemaining`` (what is left,
per ``<resource>.<group>``) and ``NamespaceFinalizersRemaining`` (which finalizers hold it up).
``lastTransitionTime`` moves only when a condition's status changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

_FIXED = (
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered", "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
)


def remaining_content(objects: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[dict[str, int], dict[str, int]]:
    """Counts per ``resource.group`` and per finalizer of the (resource label, object) pairs left."""
    resources: dict[str, int] = {}
    finalizers: dict[str, int] = {}
    for label, obj in objects:
        resources[label] = resources.get(label, 0) + 1
        for fin in (obj.get("metadata") or {}).get("finalizers") or ():
            finalizers[fin] = finalizers.get(fin, 0) + 1
    return resources, finalizers


def terminating_conditions(resources: Mapping[str, int], finalizers: Mapping[str, int], now: str,
                           old: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The conditions for what is left (see the module docstring)."""
    previous = {c.get("type"): c for c in old if isinstance(c, Mapping)}
    wanted = [(t, "False", r, m) for t, r, m in _FIXED]
    if resources:
        left = ", ".join(f"{k} has {v} resource instances" for k, v in sorted(resources.items()))
        wanted.append(("NamespaceContentRemaining", "True", "SomeResourcesRemain",
                       f"Some resources are remaining: {left}"))
    else:
        wanted.append(("NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"))
    if finalizers:
        held = ", ".join(f"{k} in {v} resource instances" for k, v in sorted(finalizers.items()))
        wanted.append(("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain",
                       f"Some content in the namespace has finalizers remaining: {held}"))
    else:
        wanted.append(("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers",
                       "All content-preserving finalizers finished"))
    out = []
    for type_, status, reason, message in wanted:
        prev = previous.get(type_)
        since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else now
        out.append({"type": type_, "status": status, "lastTransitionTime": since, "reason": reason,
                    "message": message})
    return out
