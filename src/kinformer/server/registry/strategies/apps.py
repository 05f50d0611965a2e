"""Strategies of apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets (and ControllerRevisions).

All four workloads carry ``metadata.generation`` and a status subresource; their selectors must
match their pod template and never change; their pods must restart Always.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Cause, GenerationStrategy, KindStrategy, forbidden, get_path
from .workload_rules import replicas_causes, restart_policy_causes, selector_causes, selector_immutable

TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


class _Workload(GenerationStrategy):
    kind_word = ""

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return []
        return (selector_causes(spec, kind=self.kind_word) + replicas_causes(spec)
                + restart_policy_causes(spec.get("template"), ("Always",), "spec.template"))

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return selector_immutable(obj.get("spec"), old.get("spec"))


class DeploymentStrategy(_Workload):
    """Generation also moves on annotation changes (they are copied to the ReplicaSets)."""

    kind_word = "deployment"

    def generation_changed(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
        return (obj.get("spec") != old.get("spec")
                or get_path(obj, "metadata", "annotations") != get_path(old, "metadata", "annotations"))


class ReplicaSetStrategy(_Workload):
    kind_word = "replicaset"

    def initial_status(self) -> dict[str, Any]:
        return {"replicas": 0}


_STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds")


class StatefulSetStrategy(_Workload):
    kind_word = "statefulset"

    def initial_status(self) -> dict[str, Any]:
        return {"availableReplicas": 0, "replicas": 0}

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
        fixed = {k: v for k, v in spec.items() if k not in _STS_MUTABLE}
        old_fixed = {k: v for k, v in old_spec.items() if k not in _STS_MUTABLE}
        if fixed != old_fixed:
            return [forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                      "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                                      "'minReadySeconds' are forbidden")]
        return []


class DaemonSetStrategy(_Workload):
    """The template generation annotation starts at 1 and moves with every template change."""

    kind_word = "daemonset"

    def initial_status(self) -> dict[str, Any]:
        return {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0,
                "numberReady": 0}

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return []
        return (selector_causes(spec, kind=self.kind_word)
                + restart_policy_causes(spec.get("template"), ("Always",), "spec.template"))

    def create(self, obj: dict[str, Any]) -> None:
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[TEMPLATE_GENERATION] = "1"

    def update(self, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        old_value = (get_path(old, "metadata", "annotations") or {}).get(TEMPLATE_GENERATION, "1")
        try:
            generation = int(old_value)
        except ValueError:
            generation = 1
        if get_path(obj, "spec", "template") != get_path(old, "spec", "template"):
            generation += 1
        obj["metadata"].setdefault("annotations", {})[TEMPLATE_GENERATION] = str(generation)


class ControllerRevisionStrategy(KindStrategy):
    """ControllerRevisions: data and revision never change."""

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        if obj.get("data") != old.get("data"):
            return [forbidden("data", "field is immutable")]
        return []


STRATEGIES: dict[str, KindStrategy] = {
    "deployments": DeploymentStrategy(),
    "replicasets": ReplicaSetStrategy(),
    "statefulsets": StatefulSetStrategy(),
    "daemonsets": DaemonSetStrategy(),
    "controllerrevisions": ControllerRevisionStrategy(),
}
