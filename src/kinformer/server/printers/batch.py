"""Printers of batch/v1 Jobs and CronJobs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints.table_cells import (
    NONE,
    age,
    age_of,
    as_int,
    as_list,
    as_map,
    bool_text,
    containers_cells,
    field,
    find_condition,
    format_selector,
    human_duration,
    name_of,
    parse_time,
)
from .table import AGE, CONTAINERS, IMAGES, NAME, Doc, Printer, col, selector_column

_BATCH = "api.batch.v1."


def _condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    cond = find_condition(field(obj, "status", "conditions"), type_)
    return cond is not None and cond.get("status") == "True"


def job_status(obj: Mapping[str, Any]) -> str:
    """STATUS: Complete, Failed, Terminating, Suspended, FailureTarget or Running, in that precedence."""
    if _condition_true(obj, "Complete"):
        return "Complete"
    if _condition_true(obj, "Failed"):
        return "Failed"
    if field(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    for type_ in ("Suspended", "FailureTarget"):
        if _condition_true(obj, type_):
            return type_
    return "Running"


def job_completions(obj: Mapping[str, Any]) -> str:
    """COMPLETIONS: succeeded/completions; without completions succeeded/1, ``of N`` for parallelism N > 1."""
    succeeded = as_int(field(obj, "status", "succeeded"))
    completions = field(obj, "spec", "completions")
    if completions is not None:
        return f"{succeeded}/{as_int(completions)}"
    parallelism = as_int(field(obj, "spec", "parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(obj: Mapping[str, Any], now: float) -> str:
    """DURATION: completion - start, or now - start while running; empty before the job started."""
    start = parse_time(field(obj, "status", "startTime"))
    if start is None:
        return ""
    end = parse_time(field(obj, "status", "completionTime"))
    return human_duration((now if end is None else end) - start)


def _job_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = as_map(obj.get("spec"))
    return [name_of(obj), job_status(obj), job_completions(obj), job_duration(obj, now), age_of(obj, now),
            *containers_cells(field(spec, "template", "spec")), format_selector(spec.get("selector"))]


JOB = Printer((
    NAME,
    col("Status", description="Status of the job."),
    col("Completions", description=Doc(_BATCH + "JobStatus", "succeeded")),
    col("Duration", description="Time required to complete the job."),
    AGE, CONTAINERS, IMAGES, selector_column(_BATCH + "JobSpec"),
), _job_row)


def _cronjob_row(obj: Mapping[str, Any], now: float) -> list[Any]:
    """SUSPEND True/False/<unset>, ACTIVE the number of running jobs, LAST SCHEDULE the age of the last run."""
    spec = as_map(obj.get("spec"))
    last = field(obj, "status", "lastScheduleTime")
    job_spec = field(spec, "jobTemplate", "spec")
    zone = spec.get("timeZone")
    return [name_of(obj), str(spec.get("schedule") or ""), NONE if zone is None else str(zone),
            bool_text(spec.get("suspend")), len(as_list(field(obj, "status", "active"))),
            NONE if last is None else age(last, now), age_of(obj, now),
            *containers_cells(field(job_spec, "template", "spec")), format_selector(field(job_spec, "selector"))]


_CRON = _BATCH + "CronJobSpec"
CRONJOB = Printer((
    NAME,
    col("Schedule", description=Doc(_CRON, "schedule")),
    col("Timezone", description=Doc(_CRON, "timeZone")),
    col("Suspend", "boolean", description=Doc(_CRON, "suspend")),
    col("Active", "integer", description=Doc(_BATCH + "CronJobStatus", "active")),
    col("Last Schedule", description=Doc(_BATCH + "CronJobStatus", "lastScheduleTime")),
    AGE, CONTAINERS, IMAGES, selector_column(_BATCH + "JobSpec"),
), _cronjob_row)
