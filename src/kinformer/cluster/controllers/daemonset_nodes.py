"""Which nodes a DaemonSet's pod belongs on, as kube 1.32's ``NodeShouldRunDaemonPod`` (pkg/controller/daemon)
with the scheduler's node-name, node-affinity and taint predicates it uses.

* a daemon pod tolerates, besides its template's tolerations, what kube adds to every daemon pod
  (``AddOrUpdateDaemonPodTolerations``): ``not-ready`` and ``unreachable`` NoExecute, ``disk-pressure``,
  ``memory-pressure``, ``pid-pressure`` and ``unschedulable`` NoSchedule, and ``network-unavailable``
  NoSchedule for host-network pods;
* should run: the template's ``nodeName`` (if any) is the node's, ``nodeSelector`` and required node affinity
  match (:mod:`kinformer.cluster.nodeaffinity`, as the scheduler matches them), and every NoSchedule/NoExecute
  taint is tolerated (:mod:`kinformer.cluster.taints`); should continue running: the same, except that only
  NoExecute taints must be tolerated;
* a daemon pod is aimed at its node by required node affinity on ``metadata.name``
  (``ReplaceDaemonSetPodNodeNameNodeAffinity``), the scheduler binds it; :func:`target_node` reads the node back
  (``GetTargetNodeName``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kinformer.cluster.nodeaffinity import required_affinity_matches
from kinformer.cluster.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    NOT_READY,
    UNREACHABLE,
    UNSCHEDULABLE,
    first_untolerated,
    node_taints,
)

Obj = Mapping[str, Any]

NODE_NAME_FIELD = "metadata.name"
_DAEMON_TOLERATIONS = (
    (NOT_READY, NO_EXECUTE),
    (UNREACHABLE, NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    (UNSCHEDULABLE, NO_SCHEDULE),
)
_HOST_NETWORK_TOLERATIONS = (("node.kubernetes.io/network-unavailable", NO_SCHEDULE),)


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




# -- the daemon pod and its node -----------------------------------------------------------------------------


def should_run(ds: Obj, node: Obj) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (a daemon pod should be created there, an existing one may keep running)."""
    template_spec = copy.deepcopy(dict(ds["spec"]["template"].get("spec") or {}))
    node_name = node["metadata"]["name"]
    if template_spec.get("nodeName") not in (None, "", node_name):
        return False, False
    add_daemon_tolerations(template_spec)
    if not required_affinity_matches({"spec": template_spec}, node):
        return False, False
    taints, tolerations = node_taints(node), template_spec["tolerations"]
    if first_untolerated(taints, tolerations, (NO_EXECUTE, NO_SCHEDULE)) is not None:
        return False, first_untolerated(taints, tolerations, (NO_EXECUTE,)) is None
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


__all__ = ["add_daemon_tolerations", "aim_at_node", "should_run", "target_node"]
