"""kube-apiserver's bootstrap RBAC policy: the default ClusterRoles and ClusterRoleBindings, and seeding files.

Invariants:

* :func:`ensure_bootstrap_policy` creates each default object that the watch cache does not hold; existing
  objects (possibly edited by an admin) are left alone, and several replicas starting at once only race
  to an ``AlreadyExists`` that is ignored.
* ``admin``, ``edit`` and ``view`` are aggregated ClusterRoles, as in kube: their rules are filled by the
  aggregation controller (:mod:`kinformer.server.controllers.aggregation`) from ``system:aggregate-to-*`` and any
  ClusterRole labelled ``rbac.authorization.k8s.io/aggregate-to-<name>: "true"``.
* A seed file (``--authorization-policy-file``) holds RBAC objects only (YAML documents, a JSON object,
  or a ``List``); :func:`load_seed_file` refuses anything else with a message naming the document. Seed
  objects are created, or replace the stored ones, at every start; their namespaces are created if missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..machinery import status as st
from .rbac import GROUP, PREFIXES

__all__ = ["bootstrap_objects", "ensure_bootstrap_policy", "load_seed_file", "seed_objects"]

AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-"
_API_VERSION = f"{GROUP}/v1"
_READ = ("get", "list", "watch")
_WRITE = ("create", "delete", "deletecollection", "patch", "update")
_ALL = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_KINDS = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
          "ClusterRoleBinding": "clusterrolebindings"}


def _r(verbs: Iterable[str], groups: Iterable[str], resources: Iterable[str]) -> dict[str, Any]:
    return {"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)}


def _urls(verbs: Iterable[str], urls: Iterable[str]) -> dict[str, Any]:
    return {"verbs": list(verbs), "nonResourceURLs": list(urls)}


def _meta(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}


def _role(name: str, rules: list[dict[str, Any]], *, aggregate_to: str = "",
          aggregates: str = "") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": _API_VERSION, "kind": "ClusterRole",
                           "metadata": _meta(name, {AGGREGATE_LABEL + aggregate_to: "true"} if aggregate_to else None)}
    if aggregates:
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_LABEL + aggregates: "true"}}]}
    obj["rules"] = rules
    return obj


def _binding(name: str, groups: Iterable[str], role: str = "", *,
             service_account: str = "") -> dict[str, Any]:
    subjects = [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups]
    if service_account:
        subjects.append({"kind": "ServiceAccount", "name": service_account, "namespace": "kube-system"})
    return {"apiVersion": _API_VERSION, "kind": "ClusterRoleBinding", "metadata": _meta(name),
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role or name}, "subjects": subjects}


_VIEW_RULES = [
    _r(_READ, [""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                     "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                     "services/status"]),
    _r(_READ, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                     "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    _r(_READ, [""], ["namespaces"]),
    _r(_READ, ["discovery.k8s.io"], ["endpointslices"]),
    _r(_READ, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                         "deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
                         "statefulsets", "statefulsets/scale", "statefulsets/status"]),
    _r(_READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _r(_READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _r(_READ, ["extensions"], ["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                               "deployments/status", "ingresses", "ingresses/status", "networkpolicies",
                               "replicasets", "replicasets/scale", "replicasets/status",
                               "replicationcontrollers/scale"]),
    _r(_READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _r(_READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]

_EDIT_RULES = [
    _r(_READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
    _r(["impersonate"], [""], ["serviceaccounts"]),
    _r(_WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _r(["create"], [""], ["pods/eviction"]),
    _r(_WRITE, [""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                      "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"]),
    _r(["create"], [""], ["serviceaccounts/token"]),
    _r(_WRITE, ["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                          "replicasets/scale", "statefulsets", "statefulsets/scale"]),
    _r(_WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _r(_WRITE, ["batch"], ["cronjobs", "jobs"]),
    _r(_WRITE, ["extensions"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses",
                                "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"]),
    _r(_WRITE, ["policy"], ["poddisruptionbudgets"]),
    _r(_WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    _r(_ALL, ["coordination.k8s.io"], ["leases"]),
]

_ADMIN_RULES = [
    _r(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _r(_ALL, [GROUP], ["rolebindings", "roles"]),
]

_HEALTH = ["/healthz", "/livez", "/readyz", "/version", "/version/"]

_CERTIFICATES = "certificates.k8s.io"
_SIGNERS = {"kube-apiserver-client": "kubernetes.io/kube-apiserver-client",
            "kube-apiserver-client-kubelet": "kubernetes.io/kube-apiserver-client-kubelet",
            "kubelet-serving": "kubernetes.io/kubelet-serving",
            "legacy-unknown": "kubernetes.io/legacy-unknown"}


def _signers(verb: str, names: Iterable[str]) -> dict[str, Any]:
    return {**_r([verb], [_CERTIFICATES], ["signers"]), "resourceNames": list(names)}


# kube-controller-manager's certificate controllers: they approve kubelet client requests and sign for the
# kubernetes.io signers (CertificateApproval and CertificateSigning check these verbs on ``signers``).
_CERTIFICATE_CONTROLLER_RULES = [
    _r(["delete", "get", "list", "watch"], [_CERTIFICATES], ["certificatesigningrequests"]),
    _r(["update"], [_CERTIFICATES], ["certificatesigningrequests/approval", "certificatesigningrequests/status"]),
    _signers("approve", [_SIGNERS["kube-apiserver-client-kubelet"]]),
    _signers("sign", [_SIGNERS["legacy-unknown"], _SIGNERS["kube-apiserver-client"],
                      _SIGNERS["kube-apiserver-client-kubelet"], _SIGNERS["kubelet-serving"]]),
    _r(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
    _r(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
]


def bootstrap_objects() -> list[dict[str, Any]]:
    """The default ClusterRoles, then the default ClusterRoleBindings (fresh dicts on every call)."""
    roles = [
        _role("cluster-admin", [_r(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _role("admin", [], aggregates="admin"),
        _role("edit", [], aggregates="edit", aggregate_to="admin"),
        _role("view", [], aggregates="view", aggregate_to="edit"),
        _role("system:aggregate-to-admin", _ADMIN_RULES, aggregate_to="admin"),
        _role("system:aggregate-to-edit", _EDIT_RULES, aggregate_to="edit"),
        _role("system:aggregate-to-view", _VIEW_RULES, aggregate_to="view"),
        _role("system:discovery", [_urls(["get"], ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                                   "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])]),
        _role("system:basic-user", [
            _r(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _r(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])]),
        _role("system:public-info-viewer", [_urls(["get"], _HEALTH)]),
        _role("system:auth-delegator", [_r(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
                                        _r(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"])]),
        _role("system:service-account-issuer-discovery",
              [_urls(["get"], ["/.well-known/openid-configuration", "/openid/v1/jwks"])]),
        _role("system:monitoring", [_urls(["get"], ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics",
                                                    "/metrics/slis", "/readyz", "/readyz/*"])]),
        *(_role(f"system:certificates.k8s.io:{short}-approver", [_signers("approve", [signer])])
          for short, signer in _SIGNERS.items()),
        _role("system:controller:certificate-controller", _CERTIFICATE_CONTROLLER_RULES),
    ]
    bindings = [
        _binding("cluster-admin", ["system:masters"]),
        _binding("system:discovery", ["system:authenticated"]),
        _binding("system:basic-user", ["system:authenticated"]),
        _binding("system:public-info-viewer", ["system:authenticated", "system:unauthenticated"]),
        _binding("system:service-account-issuer-discovery", ["system:serviceaccounts"]),
        _binding("system:monitoring", ["system:monitoring"]),
        _binding("system:controller:certificate-controller", [], service_account="certificate-controller"),
    ]
    return roles + bindings


async def seed_objects(store: Any, registry: Any, cache: Any, objects: Iterable[Mapping[str, Any]], *,
                       replace: bool = False) -> int:
    """Create each RBAC object the cache does not hold (with ``replace``, overwrite the ones it does).

    Returns how many objects were written. The namespaces of namespaced objects are created when missing.
    """
    written = 0
    for doc in objects:
        kind = doc["kind"]
        info = registry.get(GROUP, "v1", _KINDS[kind])
        meta = doc.get("metadata") or {}
        namespace = meta.get("namespace", "default") if info.namespaced else ""
        name = meta["name"]
        bucket = cache.buckets.get(PREFIXES[kind])
        key = f"{PREFIXES[kind]}{namespace}/{name}" if namespace else f"{PREFIXES[kind]}{name}"
        exists = bucket is not None and key in bucket.objects
        if exists and not replace:
            continue
        obj = json.loads(json.dumps(doc))
        if namespace:
            await _ensure_namespace(store, registry, namespace)
        if exists:
            await store.mutate(info, namespace, name, lambda old, new=obj: {**new, "metadata": {
                **old["metadata"], **{k: v for k, v in new["metadata"].items() if k in ("labels", "annotations")}}})
        else:
            try:
                await store.create(info, namespace, store.prepare_create(info, namespace, obj))
            except st.StatusError as e:
                if e.code != 409:
                    raise
                continue
        written += 1
    return written


async def _ensure_namespace(store: Any, registry: Any, namespace: str) -> None:
    info = registry.get("", "v1", "namespaces")
    try:
        await store.create(info, "", store.prepare_create(info, "", {"metadata": {"name": namespace}}))
    except st.StatusError as e:
        if e.code != 409:
            raise


async def ensure_bootstrap_policy(store: Any, registry: Any, cache: Any) -> int:
    """Create the default ClusterRoles and ClusterRoleBindings that do not exist yet; returns how many."""
    return await seed_objects(store, registry, cache, bootstrap_objects())


def _documents(path: str | os.PathLike[str]) -> list[Any]:
    text = Path(path).read_text(encoding="utf-8")
    try:
        if os.fspath(path).endswith(".json"):
            return [json.loads(text)]
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except (ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {'JSON' if os.fspath(path).endswith('.json') else 'YAML'}: {exc}"
                         ) from None


def load_seed_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The RBAC objects of a seed file (see the module invariants); ``ValueError`` names a bad document."""
    objects: list[dict[str, Any]] = []
    for i, doc in enumerate(_documents(path)):
        items = (doc.get("items") if isinstance(doc, Mapping) and doc.get("kind") == "List" else [doc]) or []
        for j, obj in enumerate(items):
            where = f"{path}: document {i}" + (f" item {j}" if len(items) > 1 else "")
            if not isinstance(obj, Mapping) or obj.get("kind") not in _KINDS:
                raise ValueError(f"{where}: expected an rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding "
                                 "or ClusterRoleBinding (the old rule-list format is gone: write each rule as a "
                                 "Role or ClusterRole and bind it; see docs/security.md)")
            if obj.get("apiVersion") != _API_VERSION:
                raise ValueError(f"{where}: apiVersion must be {_API_VERSION}")
            if not isinstance(obj.get("metadata"), Mapping) or not obj["metadata"].get("name"):
                raise ValueError(f"{where}: metadata.name is required")
            objects.append(dict(obj))
    return objects
