"""The enumerated fields of built-in kinds that kube-apiserver 1.32 validates, with the answer it gives.

kubernetes-validate's schemas carry no ``enum`` for these fields (only their descriptions list the values), so
this table supplies them. Facts from kubernetes/kubernetes at v1.32: ``pkg/apis/core/validation/validation.go``
(validateRestartPolicy, validateDNSPolicy, validatePullPolicy, validateContainerCommon's terminationMessagePolicy,
validateContainerPorts, validateResizePolicy, validateTolerations, validatePreemptionPolicy, validateOS, the
seccomp and AppArmor profile checks, validateHTTPGetAction, validateMountPropagation,
validateMountRecursiveReadOnly, validateAzureDisk, validateHostPathType, the topology spread constraint checks,
ValidateService, ValidatePersistentVolumeSpec, ValidatePersistentVolumeClaimSpec), ``pkg/apis/apps/validation``
(ValidateDeploymentStrategy, ValidateStatefulSetSpec), ``pkg/apis/batch/validation`` (validateJobSpec, the pod
failure policy checks, validateCronJobSpec), ``pkg/apis/networking/validation`` (ValidateNetworkPolicySpec,
validateHTTPIngressPath) and ``pkg/apis/policy/validation`` (ValidatePodDisruptionBudgetSpec); the same fields
carry ``enum`` in kube's OpenAPI v3 documents. The message is apimachinery's ``field.NotSupported``
(``Unsupported value: "X": supported values: "A", "B"``), the values in the order kube prints them: a literal list
where kube spells one out, sorted where it prints a set.

Invariants: :func:`apply` is called by the schema compiler once per definition; it only narrows the string node of
a listed field (an inline node of that one definition), so the compiled check enforces the enum at no extra cost.
An empty string passes where kube's defaulting replaces it before validation (``empty_ok``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kinformer.server.machinery.causes import Cause, invalid, not_supported

if TYPE_CHECKING:
    from kinformer.server.schema.schemas import Node

__all__ = ["BUILTIN_ENUMS", "Enum", "apply"]


@dataclass(frozen=True)
class Enum:
    """One enumerated field: its values in kube's order and how kube reports a value outside them."""

    values: tuple[str, ...]
    empty_ok: bool = False  # kube defaults "" before validating
    # where kube reports it, when not at the value's own path: "list" (a list of values at the list's path:
    # ``spec.accessModes``), "parent" (the field of a list item without the item's index:
    # ``volumeMounts.mountPropagation``), "owner" (the field of a list item at the list's path: ``resizePolicy``)
    at: str = ""
    invalid_detail: str = ""  # reported as Invalid with this detail instead of NotSupported

    def cause(self, path: str, value: Any) -> Cause:
        if self.at:
            path = re.sub(_AT[self.at][0], _AT[self.at][1], path)
        if self.invalid_detail:
            return invalid(path, value, self.invalid_detail)
        return not_supported(path, value, list(self.values))


_AT = {"list": (r"\[[^\]]*\]$", ""), "parent": (r"\[[^\]]*\](\.[^.\[\]]+)$", r"\1"),
       "owner": (r"\[[^\]]*\]\.[^.\[\]]+$", "")}


_CORE = "io.k8s.api.core.v1."
_PROTOCOLS = Enum(("SCTP", "TCP", "UDP"), empty_ok=True)
_PULL_POLICY = Enum(("Always", "IfNotPresent", "Never"), empty_ok=True)
_MESSAGE_POLICY = Enum(("File", "FallbackToLogsOnError"), empty_ok=True)
_ACCESS_MODES = Enum(("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"), at="list")
_VOLUME_MODES = Enum(("Block", "Filesystem"))

# (definition, field) -> Enum; a list field's enum applies to its items.
BUILTIN_ENUMS: dict[tuple[str, str], Enum] = {
    (_CORE + "PodSpec", "restartPolicy"): Enum(("Always", "OnFailure", "Never"), empty_ok=True),
    (_CORE + "PodSpec", "dnsPolicy"): Enum(("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
                                          empty_ok=True),
    (_CORE + "Container", "imagePullPolicy"): _PULL_POLICY,
    (_CORE + "EphemeralContainer", "imagePullPolicy"): _PULL_POLICY,
    (_CORE + "Container", "terminationMessagePolicy"): _MESSAGE_POLICY,
    (_CORE + "EphemeralContainer", "terminationMessagePolicy"): _MESSAGE_POLICY,
    (_CORE + "ContainerPort", "protocol"): _PROTOCOLS,
    (_CORE + "ServicePort", "protocol"): _PROTOCOLS,
    (_CORE + "Toleration", "operator"): Enum(("Equal", "Exists"), empty_ok=True),
    (_CORE + "Toleration", "effect"): Enum(("NoSchedule", "PreferNoSchedule", "NoExecute"), empty_ok=True),
    (_CORE + "PodSpec", "preemptionPolicy"): Enum(("PreemptLowerPriority", "Never"), empty_ok=True),
    (_CORE + "PodOS", "name"): Enum(("linux", "windows")),
    (_CORE + "PodSecurityContext", "fsGroupChangePolicy"): Enum(("Always", "OnRootMismatch")),
    (_CORE + "SeccompProfile", "type"): Enum(("Localhost", "RuntimeDefault", "Unconfined")),
    (_CORE + "AppArmorProfile", "type"): Enum(("Localhost", "RuntimeDefault", "Unconfined")),
    (_CORE + "HTTPGetAction", "scheme"): Enum(("HTTP", "HTTPS"), empty_ok=True),
    (_CORE + "VolumeMount", "mountPropagation"): Enum(("Bidirectional", "HostToContainer", "None"), at="parent"),
    (_CORE + "VolumeMount", "recursiveReadOnly"): Enum(("Disabled", "Enabled", "IfPossible"), at="parent"),
    (_CORE + "ContainerResizePolicy", "resourceName"): Enum(("cpu", "memory"), at="owner"),
    (_CORE + "ContainerResizePolicy", "restartPolicy"): Enum(("NotRequired", "RestartContainer"), at="owner"),
    (_CORE + "AzureDiskVolumeSource", "cachingMode"): Enum(("None", "ReadOnly", "ReadWrite")),
    (_CORE + "AzureDiskVolumeSource", "kind"): Enum(("Dedicated", "Managed", "Shared")),
    (_CORE + "HostPathVolumeSource", "type"): Enum(("", "BlockDevice", "CharDevice", "Directory",
                                                    "DirectoryOrCreate", "File", "FileOrCreate", "Socket")),
    (_CORE + "TopologySpreadConstraint", "whenUnsatisfiable"): Enum(("DoNotSchedule", "ScheduleAnyway")),
    (_CORE + "TopologySpreadConstraint", "nodeAffinityPolicy"): Enum(("Honor", "Ignore")),
    (_CORE + "TopologySpreadConstraint", "nodeTaintsPolicy"): Enum(("Honor", "Ignore")),
    (_CORE + "ServiceSpec", "type"): Enum(("ClusterIP", "ExternalName", "LoadBalancer", "NodePort"), empty_ok=True),
    (_CORE + "ServiceSpec", "sessionAffinity"): Enum(("ClientIP", "None"), empty_ok=True),
    (_CORE + "ServiceSpec", "externalTrafficPolicy"): Enum(("Cluster", "Local"), empty_ok=True),
    (_CORE + "ServiceSpec", "internalTrafficPolicy"): Enum(("Cluster", "Local"), empty_ok=True),
    (_CORE + "ServiceSpec", "ipFamilyPolicy"): Enum(("PreferDualStack", "RequireDualStack", "SingleStack"),
                                                   empty_ok=True),
    (_CORE + "ServiceSpec", "ipFamilies"): Enum(("IPv4", "IPv6")),
    (_CORE + "PersistentVolumeClaimSpec", "accessModes"): _ACCESS_MODES,
    (_CORE + "PersistentVolumeSpec", "accessModes"): _ACCESS_MODES,
    (_CORE + "PersistentVolumeClaimSpec", "volumeMode"): _VOLUME_MODES,
    (_CORE + "PersistentVolumeSpec", "volumeMode"): _VOLUME_MODES,
    (_CORE + "PersistentVolumeSpec", "persistentVolumeReclaimPolicy"): Enum(("Delete", "Recycle", "Retain"),
                                                                           empty_ok=True),
    ("io.k8s.api.apps.v1.DeploymentStrategy", "type"): Enum(("Recreate", "RollingUpdate"), empty_ok=True),
    ("io.k8s.api.apps.v1.StatefulSetSpec", "podManagementPolicy"): Enum(
        ("OrderedReady", "Parallel"), empty_ok=True, invalid_detail="must be 'OrderedReady' or 'Parallel'"),
    ("io.k8s.api.batch.v1.JobSpec", "completionMode"): Enum(("NonIndexed", "Indexed")),
    ("io.k8s.api.batch.v1.JobSpec", "podReplacementPolicy"): Enum(("TerminatingOrFailed", "Failed")),
    ("io.k8s.api.batch.v1.CronJobSpec", "concurrencyPolicy"): Enum(("Allow", "Forbid", "Replace"), empty_ok=True),
    ("io.k8s.api.batch.v1.PodFailurePolicyRule", "action"): Enum(("Count", "FailIndex", "FailJob", "Ignore")),
    ("io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement", "operator"): Enum(("In", "NotIn")),
    ("io.k8s.api.networking.v1.HTTPIngressPath", "pathType"): Enum(("Exact", "ImplementationSpecific", "Prefix")),
    ("io.k8s.api.networking.v1.NetworkPolicySpec", "policyTypes"): Enum(("Ingress", "Egress")),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetSpec", "unhealthyPodEvictionPolicy"): Enum(
        ("AlwaysAllow", "IfHealthyBudget")),
}

_BY_DEFINITION: dict[str, dict[str, Enum]] = {}
for (_definition, _field), _enum in BUILTIN_ENUMS.items():
    _BY_DEFINITION.setdefault(_definition, {})[_field] = _enum


def apply(definition: str, node: Node) -> None:
    """Give the listed string fields of ``definition``'s compiled ``node`` their enum and kube's cause."""
    for field, enum in _BY_DEFINITION.get(definition, {}).items():
        target = node.props.get(field)
        if target is not None and target.item is not None:
            target = target.item
        if target is None or target.types != ("string",) or target.struct:
            continue
        target.enum = enum.values + (("",) if enum.empty_ok else ())
        target.enum_cause = enum.cause
