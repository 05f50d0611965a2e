"""The CronJob controller (kube 1.32 pkg/controller/cronjob, the v2 controller): creates a Job at each
scheduled time, on the injected clock.

Implemented, as kube does it:

* schedules as :mod:`.cron` parses them, in ``spec.timeZone`` (or a ``CRON_TZ=``/``TZ=`` prefix, with an
  UnsupportedSchedule warning); the most recent unmet time since ``status.lastScheduleTime`` (or the
  creation time), bounded by ``startingDeadlineSeconds``; more than 100 missed times give a
  TooManyMissedTimes warning ("too many missed start times ...") and only the latest runs; a time past its
  starting deadline gives MissSchedule; each sync requeues for the next time plus 100 ms;
* ``concurrencyPolicy`` Allow, Forbid (JobAlreadyActive) and Replace (the active Jobs deleted first);
  ``suspend``; Jobs named ``<cronjob>-<scheduled minutes since the epoch>`` with the
  ``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation (RFC 3339 in the schedule's zone), the
  template's labels and annotations, and a controller reference;
* ``status.active`` (finished Jobs leave it with SawCompletedJob, vanished ones with MissingJob; an unknown
  running child gives UnexpectedJob), ``lastScheduleTime``, ``lastSuccessfulTime``;
* ``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit``: the oldest finished Jobs (by start time)
  beyond them are deleted in the background (SuccessfulDelete);
* events (through the legacy core/v1 recorder: one per distinct message) SuccessfulCreate, FailedCreate,
  SawCompletedJob, SuccessfulDelete, FailedDelete, MissSchedule, UnknownTimeZone, UnparseableSchedule, InvalidSchedule.

Not implemented: the creation-skew metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any

from kinformer.controller.reconcile import Request, Result
from kinformer.errors import AlreadyExists, NotFound

from .batch import as_dict, finished_condition, format_time, parse_time, report_failed_create
from .cron import CronError, Schedule, load_zone, parse_schedule

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

__all__ = ["CronJobController", "job_name", "setup"]

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
OWNER_INDEX = "cronjob-controller/owner-uid"
#: kube's nextScheduleDelta: requeue a little after the next time, against clock skew
NEXT_SCHEDULE_DELTA = 0.1
#: more missed start times than this only warn (kube's "too many missed start times")
MAX_MISSED = 100
Job = Mapping[str, Any]


def job_name(cronjob_name: str, scheduled: datetime) -> str:
    """``<cronjob>-<minutes since the epoch of the scheduled time>``: one name per scheduled time."""
    return f"{cronjob_name}-{int(scheduled.timestamp()) // 60}"


def _owner_uid(job: Job) -> list[str]:
    for ref in job["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "CronJob" and ref.get("apiVersion") == "batch/v1":
            return [ref.get("uid", "")]
    return []


def _rfc3339(when: datetime) -> str:
    text = when.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _as_datetime(text: str | None) -> datetime | None:
    seconds = parse_time(text)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _most_recent(cj: Mapping[str, Any], now: datetime, schedule: Schedule,
                 with_deadline: bool) -> tuple[datetime, datetime | None, int]:
    """kube's mostRecentScheduleTime: the earliest time considered, the most recent unmet scheduled time
    (None when the next one is still ahead) and roughly how many were missed. Raises CronError for a
    schedule that never or too often fires."""
    status, spec = cj.get("status") or {}, cj.get("spec") or {}
    earliest = _as_datetime(status.get("lastScheduleTime")) or _as_datetime(cj["metadata"].get("creationTimestamp"))
    assert earliest is not None, "the server sets creationTimestamp"
    deadline = spec.get("startingDeadlineSeconds")
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline))
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is None or t2 is None:
        raise CronError("time difference between two schedules is less than 1 second")
    if now < t1:
        return earliest, None, 0
    if now < t2:
        return earliest, t1, 0
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise CronError("time difference between two schedules is less than 1 second")
    missed = int((now - t1).total_seconds()) // between + 1
    most_recent = None
    t: datetime | None = schedule.next(t1 + timedelta(seconds=(missed - 2) * between))
    while t is not None and t <= now:
        most_recent, t = t, schedule.next(t)
    return earliest, most_recent, missed


def _requeue_after(cj: Mapping[str, Any], now: datetime, schedule: Schedule) -> float:
    """kube's nextScheduleTimeDuration: seconds until the next scheduled time, plus 100 ms."""
    try:
        earliest, recent, missed = _most_recent(cj, now, schedule, with_deadline=False)
        base = recent or (earliest if missed == 0 else now)
    except CronError:
        base = now
    following = schedule.next(base) or now + timedelta(days=365)
    return max(0.0, (following - now).total_seconds()) + NEXT_SCHEDULE_DELTA


def _start_time(job: Job) -> tuple[int, float, str]:
    started = parse_time((job.get("status") or {}).get("startTime"))
    return (started is None, started or 0.0, job["metadata"]["name"])


class CronJobController:
    """Reconciles CronJobs: their Jobs, status and history (see the module doc)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.client = ctx.manager.client
        self.api = ctx.client  # fresh reads, as kube's controller reads the API server where the cache may lag
        self.clock = ctx.clock
        self.recorder = ctx.recorder("cronjob-controller")
        self.jobs = ctx.manager.informer("jobs")
        if OWNER_INDEX not in self.jobs.indexer.get_indexers():
            self.jobs.add_indexers({OWNER_INDEX: _owner_uid})

    def _event(self, cj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.recorder.event(cj, type_, reason, message)

    async def reconcile(self, request: Request) -> Result | None:
        try:
            cached = await self.client.get("cronjobs", request.name, request.namespace)
        except NotFound:
            return None
        cj = as_dict(cached)
        jobs = list(self.jobs.indexer.by_index(OWNER_INDEX, cj["metadata"]["uid"]))
        updated = await self._clean_up_finished(cj, jobs)
        now = datetime.fromtimestamp(self.clock.wall(), UTC)
        requeue, synced = await self._sync(cj, jobs, now)
        if updated or synced:
            await self.client.replace_status("cronjobs", cj)
        return Result(requeue_after=requeue) if requeue is not None else None

    # -- children ---------------------------------------------------------------------------------

    async def _reconcile_children(self, cj: dict[str, Any], jobs: Sequence[Job]) -> bool:
        """Bring ``status.active`` and ``lastSuccessfulTime`` in line with the Jobs; True when changed."""
        status = cj.setdefault("status", {})
        changed = False
        children = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            meta, finished = job["metadata"], finished_condition(job)
            active = any(ref.get("uid") == meta["uid"] for ref in status.get("active") or ())
            if not active and finished is None:
                fresh = await self.api.get("cronjobs", cj["metadata"]["name"], cj["metadata"]["namespace"])
                if any(ref.get("uid") == meta["uid"] for ref in (fresh.get("status") or {}).get("active") or ()):
                    cj.clear()  # the cache was behind: carry on from the CronJob as the API has it
                    cj.update(as_dict(fresh))
                    status = cj.setdefault("status", {})
                    continue
                self._event(cj, "Warning", "UnexpectedJob",
                            f"Saw a job that the controller did not create or forgot: {meta['name']}")
            elif active and finished is not None:
                self._forget(cj, meta["uid"])
                self._event(cj, "Normal", "SawCompletedJob",
                            f"Saw completed job: {meta['name']}, condition: {finished['type']}")
                changed = True
            elif finished is not None and finished["type"] == "Complete":
                changed |= self._note_success(status, (job.get("status") or {}).get("completionTime"))
        for ref in list(status.get("active") or ()):
            if ref.get("uid") in children:
                continue
            try:
                await self.api.get("jobs", ref.get("name", ""), ref.get("namespace") or cj["metadata"]["namespace"])
            except NotFound:
                self._event(cj, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
                self._forget(cj, ref.get("uid", ""))
                changed = True
        return changed

    @staticmethod
    def _note_success(status: dict[str, Any], completed: str | None) -> bool:
        last = parse_time(status.get("lastSuccessfulTime"))
        when = parse_time(completed)
        if when is None or (last is not None and when <= last):
            return False
        status["lastSuccessfulTime"] = completed
        return True

    @staticmethod
    def _forget(cj: dict[str, Any], uid: str) -> None:
        status = cj.setdefault("status", {})
        status["active"] = [ref for ref in status.get("active") or () if ref.get("uid") != uid]
        if not status["active"]:
            del status["active"]

    # -- scheduling -------------------------------------------------------------------------------

    def _schedule(self, cj: Mapping[str, Any]) -> Schedule | None:
        """The parsed schedule, or None after a warning event (a bad time zone or schedule waits for a
        spec change)."""
        spec = cj["spec"]
        text, zone = spec.get("schedule", ""), spec.get("timeZone")
        if zone is not None:
            try:
                load_zone(zone)
            except CronError as err:
                self._event(cj, "Warning", "UnknownTimeZone", f'invalid timeZone: "{zone}": {err}')
                return None
        if "TZ" in text:
            self._event(cj, "Warning", "UnsupportedSchedule",
                        f'CRON_TZ or TZ used in schedule "{text}" is not officially supported, see '
                        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details")
            zone = None
        try:
            return parse_schedule(text, zone or "")
        except CronError as err:
            self._event(cj, "Warning", "UnparseableSchedule", f'unparseable schedule: "{text}" : {err}')
            return None

    def _next_unmet(self, cj: Mapping[str, Any], now: datetime, schedule: Schedule) -> datetime | None:
        """kube's nextScheduleTime: the most recent unmet scheduled time (warning when over 100 missed)."""
        _, recent, missed = _most_recent(cj, now, schedule, with_deadline=True)
        if recent is None or recent > now:
            return None
        if missed > MAX_MISSED:
            self._event(cj, "Warning", "TooManyMissedTimes", "too many missed start times. Set or "
                        "decrease .spec.startingDeadlineSeconds or check clock skew")
        return recent

    async def _sync(self, cj: dict[str, Any], jobs: Sequence[Job], now: datetime) -> tuple[float | None, bool]:
        """kube's syncCronJob: (seconds until the next sync or None, whether the status changed)."""
        changed = await self._reconcile_children(cj, jobs)
        spec, status = cj["spec"], cj.setdefault("status", {})
        if cj["metadata"].get("deletionTimestamp") or spec.get("suspend") is True:
            return None, changed
        schedule = self._schedule(cj)
        if schedule is None:
            return None, changed
        try:
            scheduled = self._next_unmet(cj, now, schedule)
        except CronError as err:
            self._event(cj, "Warning", "InvalidSchedule", f"invalid schedule: {spec.get('schedule')} : {err}")
            return None, changed
        requeue = _requeue_after(cj, now, schedule)
        if scheduled is None:
            return requeue, changed
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and scheduled + timedelta(seconds=deadline) < now:
            self._event(cj, "Warning", "MissSchedule", "Missed scheduled time to start a job: "
                        f"{format_datetime(scheduled.astimezone(UTC))}")
            return requeue, changed
        name = job_name(cj["metadata"]["name"], scheduled)
        if any(ref.get("name") == name for ref in status.get("active") or ()) \
                or parse_time(status.get("lastScheduleTime")) == scheduled.timestamp():
            return requeue, changed
        if spec.get("concurrencyPolicy") == "Forbid" and status.get("active"):
            self._event(cj, "Normal", "JobAlreadyActive", "Not starting job because prior execution is running and "
                        "concurrency policy is Forbid")
            return requeue, changed
        if spec.get("concurrencyPolicy") == "Replace":
            changed |= await self._replace_active(cj)
        job = await self._create_job(cj, scheduled)
        if job is None:
            return requeue, changed
        status.setdefault("active", []).append(
            {"apiVersion": "batch/v1", "kind": "Job", "namespace": job["metadata"]["namespace"],
             "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
             "resourceVersion": job["metadata"]["resourceVersion"]})
        status["lastScheduleTime"] = format_time(scheduled.timestamp())
        return _requeue_after(cj, now, schedule), True

    async def _replace_active(self, cj: dict[str, Any]) -> bool:
        changed = False
        for ref in list((cj.get("status") or {}).get("active") or ()):
            try:
                job = await self.api.get("jobs", ref.get("name", ""), ref.get("namespace"))
            except Exception as err:
                self._event(cj, "Warning", "FailedGet", f"Get job: {err}")
                raise
            if not await self._delete_job(cj, job):
                meta = job["metadata"]
                raise RuntimeError(f"could not replace job {meta['namespace']}/{meta['name']}")
            changed = True
        return changed

    def _job_body(self, cj: Mapping[str, Any], scheduled: datetime) -> dict[str, Any]:
        template = as_dict(cj["spec"].get("jobTemplate") or {})
        tmeta = template.get("metadata") or {}
        meta = cj["metadata"]
        annotations = dict(tmeta.get("annotations") or {})
        # in spec.timeZone (UTC without one), whatever zone a CRON_TZ prefix gave the schedule
        annotations[SCHEDULED_TIMESTAMP] = _rfc3339(scheduled.astimezone(load_zone(cj["spec"].get("timeZone") or "")))
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job_name(meta["name"], scheduled), "namespace": meta["namespace"],
                             "labels": dict(tmeta.get("labels") or {}), "annotations": annotations,
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": meta["name"],
                                                  "uid": meta["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": template.get("spec") or {}}

    async def _create_job(self, cj: dict[str, Any], scheduled: datetime) -> Job | None:
        """Create the Job of ``scheduled``; None when one by that name exists that we need not record."""
        body = self._job_body(cj, scheduled)
        namespace = cj["metadata"]["namespace"]
        try:
            job = await self.client.create("jobs", body, namespace)
        except AlreadyExists:
            job = await self.api.get("jobs", body["metadata"]["name"], namespace)
            if _owner_uid(job) != [cj["metadata"]["uid"]]:
                return None  # another actor's Job: it keeps the status
            if any(ref.get("uid") == job["metadata"]["uid"] for ref in cj["status"].get("active") or ()):
                return None
            return job
        except Exception as err:
            report_failed_create(self.recorder, cj, err, "Error creating job")
            raise
        self._event(cj, "Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']}")
        return job

    # -- history ----------------------------------------------------------------------------------

    async def _delete_job(self, cj: dict[str, Any], job: Job) -> bool:
        meta = job["metadata"]
        try:
            await self.client.delete("jobs", meta["name"], meta["namespace"], propagation_policy="Background")
        except NotFound:
            pass
        except Exception as err:
            self._event(cj, "Warning", "FailedDelete", f"Deleted job: {err}")
            return False
        self._forget(cj, meta["uid"])
        self._event(cj, "Normal", "SuccessfulDelete", f"Deleted job {meta['name']}")
        return True

    async def _clean_up_finished(self, cj: dict[str, Any], jobs: Sequence[Job]) -> bool:
        """Delete the oldest finished Jobs beyond the history limits; True when the status changed."""
        spec = cj["spec"]
        changed = False
        for kind, limit in (("Complete", spec.get("successfulJobsHistoryLimit")),
                            ("Failed", spec.get("failedJobsHistoryLimit"))):
            if limit is None:
                continue
            done = sorted((j for j in jobs if (finished_condition(j) or {}).get("type") == kind), key=_start_time)
            for job in done[:max(0, len(done) - int(limit))]:
                changed |= await self._delete_job(cj, job)
        return changed


def setup(ctx: ControllerContext) -> None:
    """Register the CronJob controller: CronJobs, and the Jobs they control."""
    controller = CronJobController(ctx)
    ctx.manager.controller(controller, "cronjob").for_("cronjobs").owns("jobs").workers(ctx.options.workers)
