"""What an object costs against a ResourceQuota: kube's quota evaluators (``pkg/quota/v1/evaluator/core`` and
``generic``), shared by the server's ResourceQuota admission and the simulated cluster's resourcequota controller.

Rules carried over from kube 1.32:

* pods cost ``pods``, ``count/pods`` and their compute resources: ``requests.cpu`` (also counted as ``cpu``),
  ``requests.memory`` (``memory``), ``requests.ephemeral-storage`` (``ephemeral-storage``), ``limits.cpu``,
  ``limits.memory``, ``limits.ephemeral-storage``, ``requests.hugepages-*`` and extended resources
  (``requests.<domain>/<name>``); a pod's request is the sum over its containers or the largest init container's,
  whichever is larger, plus its overhead. A pod in phase Failed or Succeeded, or past its deletion grace period,
  costs nothing. Pods are charged when created only.
* a pod must name each of ``cpu``, ``memory``, ``requests.*`` and ``limits.*`` of those two that a quota
  tracks, in every container: ``must specify limits.cpu for: web``.
* pod scopes: ``Terminating`` (``activeDeadlineSeconds`` set) / ``NotTerminating``, ``BestEffort`` (no cpu or
  memory request or limit anywhere) / ``NotBestEffort``, ``PriorityClass`` (``In``, ``NotIn``, ``Exists``,
  ``DoesNotExist`` on ``spec.priorityClassName``). Every other kind matches no scoped quota.
* services cost ``services``, ``count/services``, ``services.loadbalancers`` (type LoadBalancer) and
  ``services.nodeports`` (one per port of a NodePort or LoadBalancer service; with
  ``allocateLoadBalancerNodePorts: false`` only the ports naming a ``nodePort``); charged on create and update.
* persistentvolumeclaims cost ``persistentvolumeclaims``, ``requests.storage`` and the same per storage class
  (``<class>.storageclass.storage.k8s.io/requests.storage`` and ``.../persistentvolumeclaims``); create and update.
* every other resource costs one ``count/<resource>.<group>`` (``count/<resource>`` in the core group), and the
  core configmaps, secrets, replicationcontrollers and resourcequotas also their legacy name; create only.

Not carried over: the ``CrossNamespacePodAffinity`` and ``VolumeAttributesClass`` scopes, restartable (sidecar)
init containers' special sum, in-place pod resize, and the admission configuration's ``limitedResources``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from .quantity import Quantity

__all__ = ["ResourceList", "constraints_error", "handles", "matches", "matching_resources", "pretty", "usage"]

ResourceList = dict[str, Quantity]
ONE = Quantity(Fraction(1))
ZERO = Quantity(Fraction(0))
COMPUTE = ("cpu", "memory", "ephemeral-storage")
POD_RESOURCES = frozenset({"pods", "count/pods", *COMPUTE, *(f"requests.{r}" for r in COMPUTE),
                           *(f"limits.{r}" for r in COMPUTE)})
#: What a container must name when a quota tracks it (kube keeps this for backward compatibility).
VALIDATED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
SERVICE_RESOURCES = frozenset({"services", "count/services", "services.nodeports", "services.loadbalancers"})
PVC_RESOURCES = frozenset({"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"})
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
LEGACY_COUNTED = frozenset({"configmaps", "secrets", "replicationcontrollers", "resourcequotas"})
TERMINAL_PHASES = ("Failed", "Succeeded")


def count_name(plural: str, group: str) -> str:
    """``count/<resource>.<group>``, or ``count/<resource>`` in the core group."""
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def handles(plural: str, group: str, operation: str) -> bool:
    """Whether a write of ``operation`` (CREATE, UPDATE) to the resource can change quota usage."""
    if not group and plural in ("services", "persistentvolumeclaims"):
        return operation in ("CREATE", "UPDATE")
    return operation == "CREATE"


def matching_resources(plural: str, group: str, names: Iterable[str]) -> list[str]:
    """The resource names among ``names`` (a quota's hard limits) that objects of this resource cost."""
    return sorted(n for n in names if _costs(plural, group, n))


def _costs(plural: str, group: str, name: str) -> bool:
    if name == count_name(plural, group):
        return True
    if group:
        return False
    if plural == "pods":
        return name in POD_RESOURCES or name.startswith("requests.hugepages-") or \
            (name.startswith("requests.") and "/" in name)
    if plural == "services":
        return name in SERVICE_RESOURCES
    if plural == "persistentvolumeclaims":
        return name in PVC_RESOURCES or (STORAGE_CLASS_SUFFIX in name and
                                         name.endswith(("/requests.storage", "/persistentvolumeclaims")))
    return plural in LEGACY_COUNTED and name == plural


# -- usage ------------------------------------------------------------------------------------------------


def usage(plural: str, group: str, obj: Mapping[str, Any], now: datetime.datetime) -> ResourceList:
    """What ``obj`` costs (every resource name it may be charged under, zeros included)."""
    if not group and plural == "pods":
        return pod_usage(obj, now)
    if not group and plural == "services":
        return service_usage(obj)
    if not group and plural == "persistentvolumeclaims":
        return pvc_usage(obj)
    out = {count_name(plural, group): ONE}
    if not group and plural in LEGACY_COUNTED:
        out[plural] = ONE
    return out


def _quantity(value: Any) -> Quantity | None:
    try:
        return Quantity.parse(value)
    except ValueError:
        return None


def _resources(container: Mapping[str, Any], kind: str) -> ResourceList:
    resources = container.get("resources") or {}
    out = {k: q for k, v in (resources.get(kind) or {}).items() if (q := _quantity(v)) is not None}
    if kind == "requests":  # kube's defaulting: a limit without a request is also the request
        for k, v in (resources.get("limits") or {}).items():
            if k not in out and (q := _quantity(v)) is not None:
                out[k] = q
    return out


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """The sum of two resource lists (names in either)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def _max(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        if k not in out or v.amount > out[k].amount:
            out[k] = v
    return out


def pod_totals(pod: Mapping[str, Any], kind: str) -> ResourceList:
    """The pod's ``requests`` or ``limits``: max(sum of containers, each init container), plus overhead."""
    spec = pod.get("spec") or {}
    total: ResourceList = {}
    for c in spec.get("containers") or ():
        total = add(total, _resources(c, kind))
    for c in spec.get("initContainers") or ():
        total = _max(total, _resources(c, kind))
    overhead = {k: q for k, v in (spec.get("overhead") or {}).items() if (q := _quantity(v)) is not None}
    if overhead and (kind == "requests" or total):
        total = add(total, {k: v for k, v in overhead.items() if kind == "requests" or k in total})
    return total


def counted_pod(pod: Mapping[str, Any], now: datetime.datetime) -> bool:
    """kube's ``QuotaV1Pod``: a finished pod, or one past its deletion grace period, costs nothing."""
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return False
    meta = pod.get("metadata") or {}
    deleted, grace = meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds")
    if deleted and grace is not None:
        at = datetime.datetime.fromisoformat(str(deleted).replace("Z", "+00:00"))
        return now <= at + datetime.timedelta(seconds=int(grace))
    return True


def pod_usage(pod: Mapping[str, Any], now: datetime.datetime) -> ResourceList:
    if not counted_pod(pod, now):
        return {}
    out: ResourceList = {"pods": ONE, "count/pods": ONE}
    for name, q in pod_totals(pod, "requests").items():
        if name in COMPUTE:
            out[name] = out[f"requests.{name}"] = q
        elif name.startswith("hugepages-") or "/" in name:
            out[f"requests.{name}"] = q
    for name, q in pod_totals(pod, "limits").items():
        if name in COMPUTE:
            out[f"limits.{name}"] = q
    return out


def service_usage(svc: Mapping[str, Any]) -> ResourceList:
    spec = svc.get("spec") or {}
    ports = [p for p in spec.get("ports") or () if isinstance(p, Mapping)]
    out: ResourceList = {"services": ONE, "count/services": ONE, "services.loadbalancers": ZERO,
                         "services.nodeports": ZERO}
    kind = spec.get("type")
    if kind == "NodePort":
        out["services.nodeports"] = Quantity(Fraction(len(ports)))
    elif kind == "LoadBalancer":
        out["services.loadbalancers"] = ONE
        counted = ports if spec.get("allocateLoadBalancerNodePorts") is not False else \
            [p for p in ports if p.get("nodePort")]
        out["services.nodeports"] = Quantity(Fraction(len(counted)))
    return out


def pvc_usage(pvc: Mapping[str, Any]) -> ResourceList:
    spec = pvc.get("spec") or {}
    out: ResourceList = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    cls = spec.get("storageClassName") or \
        ((pvc.get("metadata") or {}).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
    if cls:
        out[f"{cls}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = ONE
    request = _quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
    allocated = _quantity(((pvc.get("status") or {}).get("allocatedResources") or {}).get("storage"))
    if allocated is not None and (request is None or allocated.amount > request.amount):
        request = allocated
    if request is not None:
        out["requests.storage"] = request
        if cls:
            out[f"{cls}{STORAGE_CLASS_SUFFIX}requests.storage"] = request
    return out


# -- scopes -----------------------------------------------------------------------------------------------


def scope_selectors(quota: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A quota's ``spec.scopes`` (each as an ``Exists`` requirement) and its ``scopeSelector`` requirements."""
    spec = quota.get("spec") or {}
    out: list[Mapping[str, Any]] = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or ()]
    out += list((spec.get("scopeSelector") or {}).get("matchExpressions") or ())
    return out


def best_effort(pod: Mapping[str, Any]) -> bool:
    """kube's QoS class BestEffort: no container requests or limits cpu or memory."""
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = c.get("resources") or {}
        for kind in ("requests", "limits"):
            for name, value in (resources.get(kind) or {}).items():
                q = _quantity(value)
                if name in ("cpu", "memory") and q is not None and q.amount != 0:
                    return False
    return True


def _pod_scope_matches(selector: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    scope, op = selector.get("scopeName"), selector.get("operator")
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        values = selector.get("values") or ()
        return {"In": bool(name) and name in values, "NotIn": not name or name not in values,
                "Exists": bool(name), "DoesNotExist": not name}.get(str(op), False)
    terminating = spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] >= 0
    found = {"Terminating": terminating, "NotTerminating": not terminating, "BestEffort": best_effort(pod),
             "NotBestEffort": not best_effort(pod)}.get(str(scope))
    if found is None:
        return False
    return not found if op == "DoesNotExist" else found


def matches(quota: Mapping[str, Any], plural: str, group: str, obj: Mapping[str, Any]) -> bool:
    """Whether ``quota`` covers ``obj``: it limits something the object costs, and every scope matches."""
    hard = (quota.get("status") or {}).get("hard") or {}
    if not matching_resources(plural, group, hard):
        return False
    return all_scopes_match(quota, plural, group, obj)


def all_scopes_match(quota: Mapping[str, Any], plural: str, group: str, obj: Mapping[str, Any]) -> bool:
    selectors = scope_selectors(quota)
    if not selectors:
        return True
    if group or plural != "pods":
        return False
    return all(_pod_scope_matches(s, obj) for s in selectors)


# -- constraints and messages -----------------------------------------------------------------------------


def constraints_error(plural: str, group: str, required: Iterable[str], obj: Mapping[str, Any]) -> str | None:
    """kube's pod evaluator ``Constraints``: each container names what the quota tracks of cpu and memory."""
    wanted = set(required) & VALIDATED
    if group or plural != "pods" or not wanted:
        return None
    spec = obj.get("spec") or {}
    missing: dict[str, set[str]] = {}
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        named = {f"requests.{n}" for n in _resources(c, "requests")} | set(_resources(c, "requests")) | \
            {f"limits.{n}" for n in _resources(c, "limits")}
        for resource in wanted - named:
            missing.setdefault(resource, set()).add(str(c.get("name") or ""))
    errors = [f"must specify {r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing)]
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


def pretty(resources: Mapping[str, Quantity]) -> str:
    """``a=1,b=2Gi``: names sorted, as kube's quota messages print resource lists."""
    return ",".join(f"{k}={resources[k]}" for k in sorted(resources))


def parse_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """A ResourceList from its JSON form (entries that are not quantities are dropped)."""
    return {k: q for k, v in (raw or {}).items() if (q := _quantity(v)) is not None}


def dump_list(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {k: str(v) for k, v in sorted(resources.items())}
