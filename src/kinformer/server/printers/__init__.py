"""Server-side printers: the ``meta.k8s.io`` Table machinery (:mod:`.table`) and kube's printer of each
built-in resource, one module per API group family; :func:`builtin_printer` picks one by (group, plural)."""

from __future__ import annotations

from .apps import DAEMONSET, DEPLOYMENT, REPLICASET, STATEFULSET
from .core import CONFIGMAP, ENDPOINTS, EVENT, LEASE, NAMESPACE, NODE, SECRET, SERVICE, SERVICEACCOUNT
from .custom import DEFAULT
from .pods import POD
from .table import Printer

_BUILTIN: dict[tuple[str, str], Printer] = {
    ("", "pods"): POD,
    ("", "services"): SERVICE,
    ("", "endpoints"): ENDPOINTS,
    ("", "nodes"): NODE,
    ("", "namespaces"): NAMESPACE,
    ("", "configmaps"): CONFIGMAP,
    ("", "secrets"): SECRET,
    ("", "serviceaccounts"): SERVICEACCOUNT,
    ("", "events"): EVENT,
    ("events.k8s.io", "events"): EVENT,
    ("apps", "deployments"): DEPLOYMENT,
    ("apps", "replicasets"): REPLICASET,
    ("apps", "statefulsets"): STATEFULSET,
    ("apps", "daemonsets"): DAEMONSET,
    ("coordination.k8s.io", "leases"): LEASE,
}


def builtin_printer(group: str, plural: str) -> Printer:
    """The printer kube uses for a built-in resource; the generic Name / Created At one otherwise."""
    return _BUILTIN.get((group, plural), DEFAULT)


def default_printer() -> Printer:
    """kube's generic table convertor: Name and Created At (RFC 3339)."""
    return DEFAULT


