"""Fields the built-in schemas list as ``required`` that kube-apiserver 1.32's validation does not require.

A schema's ``required`` list names the Go struct fields without ``omitempty``; kube-apiserver decodes a missing
one as its zero value and validates that value, so a field whose zero value passes ``pkg/apis/<group>/validation``
is optional in fact, and a request without it is accepted. Each entry names the validation that decides, from
kubernetes/kubernetes at v1.32:

* ``StatefulSetSpec.serviceName``: ValidateStatefulSetSpec does not require it (a StatefulSet without a
  governing Service).
* ``ControllerRevision.revision``: ValidateControllerRevision checks it is not negative (``data`` is what it
  requires).
* ``PriorityClass.value``: ValidatePriorityClass bounds it only from above.
* Status counters (DaemonSet, ReplicaSet, StatefulSet, ReplicationController, HorizontalPodAutoscaler v1/v2,
  PodDisruptionBudget): the status validations check each with ValidateNonnegativeField, which 0 passes.
* Status conditions of DaemonSets, Deployments, ReplicaSets, StatefulSets, Namespaces and Nodes: their status
  validations never look at conditions.
* ``ContainerStatus.ready/restartCount/image/imageID`` and ``ContainerStateTerminated.exitCode``:
  ValidatePodStatusUpdate does not require them (0 is an exit code).
* ``NodeSystemInfo``, ``AttachedVolume``, ``DaemonEndpoint.Port`` (node status) and
  ``VolumeAttachmentStatus.attached``: not validated.
* ``ISCSIVolumeSource.lun`` (and the PersistentVolume source): validateISCSIVolumeSource checks 0..255.
* ``metav1.Condition.message``: ValidateCondition only bounds its length.
* ``CustomResourceDefinitionVersion.served``: ValidateCustomResourceDefinitionVersion takes ``false``
  (only ``storage`` is counted: exactly one version stores).

Invariant: :func:`required` only removes names from a definition's list; every other required field stays the
schema's (the validations in :mod:`.registry.validation` and :mod:`.registry.strategies` add what kube checks beyond
it).
"""

from __future__ import annotations

__all__ = ["NOT_REQUIRED", "required"]

_APPS = "io.k8s.api.apps.v1."
_CORE = "io.k8s.api.core.v1."

NOT_REQUIRED: dict[str, frozenset[str]] = {
    _APPS + "StatefulSetSpec": frozenset({"serviceName"}),
    _APPS + "ControllerRevision": frozenset({"revision"}),
    "io.k8s.api.scheduling.v1.PriorityClass": frozenset({"value"}),
    _APPS + "DaemonSetStatus": frozenset({"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
                                          "numberReady"}),
    _APPS + "ReplicaSetStatus": frozenset({"replicas"}),
    _APPS + "StatefulSetStatus": frozenset({"replicas"}),
    _CORE + "ReplicationControllerStatus": frozenset({"replicas"}),
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerStatus": frozenset({"currentReplicas", "desiredReplicas"}),
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus": frozenset({"desiredReplicas"}),
    "io.k8s.api.policy.v1.PodDisruptionBudgetStatus": frozenset({"disruptionsAllowed", "currentHealthy",
                                                                 "desiredHealthy", "expectedPods"}),
    **{_APPS + kind: frozenset({"type", "status"}) for kind in (
        "DaemonSetCondition", "DeploymentCondition", "ReplicaSetCondition", "StatefulSetCondition")},
    _CORE + "NamespaceCondition": frozenset({"type", "status"}),
    _CORE + "NodeCondition": frozenset({"type", "status"}),
    _CORE + "ContainerStatus": frozenset({"ready", "restartCount", "image", "imageID"}),
    _CORE + "ContainerStateTerminated": frozenset({"exitCode"}),
    _CORE + "NodeSystemInfo": frozenset({"machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                         "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                                         "operatingSystem", "architecture"}),
    _CORE + "AttachedVolume": frozenset({"name", "devicePath"}),
    _CORE + "DaemonEndpoint": frozenset({"Port"}),
    "io.k8s.api.storage.v1.VolumeAttachmentStatus": frozenset({"attached"}),
    _CORE + "ISCSIVolumeSource": frozenset({"lun"}),
    _CORE + "ISCSIPersistentVolumeSource": frozenset({"lun"}),
    "io.k8s.apimachinery.pkg.apis.meta.v1.Condition": frozenset({"message"}),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion": frozenset({"served"}),
}


def required(definition: str, listed: tuple[str, ...]) -> tuple[str, ...]:
    """The fields of ``definition`` kube's validation requires, of the ``listed`` ones its schema names."""
    optional = NOT_REQUIRED.get(definition)
    return listed if optional is None else tuple(name for name in listed if name not in optional)
