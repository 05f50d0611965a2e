"""The Pod strategy, with the admission plugins every cluster runs on new pods.

On create, after defaulting, as kube-apiserver 1.32 with its default admission chain does it:

* ServiceAccount admission: ``serviceAccountName`` defaults to ``default`` (mirrored to the
  deprecated ``serviceAccount``) and, unless ``automountServiceAccountToken`` is false, a projected
  ``kube-api-access-xxxxx`` volume (token, ``kube-root-ca.crt``, namespace) is mounted read-only at
  :data:`TOKEN_MOUNT_PATH` in every container;
* DefaultTolerationSeconds: NoExecute tolerations of ``not-ready`` and ``unreachable`` for 300 s each (the
  strategy's ``default_toleration_seconds``, one number for both or a (not-ready, unreachable) pair:
  kube-apiserver's ``--default-not-ready-toleration-seconds`` and ``--default-unreachable-toleration-seconds``),
  each unless a toleration of the pod already tolerates that
  taint's NoExecute effect (an empty key or effect tolerating every one);
* Priority: ``priority: 0`` and ``preemptionPolicy: PreemptLowerPriority`` without a priority class;
* the status starts as ``Pending`` with the pod's QoS class (and ``PodScheduled=False`` while
  scheduling gates remain).

On update of the main resource only what kube lets change may change: container images,
``activeDeadlineSeconds``, added tolerations, ``terminationGracePeriodSeconds`` and scheduling gate
removal (otherwise 422 ``spec: Forbidden: pod updates may not change fields other than ...``).

A ``status`` write (kube's ValidatePodStatusUpdate) may set ``nominatedNodeName`` only to a valid node name,
and may not bring a terminated container back unless the pod would restart it: any container under
``restartPolicy: Always``, a failed one (exit code not 0) under ``OnFailure``, a restartable init container
(its own ``restartPolicy: Always``); ephemeral containers are never restarted.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

from kinformer.names import is_dns1123_subdomain
from kinformer.server.machinery.causes import invalid

from .base import Cause, KindStrategy, ReturnedOnDeleteMixin, forbidden

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # kube's random-suffix alphabet (no vowels, no 0/1/3)
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_EXPIRATION_SECONDS = 3607
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DEFAULT_TOLERATION_SECONDS = 300
_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


def token_volume() -> dict[str, Any]:
    """The projected service account volume of a new pod (a fresh random name)."""
    return {
        "name": "kube-api-access-" + "".join(random.choices(NAME_ALPHABET, k=5)),
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                            "path": "namespace"}]}},
            ],
        },
    }


def _containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The init containers, then the containers, of ``spec`` (entries that are not objects skipped)."""
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                out.append(c)
    return out


def _mounts_token(container: dict[str, Any]) -> bool:
    for m in container.get("volumeMounts") or ():
        if (type(m) is dict or isinstance(m, Mapping)) and m.get("mountPath") == TOKEN_MOUNT_PATH:
            return True
    return False


def admit_service_account(spec: dict[str, Any], containers: list[dict[str, Any]]) -> None:
    """``containers``: :func:`_containers` of ``spec``."""
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    if spec.get("automountServiceAccountToken") is False:
        return
    for container in containers:
        if _mounts_token(container):
            return
    volume = token_volume()
    volumes = volumes if isinstance(volumes := spec.get("volumes"), list) else []
    spec["volumes"] = [*volumes, volume]
    for container in containers:
        mounts = mounts if isinstance(mounts := container.get("volumeMounts"), list) else []
        container["volumeMounts"] = [*mounts, {"mountPath": TOKEN_MOUNT_PATH, "name": volume["name"],
                                               "readOnly": True}]


#: DefaultTolerationSeconds' setting: one number of seconds for both taints, or (not-ready, unreachable).
TolerationSeconds = int | tuple[int, int]


def toleration_pair(seconds: TolerationSeconds) -> tuple[int, int]:
    """``seconds`` as (not-ready, unreachable); ValueError unless each is an int >= 0."""
    pair = seconds if isinstance(seconds, tuple) else (seconds, seconds)
    if len(pair) != 2 or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in pair):
        raise ValueError(f"default_toleration_seconds must be an int >= 0 or a (not-ready, unreachable) pair of "
                         f"them, got {seconds!r}")
    return pair


def admit_tolerations(spec: dict[str, Any], seconds: TolerationSeconds = DEFAULT_TOLERATION_SECONDS) -> None:
    tolerations = tolerations if isinstance(tolerations := spec.get("tolerations"), list) else []
    tolerated = {t.get("key") or "" for t in tolerations
                 if (type(t) is dict or isinstance(t, Mapping)) and t.get("effect") in ("NoExecute", None, "")}
    if "" in tolerated:  # an empty key (operator Exists) tolerates every taint
        return
    added = [{"effect": "NoExecute", "key": taint, "operator": "Exists", "tolerationSeconds": after}
             for taint, after in zip(_TAINTS, toleration_pair(seconds), strict=True) if taint not in tolerated]
    if added:
        spec["tolerations"] = [*tolerations, *added]


def admit_priority(spec: dict[str, Any]) -> None:
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _cpu_memory(resources: Mapping[str, Any], key: str) -> tuple[str | None, str | None]:
    """The cpu and memory quantities of ``resources[key]`` (requests or limits) as text, None where unset."""
    values = resources.get(key)
    if type(values) is not dict and not isinstance(values, Mapping):
        return None, None
    return (str(values["cpu"]) if "cpu" in values else None,
            str(values["memory"]) if "memory" in values else None)


def qos_class(spec: Mapping[str, Any], containers: list[dict[str, Any]] | None = None) -> str:
    """BestEffort without any cpu/memory request or limit; Guaranteed when every container's limits
    cover cpu and memory and equal its requests; Burstable otherwise (``containers``: :func:`_containers`
    of ``spec`` when the caller has them)."""
    any_set = False
    guaranteed = True
    for container in _containers(spec) if containers is None else containers:
        resources = container.get("resources")
        if type(resources) is dict or isinstance(resources, Mapping):
            req_cpu, req_memory = _cpu_memory(resources, "requests")
            cpu, memory = _cpu_memory(resources, "limits")
        else:
            req_cpu = req_memory = cpu = memory = None
        if not any_set and (req_cpu is not None or req_memory is not None or cpu is not None or memory is not None):
            any_set = True
        if guaranteed and (cpu is None or memory is None or req_cpu not in (None, cpu)
                           or req_memory not in (None, memory)):
            guaranteed = False
        if any_set and not guaranteed:
            return "Burstable"
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _mutable_view(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with the fields a pod update may change replaced by the old values."""
    view = copy.deepcopy(dict(spec))
    for key in ("containers", "initContainers"):
        old_list = old_spec.get(key) or []
        for i, container in enumerate(view.get(key) or []):
            if isinstance(container, dict) and i < len(old_list) and isinstance(old_list[i], Mapping):
                container["image"] = old_list[i].get("image")
    for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "schedulingGates"):
        if key in old_spec:
            view[key] = old_spec[key]
        else:
            view.pop(key, None)
    old_tolerations = list(old_spec.get("tolerations") or [])
    new_tolerations = list(view.get("tolerations") or [])
    if new_tolerations[:len(old_tolerations)] == old_tolerations:
        view["tolerations"] = old_tolerations
        if not old_tolerations and "tolerations" not in old_spec:
            view.pop("tolerations", None)
    return view


def _terminated(status: Any) -> Mapping[str, Any] | None:
    state = status.get("state") if isinstance(status, Mapping) else None
    terminated = state.get("terminated") if isinstance(state, Mapping) else None
    return terminated if isinstance(terminated, Mapping) else None


def _restartable_init_containers(spec: Mapping[str, Any]) -> set[str]:
    return {str(c.get("name")) for c in spec.get("initContainers") or () if isinstance(c, Mapping)
            and c.get("restartPolicy") == "Always"}


def _state_transition_causes(field: str, statuses: Any, old_statuses: Any, restart_policy: Any,
                             restartable: set[str] | frozenset[str] = frozenset()) -> list[Cause]:
    """kube's ValidateContainerStateTransition (and its init-container form, whose restartable containers are
    ``restartable``): a container terminated in ``old_statuses`` that the pod would not restart may not be
    non-terminated in ``statuses``; the field is the old status's index."""
    if restart_policy == "Always" or not isinstance(old_statuses, list) or not isinstance(statuses, list):
        return []
    running = {s.get("name") for s in statuses if isinstance(s, Mapping) and _terminated(s) is None}
    causes = []
    for i, old in enumerate(old_statuses):
        terminated = _terminated(old)
        if terminated is None or old.get("name") in restartable:
            continue
        if terminated.get("exitCode") != 0 and restart_policy == "OnFailure":
            continue
        if old.get("name") in running:
            causes.append(forbidden(f"{field}[{i}].state", "may not be transitioned to non-terminated state"))
    return causes


class PodStrategy(ReturnedOnDeleteMixin, KindStrategy):
    def __init__(self, default_toleration_seconds: TolerationSeconds = DEFAULT_TOLERATION_SECONDS) -> None:
        self.default_toleration_seconds = toleration_pair(default_toleration_seconds)

    def create(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        containers = _containers(spec)  # the admissions below change what they hold, never which they are
        admit_service_account(spec, containers)
        admit_tolerations(spec, self.default_toleration_seconds)
        admit_priority(spec)
        status: dict[str, Any] = {"phase": "Pending", "qosClass": qos_class(spec, containers)}
        if spec.get("schedulingGates"):
            status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                     "message": "Scheduling is blocked due to non-empty scheduling gates",
                                     "lastProbeTime": None, "lastTransitionTime": None}]
        obj["status"] = status

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        spec, old_spec = obj.get("spec"), old.get("spec")
        if not isinstance(spec, Mapping) or not isinstance(old_spec, Mapping) or spec == old_spec:
            return []
        causes: list[Cause] = []
        old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or () if isinstance(g, Mapping)]
        new_gates = [g.get("name") for g in spec.get("schedulingGates") or () if isinstance(g, Mapping)]
        if any(g not in old_gates for g in new_gates):
            causes.append(forbidden("spec.schedulingGates", "only deletion is allowed, but found new scheduling "
                                                            "gate"))
        if _mutable_view(spec, old_spec) != dict(old_spec):
            causes.append(forbidden("spec", _POD_UPDATE_FORBIDDEN))
        return causes

    def status_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        status, old_status = obj.get("status"), old.get("status")
        if not isinstance(status, Mapping):
            return []
        old_status = old_status if isinstance(old_status, Mapping) else {}
        old_spec = old.get("spec")
        old_spec = old_spec if isinstance(old_spec, Mapping) else {}
        causes: list[Cause] = []
        nominated = status.get("nominatedNodeName")
        if nominated and isinstance(nominated, str) and nominated != old_status.get("nominatedNodeName"):
            causes += [invalid("status.nominatedNodeName", nominated, msg) for msg in is_dns1123_subdomain(nominated)]
        policy = old_spec.get("restartPolicy")
        causes += _state_transition_causes("status.containerStatuses", status.get("containerStatuses"),
                                           old_status.get("containerStatuses"), policy)
        causes += _state_transition_causes("status.initContainerStatuses", status.get("initContainerStatuses"),
                                           old_status.get("initContainerStatuses"), policy,
                                           _restartable_init_containers(old_spec))
        causes += _state_transition_causes("status.ephemeralContainerStatuses",
                                           status.get("ephemeralContainerStatuses"),
                                           old_status.get("ephemeralContainerStatuses"), "Never")
        return causes
