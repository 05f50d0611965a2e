"""The pod garbage collector, as kube 1.32's pkg/controller/podgc (kube-controller-manager's
"pod-garbage-collector"): what makes the pods of a deleted node go, DaemonSet pods included.

Every ``pod_gc_period`` seconds (kube: 20 s), and at once when a node is deleted:

* orphaned pods: a pod bound to a node that is in no cache is collected once the node has been missing for
  ``pod_gc_quarantine`` seconds (kube: 40 s) and the server confirms it is gone;
* unscheduled terminating pods: a pod being deleted that was never bound is collected (no kubelet will);
* terminated pods: beyond ``terminated_pod_gc_threshold`` Succeeded/Failed pods (kube's
  ``--terminated-pod-gc-threshold``, 12500), the oldest are collected.

Collecting a pod: if it is not terminal, its phase becomes Failed with the condition ``DisruptionTarget``
(reason ``DeletionByPodGC``, message "PodGC: node no longer exists" for orphans, "PodGC: unscheduled pod
marked for deletion" for the unscheduled), then it is deleted with a grace period of 0.

Not implemented: the out-of-service taint (``node.kubernetes.io/out-of-service``) rule.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kinformer.controller.reconcile import Request, Result
from kinformer.errors import APIError, NotFound

from ..metatime import rfc3339
from ..podindex import pods_informer, pods_on_node
from ..podutil import is_terminal

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
ORPHANED = "PodGC: node no longer exists"
UNSCHEDULED = "PodGC: unscheduled pod marked for deletion"


class PodGC:
    """Collects pods no kubelet will ever finish (see the module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        options = ctx.options
        self.client, self.clock, self.options = ctx.client, ctx.clock, options
        self.nodes = ctx.manager.informer("nodes")
        self.pods = pods_informer(ctx.manager)
        self.missing_since: dict[str, float] = {}  # node name -> when it was first seen missing

    # -- orphans ----------------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        """A node (deleted or not): collect its pods once it has been gone for the quarantine."""
        name = request.name
        if self.nodes.indexer.get_by_key(name) is not None or not pods_on_node(self.pods, name):
            self.missing_since.pop(name, None)
            return Result()
        first = self.missing_since.setdefault(name, self.clock.now())
        wait = first + self.options.pod_gc_quarantine - self.clock.now()
        if wait > 0:
            return Result(requeue_after=wait)
        try:
            await self.client.get("nodes", name)
        except NotFound:
            for pod in pods_on_node(self.pods, name):
                await self.collect(pod, ORPHANED)
            self.missing_since.pop(name, None)
        return Result()

    # -- the periodic pass --------------------------------------------------------------------------------------

    async def run(self) -> None:
        for informer in (self.nodes, self.pods):
            await informer.wait_for_sync()
        while True:
            try:
                await self.gc_once()
            except APIError as err:  # a pod changed meanwhile, the server is restarting...: next pass
                log.warning("pod garbage collection pass failed: %s", err)
            await self.clock.sleep(self.options.pod_gc_period)

    async def gc_once(self) -> None:
        """kube's ``gc``: terminated pods over the threshold, orphans, unscheduled terminating pods."""
        pods = self.pods.indexer.list()
        await self.gc_terminated(pods)
        bound: set[str] = {str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")}
        for node in sorted(bound):
            await self.reconcile(Request("", node))
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
                await self.collect(pod, UNSCHEDULED)

    async def gc_terminated(self, pods: Sequence[Obj]) -> None:
        threshold = self.options.terminated_pod_gc_threshold
        terminated = [p for p in pods if is_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        if threshold <= 0 or len(terminated) <= threshold:
            return
        terminated.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
        for pod in terminated[:len(terminated) - threshold]:
            await self.collect(pod, "")

    async def collect(self, pod: Obj, message: str) -> None:
        """``markFailedAndDeletePodWithCondition``: Failed with DisruptionTarget (unless terminal), then deleted
        at once."""
        meta = pod["metadata"]
        log.info("PodGC is force deleting pod %s/%s: %s", meta["namespace"], meta["name"], message or "terminated")
        with contextlib.suppress(NotFound):
            if message and not is_terminal(pod):
                now = rfc3339(self.clock.wall())
                condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                             "message": message, "lastTransitionTime": now}
                await self.client.patch_status("pods", meta["name"], {"status": {
                    "phase": "Failed", "conditions": [condition]}}, "strategic", namespace=meta["namespace"])
            await self.client.delete("pods", meta["name"], namespace=meta["namespace"], grace_period_seconds=0,
                                     preconditions={"uid": meta["uid"]})


def setup(ctx: ControllerContext) -> None:
    """Register the pod garbage collector: on node events, and its periodic pass."""
    gc = PodGC(ctx)
    ctx.manager.controller(gc, name="pod-garbage-collector").for_("nodes").workers(1)
    ctx.run(gc.run, "pod-garbage-collector")


__all__ = ["PodGC", "setup"]
