"""Strategies of batch/v1: Jobs and CronJobs.

A Job's selector is generated from its uid unless ``spec.manualSelector`` is true: the template gets
``batch.kubernetes.io/controller-uid``/``job-name`` labels (and their legacy unprefixed forms) and the
selector matches the uid label. ``spec.selector`` and ``spec.template`` are immutable, except the
scheduling directives of a suspended Job that never started. Jobs are orphaned on delete by default
in batch/v1 (kube keeps that for compatibility).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .base import Cause, GenerationStrategy, get_path, invalid, required
from .workload_rules import restart_policy_causes, selector_causes, selector_immutable

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
_JOB_RESTART = ("OnFailure", "Never")
_SCHEDULING = ("nodeSelector", "tolerations", "affinity", "schedulingGates")
_CRON_FIELD = re.compile(r"^[\d*/,\-?A-Za-z]+$")
_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


class JobStrategy(GenerationStrategy):
    default_gc_policy = "Orphan"
    #: the Warning a DELETE without a propagation policy gets
    delete_warning = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")

    def create(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj["metadata"]
        template = spec.get("template")
        if not isinstance(template, dict):
            return
        tmeta = template.setdefault("metadata", {})
        labels = labels if isinstance(labels := tmeta.get("labels"), dict) else {}
        copied = meta.get("labels") == labels  # defaulting copied the template labels onto the Job
        uid, name = meta.get("uid", ""), meta.get("name", "")
        labels.update({CONTROLLER_UID: uid, JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name})
        tmeta["labels"] = labels
        spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}
        if copied or not meta.get("labels"):
            meta["labels"] = dict(labels)

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return [required("spec")]
        causes = selector_causes(spec, kind="job")
        causes += restart_policy_causes(spec.get("template"), _JOB_RESTART, "spec.template")
        for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
            value = spec.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                causes.append(invalid(f"spec.{field}", value, "must be greater than or equal to 0"))
        return causes

    def update_causes(self, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        causes = selector_immutable(obj.get("spec"), old.get("spec"))
        template, old_template = get_path(obj, "spec", "template"), get_path(old, "spec", "template")
        if template != old_template and not (self._scheduling_mutable(old)
                                             and _strip_scheduling(template) == _strip_scheduling(old_template)):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.template",
                           "message": "Invalid value: core.PodTemplateSpec{...}: field is immutable"})
        for field in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy"):
            if get_path(obj, "spec", field) != get_path(old, "spec", field):
                causes.append(invalid(f"spec.{field}", get_path(obj, "spec", field), "field is immutable"))
        return causes

    @staticmethod
    def _scheduling_mutable(old: Mapping[str, Any]) -> bool:
        """A suspended Job that never started may change its pods' scheduling directives and labels."""
        return get_path(old, "spec", "suspend") is True and not get_path(old, "status", "startTime")


def _strip_scheduling(template: Any) -> Any:
    if not isinstance(template, Mapping):
        return template
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k not in ("labels", "annotations")}
    spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in _SCHEDULING}
    return {**template, "metadata": meta, "spec": spec}


def schedule_causes(schedule: Any) -> list[Cause]:
    """A cron schedule: five fields or a macro (kube parses it with robfig/cron)."""
    if not schedule:
        return [required("spec.schedule")]
    if not isinstance(schedule, str):
        return [invalid("spec.schedule", schedule, "must be a string")]
    text = schedule
    if text.startswith(("TZ=", "CRON_TZ=")):
        return [invalid("spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field "
                                                   "instead")]
    if text in _CRON_MACROS or text.startswith("@every "):
        return []
    fields = text.split()
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        return [invalid("spec.schedule", schedule, f"expected exactly 5 fields, found {len(fields)}: {schedule}"
                        if len(fields) != 5 else "unparseable schedule")]
    return []


# the CronJob controller names each Job ``<cronjob>-<minutes since the epoch>``: 11 characters of a Job's 63
CRONJOB_NAME_MAX_LENGTH = 63 - 11


class CronJobStrategy(GenerationStrategy):
    def validate(self, info: Any, obj: Mapping[str, Any]) -> list[Cause]:
        """A new CronJob's name leaves room for its Jobs' suffix (only checked on create, as kube does)."""
        causes = self.causes(obj)
        name = (obj.get("metadata") or {}).get("name")
        if isinstance(name, str) and len(name) > CRONJOB_NAME_MAX_LENGTH:
            causes.append(invalid("metadata.name", name, f"must be no more than {CRONJOB_NAME_MAX_LENGTH} characters"))
        return causes

    def causes(self, obj: Mapping[str, Any]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return [required("spec")]
        causes = schedule_causes(spec.get("schedule"))
        policy = spec.get("concurrencyPolicy")
        if policy not in (None, "Allow", "Forbid", "Replace"):
            causes.append({"reason": "FieldValueNotSupported", "field": "spec.concurrencyPolicy",
                           "message": f'Unsupported value: "{policy}": supported values: "Allow", "Forbid", '
                                      '"Replace"'})
        template = get_path(spec, "jobTemplate", "spec", "template")
        causes += restart_policy_causes(template, _JOB_RESTART, "spec.jobTemplate.spec.template")
        return causes


STRATEGIES = {"jobs": JobStrategy(), "cronjobs": CronJobStrategy()}
