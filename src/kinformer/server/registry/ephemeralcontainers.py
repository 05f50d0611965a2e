"""The ``pods/<name>/ephemeralcontainers`` update: only ``spec.ephemeralContainers`` is taken from the client.

Invariant (kube's): an ephemeral container, once added, is never changed or removed; the rest of the pod is
kept as stored whatever the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..machinery.jsoncopy import json_copy
from .defaults import set_defaults

__all__ = ["ephemeral_update_causes", "take_ephemeral_containers"]


def take_ephemeral_containers(old: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``old`` with the client's ``spec.ephemeralContainers``, defaulted (the subresource's update)."""
    result = json_copy(old)
    wanted = (new.get("spec") or {}).get("ephemeralContainers")
    if wanted:
        result.setdefault("spec", {})["ephemeralContainers"] = wanted
    else:
        result.get("spec", {}).pop("ephemeralContainers", None)
    set_defaults("", "v1", "Pod", result)
    return result


def ephemeral_update_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """kube's rule for the subresource: ephemeral containers are only ever added, never changed or removed."""
    before = {c.get("name"): c for c in (old.get("spec") or {}).get("ephemeralContainers") or ()}
    after = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers") or ()}
    causes = []
    for name, container in before.items():
        if name not in after:
            causes.append({"reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
                           "message": f'Forbidden: existing ephemeral containers "{name}" may not be removed'})
        elif after[name] != container:
            causes.append({"reason": "FieldValueForbidden", "field": "spec.ephemeralContainers",
                           "message": f'Forbidden: existing ephemeral containers "{name}" may not be changed'})
    return causes
