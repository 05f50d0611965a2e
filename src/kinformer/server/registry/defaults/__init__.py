"""Defaulting of built-in kinds, as kube-apiserver applies it to every object it decodes.

:func:`set_defaults` fills in what a client left out, per (group, kind), following kube-apiserver
1.32's SetDefaults rules; it never overwrites a value the client set. Custom resources are defaulted
from their structural schema elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

from . import core, groups, workloads
from .pod import Obj, default_pod

__all__ = ["set_defaults"]

_DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Pod"): default_pod,
    ("", "PodTemplate"): core.default_pod_template_object,
    ("", "ReplicationController"): core.default_replication_controller,
    ("", "Service"): core.default_service,
    ("", "Secret"): core.default_secret,
    ("", "Namespace"): core.default_namespace,
    ("", "Endpoints"): core.default_endpoints,
    ("", "PersistentVolume"): core.default_persistent_volume,
    ("", "PersistentVolumeClaim"): core.default_persistent_volume_claim,
    ("", "LimitRange"): core.default_limit_range,
    ("apps", "Deployment"): workloads.default_deployment,
    ("apps", "DaemonSet"): workloads.default_daemon_set,
    ("apps", "StatefulSet"): workloads.default_stateful_set,
    ("apps", "ReplicaSet"): workloads.default_replica_set,
    ("batch", "Job"): workloads.default_job,
    ("batch", "CronJob"): workloads.default_cron_job,
    ("networking.k8s.io", "NetworkPolicy"): groups.default_network_policy,
    ("rbac.authorization.k8s.io", "RoleBinding"): groups.default_role_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): groups.default_role_binding,
    ("storage.k8s.io", "StorageClass"): groups.default_storage_class,
    ("storage.k8s.io", "CSIDriver"): groups.default_csi_driver,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): groups.default_validating_webhooks,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): groups.default_mutating_webhooks,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): groups.default_admission_policy,
    ("scheduling.k8s.io", "PriorityClass"): groups.default_priority_class,
    ("discovery.k8s.io", "EndpointSlice"): groups.default_endpoint_slice,
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): groups.default_flow_schema,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): groups.default_priority_level,
    ("apiregistration.k8s.io", "APIService"): groups.default_apiservice,
}
_BY_VERSION: dict[tuple[str, str, str], Callable[[Obj], None]] = {
    ("autoscaling", "v2", "HorizontalPodAutoscaler"): groups.default_hpa_v2,
    ("autoscaling", "v1", "HorizontalPodAutoscaler"): groups.default_hpa_v1,
}


def set_defaults(group: str, version: str, kind: str, obj: Obj) -> None:
    """Fill in the defaults of a built-in ``kind`` in place (no-op for kinds without any)."""
    fill = _DEFAULTERS.get((group, kind)) or _BY_VERSION.get((group, version, kind))
    if fill is not None:
        fill(obj)
