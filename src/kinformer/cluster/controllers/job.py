"""The Job controller (kube 1.32 pkg/controller/job): runs a Job's pods to completion. This module does the
API calls; what a sync counts and decides is :mod:`.job_sync`.

Implemented, as kube does it:

* NonIndexed and Indexed completion modes: ``completions`` / ``parallelism`` bound the active pods; an
  Indexed pod carries its index in the ``batch.kubernetes.io/job-completion-index`` annotation and label,
  ``JOB_COMPLETION_INDEX`` in every container's env, hostname ``<job>-<index>``, and the Job's
  ``status.completedIndexes`` lists the succeeded indexes;
* pod tracking with the ``batch.kubernetes.io/job-tracking`` finalizer: a finished pod's uid is first written
  to ``status.uncountedTerminatedPods``, then its finalizer is removed, then it moves to ``succeeded`` /
  ``failed`` (so a pod is counted exactly once, even across a controller crash); pods of a finished or
  deleted Job lose the finalizer too (:mod:`.job_orphans`);
* ``backoffLimit`` (failures, and container restarts for ``restartPolicy: OnFailure``), with new pods held
  back exponentially after failures (``ClusterOptions.job_backoff_base`` doubling up to ``job_backoff_max``;
  kube: 10 s and 6 min); ``activeDeadlineSeconds``; ``podFailurePolicy`` (FailJob, Ignore, Count on
  ``onExitCodes`` and ``onPodConditions``); ``podReplacementPolicy`` (terminating pods count as failed and
  are replaced at once unless it is Failed or a pod failure policy is set); ``suspend`` (pods deleted,
  Suspended condition, startTime reset on resume);
* ``backoffLimitPerIndex`` / ``maxFailedIndexes`` of Indexed Jobs (per-index failure counts and backoff,
  the FailIndex action, ``status.failedIndexes``, FailedIndexes / MaxFailedIndexesExceeded; see
  :mod:`.job_perindex`);
* ``successPolicy`` of Indexed Jobs (``succeededIndexes`` / ``succeededCount`` rules: the Job succeeds
  early with reason SuccessPolicy and its remaining pods are deleted);
* the 1.32 interim conditions: FailureTarget (or SuccessCriteriaMet) is written first, and Failed (or
  Complete, with ``completionTime``) once no pod is left terminating nor uncounted;
* ``status.active``/``ready``/``terminating``/``succeeded``/``failed``/``startTime``; events
  SuccessfulCreate, FailedCreate, SuccessfulDelete, Suspended, Resumed, Completed, and the failure reason
  (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy) as a Warning;
* expectations: a write's watch event is in the cache before the Job's next sync (the Manager's
  read-your-writes), so a sync never double-creates or recounts; pods are created in slow-start batches
  (1, 2, 4, ...), at most 500 creations or deletions and 500 newly counted pods per sync;
* adoption of orphan pods matching the Job's selector and release of owned pods that stopped matching
  (:class:`.refs.RefManager`); labels, selector and ``manualSelector`` are the API server's (its Job
  strategy); events through the legacy core/v1 recorder (one per distinct message, as kube shows them).

Not implemented: ``managedBy`` other than the built-in controller (such Jobs are left alone), the 1 s
batching of pod-triggered syncs, and the job metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kinformer.controller.reconcile import Request, Result
from kinformer.errors import NotFound

from ..podutil import is_pod_ready, phase
from .batch import (
    as_dict,
    condition,
    ensure_condition,
    format_time,
    is_finished,
    new_condition,
)
from .job_backoff import BackoffStore
from .job_indexes import format_indexes, parse_indexes
from .job_orphans import JOB_CONTROLLER, remove_tracking_finalizer, setup_orphan_pod_releaser
from .job_perindex import (
    failure_annotations,
    has_backoff_limit_per_index,
    remaining_for_index,
)
from .job_pods import (
    COMPLETION_INDEX,
    TRACKING_FINALIZER,
    active_pods_for_removal,
    completion_index,
    has_tracking_finalizer,
    is_failed,
    match_failure_policy,
    only_replace_failed,
)
from .job_sync import (
    JobSync,
    count,
    decide_failed_indexes,
    decide_failure,
    decide_success,
    decide_success_policy,
    failed_from_target,
    has_valid_index,
    indexed,
    pending_indexes,
    spec_int,
    suspended,
    want_active,
)
from .podcontrol import PodControl, namespace_terminating
from .podtemplate import pod_from_template
from .refs import RefManager, is_orphan, orphan_mapper, owner_selector, valid_selector
from .slowstart import slow_start

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

__all__ = ["JobController", "setup"]

#: kube's MaxPodCreateDeletePerSync
MAX_POD_CHANGES_PER_SYNC = 500
#: kube's MaxUncountedPods: finished pods recorded (and released) per sync
MAX_UNCOUNTED = 500
#: the index of pods by the uid of the Job that controls them
OWNER_INDEX = "job-controller/owner-uid"
Pod = Mapping[str, Any]


def _owner_uid(pod: Pod) -> list[str]:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
            return [ref.get("uid", "")]
    return []


class JobController:
    """Reconciles Jobs: creates and deletes their pods and keeps their status (see the module doc)."""

    def __init__(self, ctx: ControllerContext) -> None:
        options = ctx.options
        self.client = ctx.manager.client
        self.clock = ctx.clock
        self.options = options
        self.recorder = ctx.recorder("job-controller")
        self.pod_control = PodControl(self.client, self.recorder)
        self.pods = ctx.manager.informer("pods")
        self.jobs = ctx.manager.informer("jobs")
        self.backoff = BackoffStore()
        if OWNER_INDEX not in self.pods.indexer.get_indexers():
            self.pods.add_indexers({OWNER_INDEX: _owner_uid})

    # -- reading ----------------------------------------------------------------------------------

    def _pods_of(self, uid: str) -> list[Pod]:
        return list(self.pods.indexer.by_index(OWNER_INDEX, uid))

    async def _claim_pods(self, job: dict[str, Any]) -> list[Pod]:
        """The Job's pods after adopting matching orphans and releasing owned pods that stopped matching
        (kube's ClaimPods, :class:`.refs.RefManager`)."""
        selector = valid_selector(job)
        if selector is None:
            return []
        namespace = job["metadata"]["namespace"]
        manager = RefManager(self.client, job, "pods", selector)
        return await manager.claim(self.pods.lister().list(namespace))

    # -- reconcile --------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        try:
            cached = await self.client.get("jobs", request.name, request.namespace)
        except NotFound:
            self.backoff.remove(request.key)  # its pods' finalizers: OrphanPodReleaser
            return None
        uid = cached["metadata"].get("uid", "")
        if is_finished(cached):
            self.backoff.remove(request.key)
            await self._remove_finalizers(self._pods_of(uid))
            return None
        managed_by = (cached.get("spec") or {}).get("managedBy")
        if managed_by not in (None, JOB_CONTROLLER):
            return None
        job = {**as_dict(cached), "apiVersion": "batch/v1", "kind": "Job"}  # informer objects may lack them
        sync = JobSync(job, await self._claim_pods(job), self.clock.wall())
        await self._sync(sync)
        if sync.error is not None:
            raise sync.error  # after the status was written, as kube returns manageJob's error last
        return Result(requeue_after=min(sync.requeue_after)) if sync.requeue_after else None

    async def _sync(self, sync: JobSync) -> None:
        job, status = sync.job, sync.status
        status.setdefault("uncountedTerminatedPods", {})
        started = status.get("startTime")
        count(sync, self.backoff)
        if not status.get("startTime") and not suspended(job):
            status["startTime"] = format_time(sync.now)
        decide_failure(sync)
        decide_failed_indexes(sync)
        decide_success_policy(sync)
        suspend_changed = False
        if sync.finished is not None:
            await self._remove_active(sync, list(sync.active), keep_finalizers=True)
            if sync.error is not None:
                sync.finished = None  # not finished while a pod may be left behind
        else:
            managed = not job["metadata"].get("deletionTimestamp")
            if managed:
                await self._manage(sync)
            decide_success(sync)
            if managed and sync.finished is None:
                suspend_changed = self._update_suspended(sync)
        needs_update = (suspend_changed or started != status.get("startTime")
                        or len(sync.active) != status.get("active", 0) or sync.ready != status.get("ready")
                        or sync.terminating != status.get("terminating"))
        status["active"], status["ready"], status["terminating"] = len(sync.active), sync.ready, sync.terminating
        await self._track(sync, needs_update)

    def _update_suspended(self, sync: JobSync) -> bool:
        """The Suspended condition after manageJob ran; on resume, startTime restarts the deadline."""
        job, now = sync.job, sync.now
        if suspended(job):
            changed = ensure_condition(sync.status, "Suspended", "True", "JobSuspended", "Job suspended", now)
            if changed:
                self.recorder.event(job, "Normal", "Suspended", "Job suspended")
            return changed
        changed = ensure_condition(sync.status, "Suspended", "False", "JobResumed", "Job resumed", now)
        if changed:
            self.recorder.event(job, "Normal", "Resumed", "Job resumed")
            sync.status["startTime"] = format_time(now)
        return changed

    # -- managing pods ----------------------------------------------------------------------------

    async def _manage(self, sync: JobSync) -> None:
        """kube's manageJob: delete what is too much, else create what is missing (after backoff)."""
        job = sync.job
        if suspended(job):
            await self._remove_active(sync, list(sync.active), keep_finalizers=False)
            return
        want = want_active(sync)
        doomed = active_pods_for_removal(job, sync.active, max(0, len(sync.active) - want))
        if doomed:
            await self._remove_active(sync, doomed[:MAX_POD_CHANGES_PER_SYNC], keep_finalizers=False)
            return
        terminating = sync.terminating if only_replace_failed(job) else 0
        missing = want - terminating - len(sync.active)
        if missing <= 0:
            return
        indexes = self._to_create(sync, min(missing, MAX_POD_CHANGES_PER_SYNC))
        created, sync.error = await self._create_pods(job, indexes, sync.delayed)
        sync.active += created

    def _to_create(self, sync: JobSync, missing: int) -> list[int | None]:
        """The pods to create now, by index (None for a NonIndexed Job); none while the backoff holds them
        (the requeue is noted). With backoffLimitPerIndex each index has its own backoff."""
        base, cap = self.options.job_backoff_base, self.options.job_backoff_max
        if sync.failed_indexes is None:
            wait = sync.backoff.remaining(sync.now, base, cap)
            if wait > 0:
                sync.requeue_after.append(wait)
                return []
            return list(pending_indexes(sync, missing)) if indexed(sync.job) else [None] * missing
        pending = pending_indexes(sync, missing)
        waits = {i: remaining_for_index(sync.delayed.get(i), sync.now, base, cap) for i in pending}
        ready: list[int | None] = [i for i in pending if waits[i] <= 0]
        held = [w for w in waits.values() if w > 0]
        if held:
            sync.requeue_after.append(min(held))  # kube waits for the next pod event; this comes back itself
        return ready

    async def _remove_active(self, sync: JobSync, pods: list[Pod], *, keep_finalizers: bool) -> None:
        """Delete active ``pods``; those deleted leave ``active`` (and ``ready``) and join ``terminating``; a
        failure fails the sync once the status is written."""
        deleted, error = await self._delete_pods(sync.job, pods, keep_finalizers=keep_finalizers)
        sync.error = sync.error or error
        gone = {p["metadata"]["uid"] for p in deleted}
        sync.active = [p for p in sync.active if p["metadata"]["uid"] not in gone]
        sync.ready -= sum(1 for p in deleted if is_pod_ready(p))
        sync.terminating += len(deleted)

    @staticmethod
    def _pod_body(job: Mapping[str, Any], index: int | None, replaced: Pod | None = None) -> dict[str, Any]:
        """kube's GetPodFromTemplate plus the tracking finalizer and, for an index, its annotation, label,
        env, hostname and name prefix (and, with backoffLimitPerIndex, the failure counts it inherits)."""
        pod = pod_from_template(job["spec"]["template"], job)
        meta = pod["metadata"]
        finalizers = meta.setdefault("finalizers", [])
        if TRACKING_FINALIZER not in finalizers:
            finalizers.append(TRACKING_FINALIZER)
        if index is not None:
            name = job["metadata"]["name"]
            meta["generateName"] = f"{name}-{index}-"
            meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
            meta.setdefault("labels", {})[COMPLETION_INDEX] = str(index)
            pod["spec"]["hostname"] = f"{name}-{index}"
            _add_index_env(pod["spec"])
            if has_backoff_limit_per_index(job):
                meta["annotations"].update(failure_annotations(job, replaced))
        return pod

    async def _create_pods(self, job: Mapping[str, Any], indexes: Sequence[int | None],
                           replacing: Mapping[int, Pod]) -> tuple[list[Pod], BaseException | None]:
        """Create one pod per entry of ``indexes`` in slow-start batches (1, 2, 4, ...); after a batch with a
        failure the rest is skipped (a terminating namespace is no failure: nothing can be created there). The
        pods created, and the first error."""
        created: list[Pod] = []

        async def create(index: int | None) -> None:
            try:
                created.append(await self._create_pod(job, index, None if index is None else replacing.get(index)))
            except Exception as err:
                if not namespace_terminating(err):
                    raise

        try:
            await slow_start(indexes, create)
        except Exception as err:
            return created, err
        return created, None

    async def _create_pod(self, job: Mapping[str, Any], index: int | None, replaced: Pod | None) -> Pod:
        body = self._pod_body(job, index, replaced)
        pod: Pod = await self.pod_control.create(job, body, job["metadata"]["namespace"])
        return pod

    async def _delete_pods(self, job: Mapping[str, Any], pods: Sequence[Pod], *,
                           keep_finalizers: bool) -> tuple[list[Pod], BaseException | None]:
        """Delete ``pods`` (all attempted); unless ``keep_finalizers`` (a finishing Job counts them first)
        remove their tracking finalizer before. The pods deleted, and the first error."""
        results = await asyncio.gather(*(self._delete_pod(job, p, keep_finalizers) for p in pods),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        deleted = [p for p, r in zip(pods, results, strict=True) if not isinstance(r, BaseException)]
        return deleted, errors[0] if errors else None

    async def _delete_pod(self, job: Mapping[str, Any], pod: Pod, keep_finalizers: bool) -> None:
        meta = pod["metadata"]
        if not keep_finalizers and has_tracking_finalizer(pod):
            try:
                await remove_tracking_finalizer(self.client, pod)
            except NotFound:
                return
        await self.pod_control.delete(job, meta["name"], meta["namespace"])

    async def _remove_finalizers(self, pods: Sequence[Pod]) -> None:
        """Remove the tracking finalizer from each of ``pods`` that has it (all attempted; the first error
        is raised after)."""
        tracked = [p for p in pods if has_tracking_finalizer(p)]
        results = await asyncio.gather(*(remove_tracking_finalizer(self.client, p) for p in tracked),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    # -- tracking ---------------------------------------------------------------------------------

    async def _track(self, sync: JobSync, needs_flush: bool) -> None:
        """kube's trackJobStatusAndRemoveFinalizers: record finished pods as uncounted, write that, remove
        their finalizers, count them, then write the finishing condition once nothing is left uncounted."""
        with_finalizer = {p["metadata"]["uid"] for p in sync.pods if has_tracking_finalizer(p)}
        needs_flush |= _count_uncounted(sync.status, with_finalizer)
        to_release: list[Pod] = []
        new_indexes: list[int] = []
        recorded = parse_indexes(sync.status.get("completedIndexes"), spec_int(sync.job, "completions") or 0)
        capped = False
        for pod in sync.pods:
            failed = is_failed(pod, sync.job)
            if not has_tracking_finalizer(pod) or not self._can_release(sync, pod, failed):
                continue
            to_release.append(pod)
            if phase(pod) == "Succeeded" and pod["metadata"]["uid"] not in sync.uncounted("failed"):
                if indexed(sync.job):
                    index = completion_index(pod)
                    if has_valid_index(sync.job, pod) and index not in recorded:
                        new_indexes.append(index or 0)
                else:
                    needs_flush |= _add_uncounted(sync.uncounted("succeeded"), pod)
            elif failed or (sync.finished is not None and sync.finished["type"] != "SuccessCriteriaMet"):
                # once the Job is finishing, every pod not succeeded counts as failed
                policy = (sync.job.get("spec") or {}).get("podFailurePolicy")
                if has_valid_index(sync.job, pod) and match_failure_policy(policy, pod).counts:
                    needs_flush |= _add_uncounted(sync.uncounted("failed"), pod)
            if len(new_indexes) + len(sync.uncounted("succeeded")) + len(sync.uncounted("failed")) >= MAX_UNCOUNTED:
                capped = True  # the rest waits for the next sync: the status stays small, other Jobs get a turn
                break
        if indexed(sync.job):
            needs_flush |= self._record_indexes(sync, new_indexes)
        needs_flush |= self._add_interim_condition(sync)
        needs_flush = await self._flush(sync, to_release, with_finalizer, needs_flush)
        finished = not capped and self._enact_finished(sync)
        if needs_flush or finished:
            await self._write_status(sync)
        if finished:
            self._record_finished(sync)

    @staticmethod
    def _can_release(sync: JobSync, pod: Pod, failed: bool) -> bool:
        """A pod's finalizer goes once it succeeded or failed (unless, with backoffLimitPerIndex, it is the last
        failed pod of an index not yet replaced), or when the whole Job finishes or is deleted."""
        if sync.job["metadata"].get("deletionTimestamp") or sync.finished is not None or phase(pod) == "Succeeded":
            return True
        if not failed:
            return False
        index = completion_index(pod)
        delayed = sync.delayed.get(index) if index is not None else None
        return delayed is None or delayed["metadata"]["uid"] != pod["metadata"]["uid"]

    @staticmethod
    def _record_indexes(sync: JobSync, new_indexes: list[int]) -> bool:
        completions = spec_int(sync.job, "completions") or 0
        indexes = parse_indexes(sync.status.get("completedIndexes"), completions) | set(new_indexes)
        text = format_indexes(indexes)
        changed = text != (sync.status.get("completedIndexes") or "")
        sync.status["completedIndexes"] = text
        sync.status["succeeded"] = len(indexes)
        if sync.failed_indexes is not None:
            failed = format_indexes(sync.failed_indexes)
            changed |= sync.status.get("failedIndexes") != failed
            sync.status["failedIndexes"] = failed
        return changed

    @staticmethod
    def _add_interim_condition(sync: JobSync) -> bool:
        """Write FailureTarget / SuccessCriteriaMet before finalizers go; aim for Failed / Complete after."""
        finished = sync.finished
        if finished is None:
            return False
        conditions = sync.status.setdefault("conditions", [])
        if finished["type"] == "FailureTarget":
            conditions.append(finished)
            sync.finished = failed_from_target(finished, sync.now)
            return True
        if finished["type"] == "SuccessCriteriaMet":
            added = condition(sync.job, "SuccessCriteriaMet") is None
            if added:
                conditions.append(finished)
            sync.finished = new_condition("Complete", "True", finished["reason"], finished["message"], sync.now)
            return added
        return False

    async def _flush(self, sync: JobSync, to_release: list[Pod], with_finalizer: set[str], needs_flush: bool) -> bool:
        """Write the uncounted pods, remove their finalizers, and count those released."""
        if needs_flush:
            await self._write_status(sync)
            self.backoff.update(sync.key, sync.backoff)
            needs_flush = False
        if to_release:
            await self._remove_finalizers(to_release)
            with_finalizer -= {p["metadata"]["uid"] for p in to_release}
        return _count_uncounted(sync.status, with_finalizer) or needs_flush

    def _enact_finished(self, sync: JobSync) -> bool:
        finished = sync.finished
        if finished is None or sync.uncounted("succeeded") or sync.uncounted("failed") or sync.terminating > 0:
            return False
        ensure_condition(sync.status, finished["type"], finished["status"], finished["reason"], finished["message"],
                         sync.now)
        if finished["type"] == "Complete":
            sync.status["completionTime"] = format_time(sync.now)
        return True

    def _record_finished(self, sync: JobSync) -> None:
        job, finished = sync.job, sync.finished
        assert finished is not None
        if finished["type"] != "Complete":
            self.recorder.event(job, "Warning", finished["reason"], finished["message"])
            return
        completions = spec_int(job, "completions")
        if completions is not None and int(sync.status.get("succeeded") or 0) > completions:
            self.recorder.event(job, "Warning", "TooManySucceededPods",
                                "Too many succeeded pods running after completion count reached")
        self.recorder.event(job, "Normal", "Completed", "Job completed")

    async def _write_status(self, sync: JobSync) -> None:
        """PUT the status (a conflict fails the sync, which is retried with backoff)."""
        body = sync.job
        for name in ("active", "succeeded", "failed"):
            if not body["status"].get(name):
                body["status"].pop(name, None)  # omitempty, as kube serializes int32 counters
        uncounted = body["status"].get("uncountedTerminatedPods") or {}
        body["status"]["uncountedTerminatedPods"] = {k: v for k, v in uncounted.items() if v}
        for name in ("completedIndexes", "conditions"):
            if not body["status"].get(name):
                body["status"].pop(name, None)
        sync.job = as_dict(await self.client.replace_status("jobs", body))


def _add_uncounted(uids: list[str], pod: Pod) -> bool:
    """Add the pod's uid to an uncounted list unless it is there; whether it was added."""
    uid = pod["metadata"]["uid"]
    if uid in uids:
        return False
    uids.append(uid)
    return True


def _count_uncounted(status: dict[str, Any], with_finalizer: set[str]) -> bool:
    """kube's cleanUncountedPodsWithoutFinalizers: uncounted pods whose finalizer is gone become counted."""
    lists = status.setdefault("uncountedTerminatedPods", {})
    changed = False
    for which, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        uids = lists.get(which) or []
        left = [uid for uid in uids if uid in with_finalizer]
        if len(left) != len(uids):
            status[counter] = int(status.get(counter) or 0) + len(uids) - len(left)
            lists[which] = left
            changed = True
    return changed


def _add_index_env(spec: dict[str, Any]) -> None:
    """JOB_COMPLETION_INDEX from the index annotation in every container that does not set it."""
    env = {"name": "JOB_COMPLETION_INDEX",
           "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or ():
            variables = container.setdefault("env", [])
            if not any(v.get("name") == "JOB_COMPLETION_INDEX" for v in variables):
                variables.append(dict(env))


def setup(ctx: ControllerContext) -> None:
    """Register the Job controller (Jobs, and the pods they control) and the orphan pod releaser."""
    controller = JobController(ctx)
    ctx.manager.controller(controller, "job").for_("jobs").owns("pods") \
        .watches("pods", mapper=orphan_mapper(controller.jobs, owner_selector), accepts=is_orphan) \
        .workers(ctx.options.workers)
    setup_orphan_pod_releaser(ctx)
