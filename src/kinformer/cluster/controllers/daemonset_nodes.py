"""Which nodes a DaemonSet's pod belongs on, as kube 1.32's ``NodeShouldRunDaemonPod`` (pkg/controller/daemon)
with the scheduler's node-name, node-affinity and taint predicates it uses.

* a daemon pod tolerates, besides its template's tolerations, what kube adds to every daemon pod
  (``AddOrUpdateDaemonPodTolerations``): ``not-ready`` and ``unreachable`` NoExecute, ``disk-pressure``,
  ``memory-pressure``, ``pid-pressure`` and ``unschedulable`` NoSchedule, and ``network-unavailable``
  NoSchedule for host-network pods;
* should run: the template's ``nodeName`` (if any) is the node's, ``nodeSelector`` and required node affinity
  (``matchExpressions`` on labels with In/NotIn/Exists/DoesNotExist/Gt/Lt, ``matchFields`` on
  ``metadata.name``; terms ORed, requirements ANDed, an empty term matches nothing) match, and every
  NoSchedule/NoExecute taint is tolerated; should continue running: the same, except that only NoExecute
  taints must be tolerated;
* a daemon pod is aimed at its node by required node affinity on ``metadata.name``
  (``ReplaceDaemonSetPodNodeNameNodeAffinity``), the scheduler binds it; :func:`target_node` reads the node back
  (``GetTargetNodeName``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

NODE_NAME_FIELD = "metadata.name"
_DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
_HOST_NETWORK_TOLERATIONS = (("node.kubernetes.io/network-unavailable", "NoSchedule"),)


# -- tolerations ---------------------------------------------------------------------------------------------


def _same_toleration(a: Obj, b: Obj) -> bool:
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))


def add_daemon_tolerations(spec: dict[str, Any]) -> None:
    """``AddOrUpdateDaemonPodTolerations``: add kube's daemon tolerations to a pod spec (in place)."""
    wanted = _DAEMON_TOLERATIONS + (_HOST_NETWORK_TOLERATIONS if spec.get("hostNetwork") else ())
    tolerations = list(spec.get("tolerations") or ())
    for key, effect in wanted:
        toleration = {"key": key, "operator": "Exists", "effect": effect}
        for i, old in enumerate(tolerations):
            if _same_toleration(old, toleration):
                tolerations[i] = toleration
                break
        else:
            tolerations.append(toleration)
    spec["tolerations"] = tolerations


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """``Toleration.ToleratesTaint``."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(taints: Iterable[Obj], tolerations: Sequence[Obj], effects: tuple[str, ...]) -> Obj | None:
    """The first taint of one of ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


# -- node affinity -------------------------------------------------------------------------------------------


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _requirement_matches(req: Obj, values_of: Mapping[str, str]) -> bool:
    key, op, values = req.get("key", ""), req.get("operator", ""), list(req.get("values") or ())
    present = key in values_of
    value = values_of.get(key, "")
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _int_or_none(value), _int_or_none(values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: Obj, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    expressions, field_reqs = term.get("matchExpressions") or (), term.get("matchFields") or ()
    if not expressions and not field_reqs:
        return False
    return (all(_requirement_matches(r, labels) for r in expressions)
            and all(_requirement_matches(r, fields) for r in field_reqs))


def required_affinity_matches(pod_spec: Obj, node: Obj) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: nodeSelector and required node affinity."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    fields = {NODE_NAME_FIELD: node["metadata"]["name"]}
    return any(_term_matches(term, labels, fields) for term in required.get("nodeSelectorTerms") or ())


# -- the daemon pod and its node -----------------------------------------------------------------------------


def should_run(ds: Obj, node: Obj) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (a daemon pod should be created there, an existing one may keep running)."""
    template_spec = copy.deepcopy(dict(ds["spec"]["template"].get("spec") or {}))
    node_name = node["metadata"]["name"]
    if template_spec.get("nodeName") not in (None, "", node_name):
        return False, False
    add_daemon_tolerations(template_spec)
    if not required_affinity_matches(template_spec, node):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or ()
    tolerations = template_spec["tolerations"]
    if untolerated_taint(taints, tolerations, ("NoExecute", "NoSchedule")) is not None:
        return False, untolerated_taint(taints, tolerations, ("NoExecute",)) is None
    return True, True


def aim_at_node(affinity: Mapping[str, Any] | None, node_name: str) -> dict[str, Any]:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: required node affinity for exactly ``node_name`` (each
    existing term keeps its label expressions, its field requirements become ``metadata.name In [node]``)."""
    requirement = {"key": NODE_NAME_FIELD, "operator": "In", "values": [node_name]}
    out = copy.deepcopy(dict(affinity or {}))
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = list((required or {}).get("nodeSelectorTerms") or ())
    if not terms:
        terms = [{"matchFields": [requirement]}]
    else:
        terms = [{**term, "matchFields": [requirement]} for term in terms]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    return out


def target_node(pod: Obj) -> str | None:
    """``GetTargetNodeName``: the pod's node, or the node named by the first ``metadata.name In`` field
    requirement of its required node affinity (None when there is none, or it names several nodes)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for req in term.get("matchFields") or ():
            if req.get("key") == NODE_NAME_FIELD and req.get("operator") == "In":
                values = list(req.get("values") or ())
                return str(values[0]) if len(values) == 1 else None
    return None


__all__ = ["add_daemon_tolerations", "aim_at_node", "required_affinity_matches", "should_run", "target_node",
           "tolerates", "untolerated_taint"]
