"""kube-scheduler: binds each pending pod to a node (``setup``: the ``scheduler`` controller).

A pod is this scheduler's when ``spec.schedulerName`` is ``default-scheduler`` (or absent), ``spec.nodeName``
is empty, it is not being deleted and has no scheduling gates left. One worker schedules one pod at a time,
as kube's scheduling cycle does, against a snapshot of the nodes and the pods already on them
(:mod:`kinformer.cluster.scheduling` has the filters, the scoring and the message).

Invariants:

* the assume cache: a pod is counted on its node from the moment it is assumed (the end of its scheduling
  cycle) until the pods informer shows it assigned (or gone), so pods scheduled back to back never over-commit
  a node while their bindings and watch events are on their way;
* binding cycles run beside the scheduling cycle, as kube's do (``bindingCycle`` in a goroutine of its own):
  one worker schedules pod after pod while up to ``BINDINGS_IN_FLIGHT`` bindings are sent, so a round trip
  to the API server is not paid once per pod in sequence; a binding refused because the pod was bound or
  deleted meanwhile only un-assumes it, any other failure un-assumes it and queues it again;
* a pod that fits nowhere gets the ``PodScheduled=False`` condition (reason ``Unschedulable``, kube's
  message; written only when it changed) and a ``FailedScheduling`` Warning event, and waits in the
  unschedulable set. A node added, or changed in what scheduling reads (allocatable, labels, taints,
  ``unschedulable``), or an assigned pod deleted or finished, moves every unschedulable pod back; each
  pod still waits out its backoff (``scheduler_pod_initial_backoff`` doubling per failure up to
  ``scheduler_pod_max_backoff``) and is retried anyway after ``scheduler_max_unschedulable_duration``;
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
from .podindex import pod_reference, pods_informer, pods_on_node
from .podresources import Resources, allocatable, pod_requests
from .podutil import is_terminal
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


def _assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _scheduling_inputs(pod: Obj) -> tuple[Any, ...]:
    meta = pod.get("metadata") or {}
    return pod.get("spec"), meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp")


class PendingPods(Predicate):
    """The primary watch: pods this scheduler must place, on creation or a change of what it reads."""

    def create(self, obj: Obj) -> bool:
        return responsible_for(obj)

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return responsible_for(new) and (is_resync or _scheduling_inputs(old) != _scheduling_inputs(new))


class NodeChanged(Predicate):
    """Node events that can make an unschedulable pod fit (kube's NodeAdd and the NodeUpdate it hints)."""

    @staticmethod
    def _inputs(node: Obj) -> tuple[Any, ...]:
        spec, status = node.get("spec") or {}, node.get("status") or {}
        return (status.get("allocatable"), (node.get("metadata") or {}).get("labels"), spec.get("taints"),
                spec.get("unschedulable"))

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return self._inputs(old) != self._inputs(new)

    def delete(self, obj: Obj) -> bool:
        return False


class PodFreedResources(Predicate):
    """An assigned pod deleted or finished (kube's AssignedPodDelete and a pod turning terminal)."""

    def create(self, obj: Obj) -> bool:
        return False

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return _assigned(old) and not is_terminal(old) and is_terminal(new)

    def delete(self, obj: Obj) -> bool:
        return _assigned(obj)


@dataclass
class Assumed:
    """A pod whose binding was sent and whose assignment the informer has not shown yet."""

    key: str
    node: str
    usage: PodUsage
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
        self.pods: SharedIndexInformer = pods_informer(ctx.manager)
        self.nodes: SharedIndexInformer = ctx.manager.informer("nodes")
        self.assumed: dict[str, Assumed] = {}  # by pod uid
        #: by pod uid: (the resourceVersion it was read at, its usage), for the pods of the last snapshot, so a
        #: cycle does not recompute what every other pod takes of its node
        self.usages: dict[str, tuple[str, PodUsage]] = {}
        #: by node name: (the resourceVersion it was read at, its allocatable), so a cycle does not parse it again
        self.allocatables: dict[str, tuple[str, Resources]] = {}
        self.unschedulable: dict[Request, Backoff] = {}
        self.bindings: asyncio.Queue[Assumed] = asyncio.Queue()  # assumed pods waiting for their binding cycle
        self.retries = Wakeups()  # pods whose binding failed, scheduled again

    # -- the queue ------------------------------------------------------------------------------------

    def unschedulable_pods(self, _: Obj) -> list[Request]:
        """The mapper of cluster events: every pod waiting in the unschedulable set."""
        return list(self.unschedulable)

    def _backoff(self, attempts: int) -> float:
        delay = self.options.scheduler_pod_initial_backoff * 2 ** min(attempts - 1, 32)
        return min(delay, self.options.scheduler_pod_max_backoff)

    # -- one cycle ------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        pod = self.pods.indexer.get_by_key(request.key)
        if pod is None or not responsible_for(pod) or pod["metadata"].get("deletionTimestamp") \
                or (pod.get("spec") or {}).get("schedulingGates"):
            self.unschedulable.pop(request, None)
            return None
        if pod["metadata"].get("uid") in self.assumed:
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

    def _filter(self, pod: Obj, requests: dict[str, int]) -> tuple[list[NodeInfo], list[Rejection], str | None]:
        """(the feasible nodes, one Rejection per other node, the PreFilter's message if it rejected all)."""
        allowed = scheduling.affinity_node_names(pod)
        infos = self._snapshot()
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

    def _snapshot(self) -> list[NodeInfo]:
        """Every node with its assigned, non-terminal pods and the pods assumed on it, sorted by name."""
        offered: dict[str, tuple[str, Resources]] = {}
        infos = {node["metadata"]["name"]: NodeInfo(node, self._allocatable(node, offered))
                 for node in self.nodes.indexer.list()}
        self.allocatables = offered  # the nodes gone since the last snapshot are forgotten
        usages: dict[str, tuple[str, PodUsage]] = {}
        for name, info in infos.items():
            for pod in pods_on_node(self.pods, name):
                if not is_terminal(pod):
                    info.add_pod(self._usage(pod, usages))
        self.usages = usages  # the pods gone since the last snapshot are forgotten
        for uid, assumed in list(self.assumed.items()):
            cached = self.pods.indexer.get_by_key(assumed.key)
            if cached is None or cached["metadata"].get("uid") != uid or _assigned(cached):
                del self.assumed[uid]  # the informer caught up (or the pod is gone)
            elif assumed.node in infos:
                infos[assumed.node].add_pod(assumed.usage)
        return [infos[name] for name in sorted(infos)]

    def _allocatable(self, node: Obj, offered: dict[str, tuple[str, Resources]]) -> Resources:
        """The node's allocatable, parsed again only when the node changed since the last snapshot."""
        meta = node["metadata"]
        name, version = meta["name"], meta.get("resourceVersion", "")
        known = self.allocatables.get(name)
        if known is None or known[0] != version:
            known = (version, allocatable(node))
        offered[name] = known
        return known[1]

    def _usage(self, pod: Obj, usages: dict[str, tuple[str, PodUsage]]) -> PodUsage:
        """The pod's usage, computed again only when the pod changed since the last snapshot."""
        meta = pod["metadata"]
        uid, version = meta.get("uid", ""), meta.get("resourceVersion", "")
        known = self.usages.get(uid)
        usage = known[1] if known is not None and known[0] == version else PodUsage.of(pod, pod_requests(pod))
        usages[uid] = (version, usage)
        return usage

    def _assume(self, request: Request, pod: Obj, node: str, usage: PodUsage) -> None:
        """End the scheduling cycle: count the pod on ``node`` and hand it to a binding cycle."""
        assumed = Assumed(request.key, node, usage, request, pod)
        self.assumed[pod["metadata"].get("uid", "")] = assumed
        self.bindings.put_nowait(assumed)

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
                group.create_task(bind(assumed), name=f"scheduler-bind-{assumed.key}")

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
            self.assumed.pop(uid, None)
            log.info("binding %s to %s: %s", request.key, node, exc)
            return
        except Exception as exc:  # the pod is scheduled again, as kube's handleSchedulingFailure does
            self.assumed.pop(uid, None)
            log.warning("binding %s to %s failed, scheduling it again: %s", request.key, node, exc)
            self.retries.add(request.namespace or "", request.name)
            return
        self.unschedulable.pop(request, None)
        self.recorder.event(pod_reference(pod), "Normal", "Scheduled",
                            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}", action="Binding")

    async def _unschedulable(self, request: Request, pod: Obj, message: str) -> Result:
        self.recorder.event(pod_reference(pod), "Warning", "FailedScheduling", message, action="Scheduling")
        await self._set_unschedulable_condition(pod, message)
        previous = self.unschedulable.get(request)
        attempts = (previous.attempts if previous else 0) + 1
        self.unschedulable[request] = Backoff(attempts, self.clock.now() + self._backoff(attempts))
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
    """Register the scheduler: one worker, its pending pods, the events that retry unschedulable ones, and the
    loop of binding cycles."""
    scheduler = Scheduler(ctx)
    (ctx.manager.controller(scheduler, name="scheduler")
        .for_("pods", PendingPods())
        .watches("nodes", NodeChanged(), mapper=scheduler.unschedulable_pods)
        .watches("pods", PodFreedResources(), mapper=scheduler.unschedulable_pods)
        .source(scheduler.retries)
        .workers(1))
    ctx.run(scheduler.run_bindings, "scheduler-bindings")
