"""Validation shared by the workload kinds: label selectors against their pod template, template rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Cause, get_path, immutable, invalid, not_supported, render, required


def selector_text(selector: Any) -> str:
    """A LabelSelector as kube's field errors print it (Go's %#v of v1.LabelSelector)."""
    if not isinstance(selector, Mapping):
        return "nil"
    labels = selector.get("matchLabels")
    exprs = selector.get("matchExpressions")
    labels_text = render(labels) if labels else "map[string]string(nil)"
    exprs_text = (f"[]v1.LabelSelectorRequirement{{{len(exprs)} requirement(s)}}" if exprs
                  else "[]v1.LabelSelectorRequirement(nil)")
    return f"v1.LabelSelector{{MatchLabels:{labels_text}, MatchExpressions:{exprs_text}}}"


def selector_cause(field: str, selector: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field,
            "message": f"Invalid value: {selector_text(selector)}: {detail}"}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """Whether ``labels`` satisfy a LabelSelector (matchLabels and matchExpressions)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, Mapping):
            return False
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or ()
        present = key in labels
        label = labels[key] if present else None  # type: ignore[index]  # (present: key is a label key)
        if ((op == "In" and (not present or label not in values))
                or (op == "NotIn" and present and label in values)
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present)):
            return False
    return True


def template_labels(template: Any) -> dict[str, Any]:
    labels = get_path(template, "metadata", "labels") if isinstance(template, Mapping) else None
    return dict(labels) if isinstance(labels, Mapping) else {}


def selector_causes(spec: Mapping[str, Any], *, kind: str, path: str = "spec") -> list[Cause]:
    """A required, non-empty selector that matches the template's labels."""
    selector = spec.get("selector")
    if not isinstance(selector, Mapping):
        return [required(f"{path}.selector")]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return [selector_cause(f"{path}.selector", selector, f"empty selector is invalid for {kind}")]
    labels = template_labels(spec.get("template"))
    if not selector_matches(selector, labels):
        return [invalid(f"{path}.template.metadata.labels", labels, "`selector` does not match template `labels`")]
    return []


def selector_immutable(spec: Any, old_spec: Any, path: str = "spec") -> list[Cause]:
    new = spec.get("selector") if isinstance(spec, Mapping) else None
    old = old_spec.get("selector") if isinstance(old_spec, Mapping) else None
    if new == old:
        return []
    return [selector_cause(f"{path}.selector", new, "field is immutable")]


def restart_policy_causes(template: Any, allowed: tuple[str, ...], path: str) -> list[Cause]:
    """The template's (defaulted) restartPolicy must be one of ``allowed``."""
    policy = get_path(template, "spec", "restartPolicy")
    if policy is None or policy in allowed:
        return []
    return [not_supported(f"{path}.spec.restartPolicy", policy, list(allowed))]


def replicas_causes(spec: Mapping[str, Any], path: str = "spec") -> list[Cause]:
    replicas = spec.get("replicas")
    if replicas is None:
        return []
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return [invalid(f"{path}.replicas", replicas, "must be greater than or equal to 0")]
    return []


def field_immutable(obj: Mapping[str, Any], old: Mapping[str, Any], *path: str) -> list[Cause]:
    return immutable(".".join(path), get_path(obj, *path), get_path(old, *path))
