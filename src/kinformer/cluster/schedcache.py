"""kube-scheduler's cache (``pkg/scheduler/backend/cache``): every node with what the pods on it take, kept up to
date by the pods and nodes informers' events and by the scheduler's own assume/forget, instead of rebuilt from
every cached pod at each scheduling cycle.

Invariants:

* a pod (by uid) is counted on at most one node. An *assumed* pod (its scheduling cycle chose a node, its
  binding is sent or on its way) is counted from :meth:`SchedulerCache.assume` until the pods informer shows
  it assigned (it is then counted as bound: kube's "confirm"), its binding failed (:meth:`forget`) or it was
  deleted. A *bound* pod is counted while the informer shows it assigned and not terminal (Succeeded/Failed);
* each :class:`~.scheduling.NodeInfo`'s totals are the sum of the usages of the pods counted on it: a pod's
  usage is taken off exactly as it was added;
* the cache changes only in the informers' handlers and in assume/forget, never across an ``await`` of a
  scheduling cycle, so a cycle reads :meth:`nodes` in place (kube copies a snapshot because its cycle runs
  beside the informers' goroutines);
* a pod may be counted on a node whose Node is not (or no longer) in the informer: kube's NodeInfo without a
  node. Such a node is never offered to a pod, and it is dropped once it has neither Node nor pods;
* :attr:`SchedulerCache.on_freed` is called after the cache changed in a way that can make an unschedulable
  pod fit (a node added or changed in what scheduling reads, a counted pod removed), so the scheduler moves
  those pods back only once the cache already shows the change (kube's handlers update the cache, then call
  ``MoveAllToActiveOrBackoffQueue``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kinformer.cache.tombstone import DeletedFinalStateUnknown

from .podresources import allocatable, pod_requests
from .podutil import is_terminal
from .scheduling import NodeInfo, PodUsage

__all__ = ["SchedulerCache"]

Obj = Mapping[str, Any]


@dataclass
class _Counted:
    """Where a pod is counted, with the usage it was counted with."""

    key: str  # namespace/name
    node: str
    usage: PodUsage
    assumed: bool
    # the bound pod's spec the usage was computed from, or an equal one of a later version the informer holds
    # (None for an assumed pod)
    spec: Any = None


def _uid(pod: Obj) -> str:
    return str(pod["metadata"].get("uid") or "")


def _key(pod: Obj) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _scheduling_inputs(node: Obj) -> tuple[Any, ...]:
    """What filters and scores read of a Node (kube's NodeUpdate hints: allocatable, labels, taints,
    ``unschedulable``); a heartbeat changes none of it."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return (status.get("allocatable"), (node.get("metadata") or {}).get("labels"), spec.get("taints"),
            spec.get("unschedulable"))


class SchedulerCache:
    """The nodes and the pods counted on them (see the module docstring for the invariants)."""

    def __init__(self) -> None:
        self._infos: dict[str, NodeInfo] = {}  # every node with a Node object or a counted pod
        self._pods: dict[str, _Counted] = {}  # by pod uid
        self._offered: list[NodeInfo] | None = None  # the nodes with a Node object, by name; None: stale
        self.on_freed: Callable[[], None] = lambda: None

    # -- reads ----------------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        """Every node the informer shows, with its counted pods, sorted by name (the cache's own objects:
        read them, never change them)."""
        if self._offered is None:
            self._offered = [self._infos[name] for name in sorted(self._infos)
                             if self._infos[name].node is not None]
        return self._offered

    def concerns(self, pod: Obj) -> bool:
        """The ``accepts`` of the pod handlers: a bound pod, or one counted (assumed); the handlers change
        nothing for any other (an unbound pod's event only ever removes a counted one)."""
        return bool(_node_name(pod)) or _uid(pod) in self._pods

    def is_assumed(self, uid: str) -> bool:
        counted = self._pods.get(uid)
        return counted is not None and counted.assumed

    def __len__(self) -> int:
        """How many pods are counted."""
        return len(self._pods)

    # -- the scheduler's own changes ------------------------------------------------------------------

    def assume(self, pod: Obj, node: str, usage: PodUsage) -> None:
        """Count ``pod`` on ``node`` from the end of its scheduling cycle, before its binding is sent."""
        uid = _uid(pod)
        self._remove(uid)
        self._add(uid, _Counted(_key(pod), node, usage, assumed=True))

    def forget(self, uid: str) -> None:
        """Its binding failed: stop counting the assumed pod (a bound pod stays: the informer showed it)."""
        if self.is_assumed(uid):
            self._remove(uid)

    # -- nodes informer ---------------------------------------------------------------------------------

    async def node_added(self, node: Obj, is_in_initial_list: bool = False) -> None:
        self._set_node(node)
        self.on_freed()

    async def node_updated(self, old: Obj, new: Obj, is_resync: bool = False) -> None:
        self._set_node(new)
        if _scheduling_inputs(old) != _scheduling_inputs(new):
            self.on_freed()

    async def node_deleted(self, node: Any) -> None:
        name = node.key if isinstance(node, DeletedFinalStateUnknown) else node["metadata"]["name"]
        info = self._infos.get(name)
        if info is not None:
            info.node = None
            self._offered = None
            self._drop_if_empty(name)

    def _set_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        info = self._infos.get(name)
        offered = allocatable(node)
        if info is None:
            self._infos[name] = NodeInfo(name, node, offered)
            self._offered = None
            return
        if info.node is None:
            self._offered = None
        info.node, info.offered = node, offered

    # -- pods informer ----------------------------------------------------------------------------------

    async def pod_added(self, pod: Obj, is_in_initial_list: bool = False) -> None:
        self._observe(pod)

    async def pod_updated(self, old: Obj, new: Obj, is_resync: bool = False) -> None:
        self._observe(new)

    async def pod_deleted(self, pod: Any) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):  # the last state known, if any: its key otherwise
            uids = [_uid(pod.obj)] if pod.obj is not None else \
                [uid for uid, counted in self._pods.items() if counted.key == pod.key]
        else:
            uids = [_uid(pod)]
        if [uid for uid in uids if self._remove(uid)]:
            self.on_freed()

    def _observe(self, pod: Obj) -> None:
        """Count the pod as the informer now shows it: bound to its node while assigned and not terminal."""
        uid, node = _uid(pod), _node_name(pod)
        counted = self._pods.get(uid)
        if not node:  # not bound (yet): an assumed pod stays counted until its binding shows or fails
            if counted is not None and not counted.assumed:
                self._remove(uid)
                self.on_freed()
            return
        if is_terminal(pod):
            if self._remove(uid):
                self.on_freed()
            return
        spec = pod.get("spec")
        if counted is not None and not counted.assumed and counted.node == node and counted.spec == spec:
            counted.spec = spec  # the informer's (equal) spec: the one it replaced is no longer held here
            return  # counted as it is (a status change)
        self._remove(uid)
        self._add(uid, _Counted(_key(pod), node, PodUsage.of(pod, pod_requests(pod)), assumed=False, spec=spec))

    # -- bookkeeping ------------------------------------------------------------------------------------

    def _add(self, uid: str, counted: _Counted) -> None:
        info = self._infos.get(counted.node)
        if info is None:
            info = self._infos[counted.node] = NodeInfo(counted.node, None, {})
        info.add_pod(counted.usage)
        self._pods[uid] = counted

    def _remove(self, uid: str) -> bool:
        """Stop counting the pod; False when it was not counted."""
        counted = self._pods.pop(uid, None)
        if counted is None:
            return False
        self._infos[counted.node].remove_pod(counted.usage)
        self._drop_if_empty(counted.node)
        return True

    def _drop_if_empty(self, name: str) -> None:
        info = self._infos[name]
        if info.node is None and info.pods == 0:
            del self._infos[name]
