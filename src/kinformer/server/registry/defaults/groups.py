"""Defaults of the API groups beyond core, apps and batch (kube-apiserver 1.32's SetDefaults_* and markers)."""

from __future__ import annotations

from ...schema.builtin_conversion import drop_round_trip_annotations
from .pod import Obj, _dict, _items

RBAC_GROUP = "rbac.authorization.k8s.io"


def default_network_policy(obj: Obj) -> None:
    """Port protocol TCP; policyTypes Ingress, plus Egress when egress rules exist."""
    spec = _dict(obj, "spec")
    if spec is None:
        return
    for direction in ("ingress", "egress"):
        for rule in _items(spec, direction):
            for port in _items(rule, "ports"):
                port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        types = ["Ingress"]
        if spec.get("egress"):
            types.append("Egress")
        spec["policyTypes"] = types


def default_role_binding(obj: Obj) -> None:
    """Subjects' apiGroup: "" for service accounts, rbac.authorization.k8s.io for users and groups."""
    for subject in _items(obj, "subjects"):
        if not subject.get("apiGroup"):
            kind = subject.get("kind")
            if kind == "ServiceAccount":
                subject["apiGroup"] = ""
            elif kind in ("User", "Group"):
                subject["apiGroup"] = RBAC_GROUP


def default_storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def default_csi_driver(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        spec = obj["spec"] = {}
    spec.setdefault("attachRequired", True)
    spec.setdefault("podInfoOnMount", False)
    spec.setdefault("storageCapacity", False)
    spec.setdefault("fsGroupPolicy", "ReadWriteOnceWithFSType")
    spec.setdefault("volumeLifecycleModes", ["Persistent"])
    spec.setdefault("requiresRepublish", False)
    spec.setdefault("seLinuxMount", False)


def _default_rules(rules: list[Obj]) -> None:
    for rule in rules:
        rule.setdefault("scope", "*")


def _default_webhook(hook: Obj, *, mutating: bool) -> None:
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    hook.setdefault("timeoutSeconds", 10)
    if mutating:
        hook.setdefault("reinvocationPolicy", "Never")
    _default_rules(_items(hook, "rules"))
    service = _dict(_dict(hook, "clientConfig") or {}, "service")
    if service is not None:
        service.setdefault("port", 443)


def default_apiservice(obj: Obj) -> None:
    service = _dict(_dict(obj, "spec") or {}, "service")
    if service is not None:
        service.setdefault("port", 443)


def default_validating_webhooks(obj: Obj) -> None:
    for hook in _items(obj, "webhooks"):
        _default_webhook(hook, mutating=False)


def default_mutating_webhooks(obj: Obj) -> None:
    for hook in _items(obj, "webhooks"):
        _default_webhook(hook, mutating=True)


def default_admission_policy(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    if spec is None:
        return
    spec.setdefault("failurePolicy", "Fail")
    constraints = _dict(spec, "matchConstraints")
    if constraints is not None:
        constraints.setdefault("matchPolicy", "Equivalent")
        constraints.setdefault("namespaceSelector", {})
        constraints.setdefault("objectSelector", {})
        _default_rules(_items(constraints, "resourceRules"))


def default_priority_class(obj: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def default_endpoint_slice(obj: Obj) -> None:
    for port in _items(obj, "ports"):
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")


_SCALE_UP = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
             "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                          {"type": "Percent", "value": 100, "periodSeconds": 15}]}
# scale-down stabilization stays unset: the controller applies its own window
_SCALE_DOWN = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def default_hpa_v2(obj: Obj) -> None:
    """Min one replica, 80 % CPU when no metric is given; behavior rules filled in when behavior is set."""
    drop_round_trip_annotations(obj)  # kube's v2 decoding drops the annotations v1 keeps v2 fields in
    spec = _dict(obj, "spec")
    if spec is None:
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    behavior = _dict(spec, "behavior")
    if behavior is None:
        return
    for key, rules in (("scaleUp", _SCALE_UP), ("scaleDown", _SCALE_DOWN)):
        current = _dict(behavior, key)
        if current is None:
            current = behavior[key] = {}
        for field, value in rules.items():
            current.setdefault(field, [dict(p) for p in value] if isinstance(value, list) else value)


def default_hpa_v1(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    if spec is not None:
        spec.setdefault("minReplicas", 1)


def default_flow_schema(obj: Obj) -> None:
    spec = _dict(obj, "spec")
    if spec is not None and not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = 1000


def default_priority_level(obj: Obj) -> None:
    """Limited levels: 30 nominal shares, nothing lent, queuing 64 queues / hand 8 / 50 per queue."""
    spec = _dict(obj, "spec") or {}
    limited = _dict(spec, "limited")
    if limited is not None:
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)
        queuing = _dict(_dict(limited, "limitResponse") or {}, "queuing")
        if queuing is not None:
            queuing.setdefault("queues", 64)
            queuing.setdefault("handSize", 8)
            queuing.setdefault("queueLengthLimit", 50)
    exempt = _dict(spec, "exempt")
    if exempt is not None:
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
