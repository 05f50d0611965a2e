"""kube-controller-manager's taint eviction controller (``taint-eviction-controller``; kube 1.29+
pkg/controller/tainteviction), deleting pods from nodes with NoExecute taints they do not tolerate.

Per pod assigned to a node (reconciled when the pod or its node changes):

* no NoExecute taint on the node -> any pending eviction is cancelled (Normal ``TaintManagerEviction``
  "Cancelling deletion of Pod ns/name");
* a NoExecute taint no toleration of the pod tolerates -> the pod is deleted at once;
* every one tolerated -> the pod is deleted the smallest ``tolerationSeconds`` of the tolerations used
  after the controller first saw it so (on the cluster's clock); a toleration without
  ``tolerationSeconds`` tolerates forever. A later change keeps an eviction already scheduled.

Deleting records Normal ``TaintManagerEviction`` "Marking for deletion Pod ns/name", adds the pod's
``DisruptionTarget`` condition (reason ``DeletionByTaintManager``) and deletes the pod. Terminal and
already-deleting pods are left alone. Not implemented: the eviction retries' rate limit (a failed delete is
retried with the controller's backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kinformer.controller import Result
from kinformer.controller.conditions import set_condition
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Request
from kinformer.errors import NotFound

from .. import taints as t
from ..podindex import pod_reference, pods_informer, pods_on_node
from ..podutil import is_terminal

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer

    from ..cluster import ControllerContext

log = logging.getLogger(__name__)

COMPONENT = "taint-eviction-controller"
Obj = Mapping[str, Any]


def toleration_seconds(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> float | None:
    """How long the pod may stay: 0 if a taint is not tolerated, None for ever, else the smallest
    ``tolerationSeconds`` of the tolerations used, each taint using the first toleration that tolerates it
    (kube's GetMatchingTolerations and getMinTolerationTime)."""
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((tol for tol in tolerations if t.tolerates(tol, taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    bounded = [max(0, int(tol["tolerationSeconds"])) for tol in used if tol.get("tolerationSeconds") is not None]
    return float(min(bounded)) if bounded else None


class TaintEviction:
    """The reconciler (see the module docstring); ``scheduled`` maps a pod to when it was first seen
    evictable, and is the whole state: an eviction is cancelled by dropping its entry."""

    def __init__(self, ctx: ControllerContext, pods: SharedIndexInformer, nodes: SharedIndexInformer) -> None:
        self.client, self.clock = ctx.client, ctx.clock
        self.recorder = ctx.recorder(COMPONENT)
        self.pods, self.nodes = pods, nodes
        self.scheduled: dict[Request, float] = {}

    def may_act(self, pod: Obj) -> bool:
        """The ``accepts`` of the pods watch: a pod with an eviction scheduled (its change may cancel it), or
        assigned to a node the cache shows with a NoExecute taint. Any other pod's reconcile would do nothing;
        a node tainted later wakes the pods the cache then shows on it (``pods_of_node``), and the pods cache
        is updated before this is asked, the nodes cache before their mapper runs: no pod falls between."""
        if self.scheduled and Request.for_object(pod) in self.scheduled:
            return True
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self.nodes.indexer.get_by_key(node_name) if node_name else None
        taints = (node.get("spec") or {}).get("taints") if node is not None else None
        if not taints:  # (the usual node)
            return False
        return any(x.get("effect") == t.NO_EXECUTE for x in taints)

    def pods_of_node(self, node: Obj) -> list[Request]:
        """The mapper of node events: every pod assigned to the node."""
        return [Request.for_object(pod) for pod in pods_on_node(self.pods, node["metadata"]["name"])]

    async def reconcile(self, request: Request) -> Result | None:
        pod = self.pods.indexer.get_by_key(request.key)
        if pod is None or is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            self.scheduled.pop(request, None)
            return None
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self.nodes.indexer.get_by_key(node_name) if node_name else None
        taints = [x for x in t.node_taints(node) if x.get("effect") == t.NO_EXECUTE] if node else []
        if not taints:
            self._cancel(request, pod)
            return None
        seconds = toleration_seconds(taints, t.pod_tolerations(pod))
        if seconds is None:
            self._cancel(request, pod)
            return None
        now = self.clock.now()
        due = self.scheduled.setdefault(request, now) + seconds
        if now < due:
            return Result(requeue_after=due - now)
        await self._evict(request, pod)
        return None

    def _cancel(self, request: Request, pod: Obj) -> None:
        if self.scheduled.pop(request, None) is not None:
            self.recorder.event(pod_reference(pod), "Normal", "TaintManagerEviction",
                                f"Cancelling deletion of Pod {request.key}")

    async def _evict(self, request: Request, pod: Obj) -> None:
        meta = pod["metadata"]
        log.info("evicting pod %s from a NoExecute-tainted node", request.key)
        self.recorder.event(pod_reference(pod), "Normal", "TaintManagerEviction",
                            f"Marking for deletion Pod {request.key}")
        status = {"conditions": [dict(c) for c in (pod.get("status") or {}).get("conditions") or ()]}
        try:
            if set_condition(status, type="DisruptionTarget", status="True", reason="DeletionByTaintManager",
                             message="Taint manager: deleting due to NoExecute taint", clock=self.clock):
                target = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
                await self.client.patch_status("pods", meta["name"], {"status": {"conditions": [target]}},
                                               "strategic", meta["namespace"])
            await self.client.delete("pods", meta["name"], meta["namespace"],
                                     preconditions={"uid": meta["uid"]} if meta.get("uid") else None)
        except NotFound:
            pass
        self.scheduled.pop(request, None)



class PodPlacementChanged(Predicate):
    """Pod updates that can change an eviction (kube's ``PodUpdated`` returns early unless the node name or the
    tolerations changed; leaving the node for good, by deletion or a terminal phase, cancels one): a pod's
    status writes are not looked at again."""

    @staticmethod
    def _inputs(pod: Obj) -> tuple[Any, ...]:
        return ((pod.get("spec") or {}).get("nodeName"), t.pod_tolerations(pod),
                bool(pod["metadata"].get("deletionTimestamp")), is_terminal(pod))

    def create(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("nodeName"))  # an unassigned pod has no node to be evicted from

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return is_resync or self._inputs(old) != self._inputs(new)


class NoExecuteTaintsChanged(Predicate):
    """Node updates that change its NoExecute taints (kube's ``NodeUpdated`` returns early otherwise): a node's
    heartbeats do not look at every pod on it again."""

    @staticmethod
    def _taints(node: Obj) -> list[dict[str, Any]]:
        return [x for x in t.node_taints(node) if x.get("effect") == t.NO_EXECUTE]

    def update(self, old: Obj, new: Obj, is_resync: bool = False) -> bool:
        return is_resync or self._taints(old) != self._taints(new)


def setup(ctx: ControllerContext) -> None:
    """Register the controller on pods, and on nodes mapped to the pods assigned to them."""
    nodes = ctx.manager.informer("nodes")
    eviction = TaintEviction(ctx, pods_informer(ctx.manager), nodes)
    (ctx.manager.controller(eviction, name="taint-eviction-controller")
        .for_("pods", PodPlacementChanged(), accepts=eviction.may_act)
        .watches("nodes", NoExecuteTaintsChanged(), mapper=eviction.pods_of_node)
        .workers(ctx.options.workers))
