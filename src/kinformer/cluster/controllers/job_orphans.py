"""kube's orphan pod handling in the Job controller: a pod still holding the
``batch.kubernetes.io/job-tracking`` finalizer whose Job no longer needs it loses it, so it can go.

A pod is orphaned when it has no controller reference (e.g. after an orphaning delete of its Job), when its
controlling Job is gone or was re-created under the same name (another uid), or when that Job finished.
Pods controlled by anything but a batch/v1 Job, and Jobs another controller manages (``managedBy``), are
left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kinformer.controller.predicates import Funcs
from kinformer.controller.reconcile import Request
from kinformer.errors import NotFound

from .batch import is_finished
from .job_pods import TRACKING_FINALIZER, has_tracking_finalizer

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

__all__ = ["JOB_CONTROLLER", "OrphanPodReleaser", "remove_tracking_finalizer", "setup_orphan_pod_releaser"]

#: the ``spec.managedBy`` of Jobs this controller manages (unset means the same)
JOB_CONTROLLER = "kubernetes.io/job-controller"
_REMOVE_FINALIZER = {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}
Pod = Mapping[str, Any]


async def remove_tracking_finalizer(client: Any, pod: Pod) -> None:
    """Remove the tracking finalizer from ``pod`` (a pod already gone is fine)."""
    meta = pod["metadata"]
    try:
        await client.patch("pods", meta["name"], _REMOVE_FINALIZER, "strategic", meta["namespace"])
    except NotFound:
        pass


class OrphanPodReleaser:
    """kube's orphan pod queue: a pod still holding the tracking finalizer whose controlling Job is gone,
    finished, or was replaced by another of the same name (or which lost its controller reference, e.g. an
    orphaning delete of its Job) loses the finalizer, so it can be deleted."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.client = ctx.manager.client

    async def reconcile(self, request: Request) -> None:
        try:
            pod = await self.client.get("pods", request.name, request.namespace)
        except NotFound:
            return
        if has_tracking_finalizer(pod) and await self._orphaned(pod):
            await remove_tracking_finalizer(self.client, pod)

    async def _orphaned(self, pod: Pod) -> bool:
        refs = [r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")]
        if not refs:
            return True
        ref = refs[0]
        if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return False  # another controller's pod: not ours to release
        try:
            job = await self.client.get("jobs", ref.get("name", ""), pod["metadata"]["namespace"])
        except NotFound:
            return True
        if job["metadata"].get("uid") != ref.get("uid"):
            return True
        return is_finished(job) and (job.get("spec") or {}).get("managedBy") in (None, JOB_CONTROLLER)


def _tracked(pod: Mapping[str, Any]) -> bool:
    return has_tracking_finalizer(pod)


def setup_orphan_pod_releaser(ctx: ControllerContext) -> None:
    """Reconcile every pod that holds the tracking finalizer."""
    tracked = Funcs(create=has_tracking_finalizer, update=lambda _old, new: has_tracking_finalizer(new),
                    delete=lambda _pod: False)
    ctx.manager.controller(OrphanPodReleaser(ctx), "job-orphan-pod") \
        .for_("pods", tracked, accepts=has_tracking_finalizer) \
        .workers(ctx.options.workers)
