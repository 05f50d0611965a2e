"""kube-scheduler: binds each pending pod to a node (``setup``: the ``scheduler`` controller).

A pod is this scheduler's when ``spec.schedulerName`` is ``default-scheduler`` (or absent), ``spec.nodeName``
is empty, it is not being deleted and has no scheduling gates left. One worker schedules one pod at a time,
as kube's scheduling cycle does, against the scheduler's cache of the nodes and the pods on them
(:mod:`kinformer.cluster.schedcache`, kept up to date by informer events, not rebuilt per cycle;
:mod:`kinformer.cluster.scheduling` has the filters, the scoring and the message).

Invariants:

* the assume cache: a pod is counted on its node from the moment it is assumed (the end of its scheduling
  cycle) until the pods informer shows it assigned (or gone), so pods scheduled back to back never over-commit
  a node while their bindings and watch events are on their way; no pod is scheduled before the cache has
  seen every node and pod the informers listed;
* binding cycles run beside the scheduling cycle, as kube's do (``bindingCycle`` in a goroutine of its own):
  one worker schedules pod after pod while up to ``BINDINGS_IN_FLIGHT`` bindings are sent, so a round trip
  to the API server is not paid once per pod in sequence; a binding refused because the pod was bound or
  deleted meanwhile only un-assumes it, any other failure un-assumes it and queues it again;
* a pod that fits nowhere gets the ``PodScheduled=False`` condition (reason ``Unschedulable``, kube's
  message; written only when it changed) and a ``FailedScheduling`` Warning event, and waits in the
  unschedulable set. A node added, or changed in what scheduling reads (allocatable, labels, taints,
  ``unschedulable``), or a counted pod deleted or finished, moves every unschedulable pod back once the
  cache shows the change; each pod still waits out its backoff (``scheduler_pod_initial_backoff`` doubling
  per failure up to ``scheduler_pod_max_backoff``) and is retried anyway after
  ``scheduler_max_unschedulable_duration``;
* success records a ``Scheduled`` Normal event "Successfully assigned ns/pod to node" (events.k8s.io/v1,
  reportingController ``default-scheduler``); the API server sets ``PodScheduled=True`` on binding.

Not implemented: preemption (the message says what kube says when it finds no victim), priority order of
the queue (pods are taken in the order they arrive), nominated nodes, multiple profiles, extenders,
volume binding, host ports and inter-pod (anti-)affinity and topology spread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kinformer.aio import task_group
from kinformer.controller import Result
from kinformer.controller.conditions import find_condition, set_condition
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Request
from kinformer.errors import Conflict, NotFound

from . import scheduling
from .podindex import pod_reference
from .podresources import pod_requests
from .schedcache import SchedulerCache
from .scheduling import NodeInfo, PodUsage, Rejection
from .wakeups import Wakeups

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer

    from .cluster import ControllerContext

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"
#: how many binding cycles may be in flight at once, beside the one scheduling cycle.
BINDINGS_IN_FLIGHT = 16
Obj = Mapping[str, Any]


def responsible_for(pod: Obj) -> bool:
    """Unassigned, and this scheduler's (``spec.schedulerName`` default-scheduler or unset)."""
    spec = pod.get("spec") or {}
    return not spec.get("nodeName") and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME


def _scheduling_inputs(pod: Obj) -> tuple[Any, ...]:
    meta = pod.get("metadata") or {}
    return pod.get("spec"), meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp")


class PendingPods(Predicate):
    """The primary watch: pods this scheduler must place, on creation or a change of what it reads."""

    def create(self, obj: Obj) -> bool:
        return responsible_for(obj)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return responsible_for(new) and (is_resync or _scheduling_inputs(old) != _scheduling_inputs(new))


@dataclass
class Assumed:
    """A pod assumed on ``node``, waiting for (or in) its binding cycle."""

    node: str
    request: Request
    pod: Obj


@dataclass
class Backoff:
    """An unschedulable pod's failed attempts and when it may be tried again."""

    attempts: int
    next_try: float


class Scheduler:
    """The reconciler of the ``scheduler`` controller (see the module docstring)."""

    def __init__(self, ctx: ControllerContext) -> None:
        options = ctx.options
        self.client = ctx.client
        self.clock = ctx.clock
        self.options = options
        self.recorder = ctx.events_recorder(SCHEDULER_NAME)
        self.pods: SharedIndexInformer = ctx.manager.informer("pods")
        self.cache = SchedulerCache()
        self.cache.on_freed = self._move_unschedulable
        self._cache_handlers = [
            self.pods.add_event_handler(on_add=self.cache.pod_added, on_update=self.cache.pod_updated,
                                        on_delete=self.cache.pod_deleted, accepts=self.cache.concerns),
            ctx.manager.informer("nodes").add_event_handler(
                on_add=self.cache.node_added, on_update=self.cache.node_updated, on_delete=self.cache.node_deleted)]
        self._synced = False
        self.unschedulable: dict[Request, Backoff] = {}
        self.bindings: asyncio.Queue[Assumed] = asyncio.Queue()  # assumed pods waiting for their binding cycle
        self.retries = Wakeups()  # pods whose binding failed, and unschedulable pods moved back

    # -- the queue ------------------------------------------------------------------------------------

    def _move_unschedulable(self) -> None:
        """The cache changed in a way that may let a pod fit: every unschedulable pod is tried again (each
        still waits out its backoff)."""
        for request in self.unschedulable:
            self.retries.add(request.namespace or "", request.name)

    def concerns(self, pod: Obj) -> bool:
        """The ``accepts`` of the primary watch: a pod this scheduler must place, or one waiting as
        unschedulable (its deletion or binding elsewhere is to clear it); a reconcile of any other does nothing."""
        return responsible_for(pod) or (bool(self.unschedulable) and Request.for_object(pod) in self.unschedulable)

    def _backoff(self, attempts: int) -> float:
        delay = self.options.scheduler_pod_initial_backoff * 2 ** min(attempts - 1, 32)
        return min(delay, self.options.scheduler_pod_max_backoff)

    # -- one cycle ------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        if not self._synced:
            await self._wait_for_cache()
        pod = self.pods.indexer.get_by_key(request.key)
        if pod is None or not responsible_for(pod) or pod["metadata"].get("deletionTimestamp") \
                or (pod.get("spec") or {}).get("schedulingGates"):
            self.unschedulable.pop(request, None)
            return None
        if self.cache.is_assumed(pod["metadata"].get("uid", "")):
            return None  # bound; its assignment has not reached the informer yet
        waiting = self.unschedulable.get(request)
        now = self.clock.now()
        if waiting is not None and now < waiting.next_try:
            return Result(requeue_after=waiting.next_try - now)
        requests = pod_requests(pod)
        feasible, rejections, prefilter = self._filter(pod, requests)
        if not feasible:
            return await self._unschedulable(request, pod, scheduling.fit_error(pod, rejections, prefilter))
        self._assume(request, pod, scheduling.select(pod, feasible).name, PodUsage.of(pod, requests))
        return None

    async def _wait_for_cache(self) -> None:
        """Wait until the cache has seen every pod and node of the informers' initial lists (kube's
        WaitForHandlersSync), so the first cycles count what is already on the nodes."""
        for registration in self._cache_handlers:
            await registration.wait_for_sync()
        self._synced = True

    def _filter(self, pod: Obj, requests: dict[str, int]) -> tuple[list[NodeInfo], list[Rejection], str | None]:
        """(the feasible nodes, one Rejection per other node, the PreFilter's message if it rejected all)."""
        allowed = scheduling.affinity_node_names(pod)
        infos = self.cache.nodes()
        if allowed is not None and not allowed:
            unresolvable = Rejection((scheduling.REASON_CONFLICT,), resolvable=False)
            return [], [unresolvable] * len(infos), scheduling.REASON_CONFLICT
        feasible: list[NodeInfo] = []
        rejections: list[Rejection] = []
        for info in infos:
            if allowed is not None and info.name not in allowed:
                rejection: Rejection | None = Rejection((scheduling.REASON_PREFILTERED,), resolvable=False)
            else:
                rejection = scheduling.check(pod, requests, info)
            if rejection is None:
                feasible.append(info)
            else:
                rejections.append(rejection)
        return feasible, rejections, None

    def _assume(self, request: Request, pod: Obj, node: str, usage: PodUsage) -> None:
        """End the scheduling cycle: count the pod on ``node`` and hand it to a binding cycle."""
        self.cache.assume(pod, node, usage)
        self.bindings.put_nowait(Assumed(node, request, pod))

    async def run_bindings(self) -> None:
        """The binding cycles, for as long as the cluster runs: each assumed pod is bound in a task of this
        loop's group, at most ``BINDINGS_IN_FLIGHT`` at once."""
        slots = asyncio.Semaphore(BINDINGS_IN_FLIGHT)

        async def bind(assumed: Assumed) -> None:
            try:
                await self._bind(assumed)
            finally:
                slots.release()

        async with task_group() as group:
            while True:
                assumed = await self.bindings.get()
                await slots.acquire()
                group.create_task(bind(assumed), name=f"scheduler-bind-{assumed.request.key}")

    async def _bind(self, assumed: Assumed) -> None:
        request, pod, node = assumed.request, assumed.pod, assumed.node
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": uid},
                   "target": {"kind": "Node", "name": node}}
        try:
            await self.client.create("pods", binding, meta["namespace"], subresource="binding")
        except (Conflict, NotFound) as exc:  # assigned meanwhile (by another scheduler) or deleted
            self.cache.forget(uid)
            log.info("binding %s to %s: %s", request.key, node, exc)
            return
        except Exception as exc:  # the pod is scheduled again, as kube's handleSchedulingFailure does
            self.cache.forget(uid)
            log.warning("binding %s to %s failed, scheduling it again: %s", request.key, node, exc)
            self.retries.add(request.namespace or "", request.name)
            return
        self.unschedulable.pop(request, None)
        self.recorder.event(pod_reference(pod), "Normal", "Scheduled",
                            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}", action="Binding")

    async def _unschedulable(self, request: Request, pod: Obj, message: str) -> Result:
        previous = self.unschedulable.get(request)
        attempts = (previous.attempts if previous else 0) + 1
        # in the unschedulable set before any await: a cache change while the condition is written moves it back
        self.unschedulable[request] = Backoff(attempts, self.clock.now() + self._backoff(attempts))
        self.recorder.event(pod_reference(pod), "Warning", "FailedScheduling", message, action="Scheduling")
        await self._set_unschedulable_condition(pod, message)
        log.info("pod %s is unschedulable: %s", request.key, message)
        return Result(requeue_after=self.options.scheduler_max_unschedulable_duration)

    async def _set_unschedulable_condition(self, pod: Obj, message: str) -> None:
        """Patch ``PodScheduled=False`` (Unschedulable) unless the pod already carries this very condition."""
        meta = pod["metadata"]
        status = {"conditions": [dict(c) for c in (pod.get("status") or {}).get("conditions") or ()]}
        if not set_condition(status, type="PodScheduled", status="False", reason="Unschedulable", message=message,
                             clock=self.clock):
            return
        condition = {**(find_condition(status, "PodScheduled") or {}), "lastProbeTime": None}
        try:
            await self.client.patch("pods", meta["name"], {"status": {"conditions": [condition]}}, "strategic",
                                    meta["namespace"], subresource="status")
        except NotFound:
            pass



def setup(ctx: ControllerContext) -> None:
    """Register the scheduler: one worker, its pending pods, the cache's events that retry unschedulable ones,
    and the loop of binding cycles."""
    scheduler = Scheduler(ctx)
    (ctx.manager.controller(scheduler, name="scheduler")
        .for_("pods", PendingPods(), accepts=scheduler.concerns)
        .source(scheduler.retries)
        .workers(1))
    ctx.run(scheduler.run_bindings, "scheduler-bindings")
