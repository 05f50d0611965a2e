"""The ``/scale`` subresource's view of an object: an autoscaling/v1 ``Scale``.

Built-in workloads scale ``spec.replicas`` and report ``status.replicas`` and their ``spec.selector``.
Custom resources use the paths their CRD declares (``specReplicasPath``, ``statusReplicasPath``,
``labelSelectorPath``, JSON paths such as ``.spec.size``); a missing value reads as 0 (no selector).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import SelectorError
from ...selectors import label_selector_from_dict

BUILTIN_PATHS = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}


def _path(text: Any) -> list[str]:
    return [p for p in str(text or "").split(".") if p]


def _get(obj: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def scale_paths(info: Any) -> Mapping[str, Any]:
    return getattr(info, "scale_paths", None) or BUILTIN_PATHS


def scale_of(info: Any, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The Scale view of ``obj`` (see the module docstring)."""
    paths = scale_paths(info)
    meta = obj.get("metadata") or {}
    smeta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta}
    status: dict[str, Any] = {"replicas": _count(_get(obj, _path(paths.get("statusReplicasPath"))))}
    if paths is BUILTIN_PATHS:
        selector = (obj.get("spec") or {}).get("selector")
        try:
            text = str(label_selector_from_dict(selector)) if isinstance(selector, Mapping) else ""
        except SelectorError:
            text = ""
    else:
        found = _get(obj, _path(paths.get("labelSelectorPath"))) if paths.get("labelSelectorPath") else None
        text = found if isinstance(found, str) else ""
    if text:
        status["selector"] = text
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": smeta,
            "spec": {"replicas": _count(_get(obj, _path(paths.get("specReplicasPath"))))}, "status": status}


def set_replicas(info: Any, obj: dict[str, Any], replicas: int) -> None:
    """Write ``replicas`` at the object's spec replicas path, creating the maps on the way."""
    path = _path(scale_paths(info).get("specReplicasPath")) or ["spec", "replicas"]
    cur = obj
    for part in path[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    cur[path[-1]] = replicas
