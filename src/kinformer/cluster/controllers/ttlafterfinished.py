"""The TTL-after-finished controller (kube 1.32 pkg/controller/ttlafterfinished): deletes a finished Job
``spec.ttlSecondsAfterFinished`` seconds after it finished, on the injected clock.

As kube: the finish time is the lastTransitionTime of the Job's Complete or Failed condition; a Job not yet
due is looked at again when it is; a due Job is read again from the API server (the cache may be stale:
the TTL may have been changed or removed) and deleted with ``propagationPolicy: Foreground`` and a uid
precondition, so its pods go first and a re-created Job of the same name is never deleted. A Job already
being deleted is left alone. It records no events (neither does kube's).

Not implemented: the controller's ``job_deletion_duration_seconds`` metric; a worker count of its own
(``--concurrent-ttl-after-finished-syncs``: ``ClusterOptions.workers`` serves every controller).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kinformer.controller.reconcile import Request, Result
from kinformer.errors import Conflict, NotFound

from .batch import finished_condition, parse_time

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

__all__ = ["TTLAfterFinishedController", "setup", "time_left"]


def time_left(job: Mapping[str, Any], now: float) -> float | None:
    """Seconds until ``job`` expires (<= 0: due), or None when it has no TTL, has not finished, or is
    already being deleted."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    finished = finished_condition(job)
    if ttl is None or finished is None or job["metadata"].get("deletionTimestamp"):
        return None
    finished_at = parse_time(finished.get("lastTransitionTime"))
    if finished_at is None:
        return None
    return finished_at + ttl - now


class TTLAfterFinishedController:
    """Deletes finished Jobs once their TTL passed (see the module doc)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.client = ctx.manager.client
        self.api = ctx.client
        self.clock = ctx.clock

    async def reconcile(self, request: Request) -> Result | None:
        # first the cache; a Job that is due is read again from the API (its TTL may have changed since)
        for read in (self.client.get, self.api.get):
            try:
                job = await read("jobs", request.name, request.namespace)
            except NotFound:
                return None
            left = time_left(job, self.clock.wall())
            if left is None:
                return None
            if left > 0:
                return Result(requeue_after=left)
        try:
            await self.client.delete("jobs", request.name, request.namespace, propagation_policy="Foreground",
                                     preconditions={"uid": job["metadata"]["uid"]})
        except (NotFound, Conflict):
            pass  # gone, or a new Job of that name: not ours to delete
        return None


def setup(ctx: ControllerContext) -> None:
    """Register the TTL-after-finished controller on Jobs."""
    ctx.manager.controller(TTLAfterFinishedController(ctx), "ttl-after-finished").for_("jobs") \
        .workers(ctx.options.workers)
