"""Node selection as kube's scheduler and kubelet admit it (``k8s.io/component-helpers/scheduling/corev1``).

A pod matches a node when every ``spec.nodeSelector`` label equals the node's, and, with required node
affinity, at least one of ``nodeSelectorTerms`` matches. A term matches when all its ``matchExpressions``
(on labels: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``) and all its ``matchFields`` (only
``metadata.name``, with ``In`` / ``NotIn``) hold; a term with neither matches nothing, as does a term that
is invalid (``Gt`` / ``Lt`` need exactly one integer value; an unknown operator or field). ``NotIn`` and
``DoesNotExist`` hold for a missing label; ``Gt`` / ``Lt`` need the label to be an integer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Labels = Mapping[str, str]


def _integer(text: Any) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _requirement_holds(requirement: Mapping[str, Any], values: Labels) -> bool:
    key, operator = requirement.get("key", ""), requirement.get("operator")
    wanted = list(requirement.get("values") or ())
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        bound = _integer(wanted[0]) if len(wanted) == 1 else None
        actual = _integer(values[key]) if present else None
        if bound is None or actual is None:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether one ``NodeSelectorTerm`` matches ``node`` (see the module docstring)."""
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not all(_requirement_holds(r, labels) for r in expressions):
        return False
    node_fields = {"metadata.name": meta.get("name", "")}
    for requirement in fields:
        if requirement.get("key") not in node_fields or requirement.get("operator") not in ("In", "NotIn"):
            return False
        if not _requirement_holds(requirement, node_fields):
            return False
    return True


def required_affinity_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod's ``nodeSelector`` and required node affinity both admit ``node``."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(term_matches(term, node) for term in required.get("nodeSelectorTerms") or ())
