"""Server-side printers: the ``meta.k8s.io`` Table machinery (:mod:`.table`) and kube 1.32's printer of each
built-in resource, one module per API group family; :func:`builtin_printer` picks one by (group, plural).

Resources kube serves with its generic convertor (Roles, ClusterRoles, LimitRanges, CSIStorageCapacities,
CustomResourceDefinitions, and anything not listed here) print Name / Created At.
"""

from __future__ import annotations

from . import apiserver, apps, autoscaling, batch, cluster, core, networking, rbac, storage
from .custom import DEFAULT
from .events import EVENT
from .pods import POD
from .table import Printer

_BUILTIN: dict[tuple[str, str], Printer] = {
    ("", "pods"): POD,
    ("", "services"): core.SERVICE,
    ("", "endpoints"): core.ENDPOINTS,
    ("", "nodes"): core.NODE,
    ("", "namespaces"): core.NAMESPACE,
    ("", "configmaps"): core.CONFIGMAP,
    ("", "secrets"): core.SECRET,
    ("", "serviceaccounts"): core.SERVICEACCOUNT,
    ("", "replicationcontrollers"): core.REPLICATIONCONTROLLER,
    ("", "podtemplates"): core.PODTEMPLATE,
    ("", "componentstatuses"): core.COMPONENTSTATUS,
    ("", "resourcequotas"): core.RESOURCEQUOTA,
    ("", "persistentvolumes"): storage.PERSISTENTVOLUME,
    ("", "persistentvolumeclaims"): storage.PERSISTENTVOLUMECLAIM,
    ("", "events"): EVENT,
    ("events.k8s.io", "events"): EVENT,
    ("apps", "deployments"): apps.DEPLOYMENT,
    ("apps", "replicasets"): apps.REPLICASET,
    ("apps", "statefulsets"): apps.STATEFULSET,
    ("apps", "daemonsets"): apps.DAEMONSET,
    ("apps", "controllerrevisions"): apps.CONTROLLERREVISION,
    ("batch", "jobs"): batch.JOB,
    ("batch", "cronjobs"): batch.CRONJOB,
    ("autoscaling", "horizontalpodautoscalers"): autoscaling.HORIZONTALPODAUTOSCALER,
    ("networking.k8s.io", "ingresses"): networking.INGRESS,
    ("networking.k8s.io", "ingressclasses"): networking.INGRESSCLASS,
    ("networking.k8s.io", "networkpolicies"): networking.NETWORKPOLICY,
    ("discovery.k8s.io", "endpointslices"): networking.ENDPOINTSLICE,
    ("policy", "poddisruptionbudgets"): cluster.PODDISRUPTIONBUDGET,
    ("coordination.k8s.io", "leases"): cluster.LEASE,
    ("scheduling.k8s.io", "priorityclasses"): cluster.PRIORITYCLASS,
    ("node.k8s.io", "runtimeclasses"): cluster.RUNTIMECLASS,
    ("certificates.k8s.io", "certificatesigningrequests"): cluster.CERTIFICATESIGNINGREQUEST,
    ("rbac.authorization.k8s.io", "rolebindings"): rbac.ROLEBINDING,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): rbac.CLUSTERROLEBINDING,
    ("storage.k8s.io", "storageclasses"): storage.STORAGECLASS,
    ("storage.k8s.io", "csidrivers"): storage.CSIDRIVER,
    ("storage.k8s.io", "csinodes"): storage.CSINODE,
    ("storage.k8s.io", "volumeattachments"): storage.VOLUMEATTACHMENT,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): apiserver.MUTATINGWEBHOOKCONFIGURATION,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): apiserver.VALIDATINGWEBHOOKCONFIGURATION,
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): apiserver.VALIDATINGADMISSIONPOLICY,
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"):
        apiserver.VALIDATINGADMISSIONPOLICYBINDING,
    ("flowcontrol.apiserver.k8s.io", "flowschemas"): apiserver.FLOWSCHEMA,
    ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"): apiserver.PRIORITYLEVELCONFIGURATION,
    ("apiregistration.k8s.io", "apiservices"): apiserver.APISERVICE,
}


def builtin_printer(group: str, plural: str) -> Printer:
    """The printer kube uses for a built-in resource; the generic Name / Created At one otherwise."""
    return _BUILTIN.get((group, plural), DEFAULT)


def default_printer() -> Printer:
    """kube's generic table convertor: Name and Created At (RFC 3339)."""
    return DEFAULT


def builtin_resources() -> list[tuple[str, str]]:
    """The (group, plural) pairs that have a printer of their own."""
    return list(_BUILTIN)


def scale_printer() -> Printer:
    """kube's printer of an autoscaling/v1 Scale (the ``/scale`` subresource)."""
    return autoscaling.SCALE
