"""The DaemonSet controller, as kube 1.32's pkg/controller/daemon.

Implemented:

* one pod per node that should run it (:mod:`.daemonset_nodes`: nodeSelector, required node affinity, taints
  and the tolerations kube adds to daemon pods); the pod is aimed at its node by required node affinity on
  ``metadata.name`` and left for the scheduler to bind, as kube does (ScheduleDaemonSetPods); labels
  ``controller-revision-hash`` and ``pod-template-generation``; pods adopted and released as kube's
  ``ControllerRefManager`` does;
* the manage loop: a node that should run the pod and has none gets one; a Failed pod is deleted (a
  ``FailedDaemonPod`` warning; per node, at most once per back-off, 1 s doubling to 15 min), a Succeeded one too;
  extra pods on a node go (the oldest is kept; with surge, an old and a new pod may coexist); pods on nodes
  that should no longer run them go (a NoExecute taint they do not tolerate, a label that no longer
  matches); unscheduled pods aimed at a node that is gone go;
* creations in slow-start batches (1, 2, 4, ...) of at most 250 per sync, deletions at once;
* ControllerRevisions (:mod:`.daemonset_history`): the revision equal to the template is current (a roll back
  reuses the old one, whose pods are not restarted), else a new ``<ds>-<hash>``;
* updates: ``RollingUpdate`` with ``maxUnavailable`` and ``maxSurge`` (:mod:`.daemonset_update`), in a sync
  where the manage loop wrote nothing (kube: once its expectations are satisfied); ``OnDelete``;
* status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady, numberAvailable,
  numberUnavailable, updatedNumberScheduled, observedGeneration (written only when something changed); with
  ``minReadySeconds`` the set is synced again after that many seconds while a ready pod is not available yet;
* events: ``SuccessfulCreate`` "Created pod: <name>", ``SuccessfulDelete`` "Deleted pod: <name>",
  ``FailedCreate``/``FailedDelete`` with the error (each about the DaemonSet, one Event per message);
* expectations: every write is read back before the set's next sync (the Manager's read-your-writes).

Left to others, as in kube: pods bound to a node that no longer exists are collected by the pod garbage
collector (:mod:`.podgc`); node updates that change only the node's status do not resync the sets (only
labels and taints count).

Not implemented: status conditions (kube sets none either); a worker count of its own
(``--concurrent-daemonset-syncs``: ``ClusterOptions.workers`` serves every controller); the controller's metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kinformer.client import to_plain
from kinformer.controller.predicates import Funcs
from kinformer.controller.reconcile import ObjectReconciler, Request, Result
from kinformer.selectors import LabelSelector

from ..podutil import is_pod_available, is_pod_ready, is_terminal, phase
from . import history
from .daemonset_history import DaemonSetHistory
from .daemonset_nodes import add_daemon_tolerations, aim_at_node, should_run, target_node
from .daemonset_update import (
    TEMPLATE_GENERATION_LABEL,
    RollingUpdate,
    allows_surge,
    is_pod_updated,
    surge_count,
    template_generation,
    unavailable_count,
)
from .podcontrol import PodControl
from .podtemplate import pod_from_template
from .refs import RefManager, is_orphan, orphan_mapper, owner_selector, valid_selector
from .slowstart import slow_start

Obj = Mapping[str, Any]
BURST_REPLICAS = 250
BACKOFF_INITIAL, BACKOFF_MAX = 1.0, 15 * 60.0
#: kube's BackoffGCInterval: how often expired failed-pod back-offs are forgotten.
BACKOFF_GC_INTERVAL = 60.0
_STATUS_FIELDS = ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled", "numberReady",
                  "updatedNumberScheduled", "numberAvailable", "numberUnavailable")


def oldest_first(pods: Sequence[Obj]) -> list[Obj]:
    """``podByCreationTimestampAndPhase``: Running before not, then oldest first, then by name."""
    return sorted(pods, key=lambda p: (phase(p) != "Running", p["metadata"].get("creationTimestamp") or "",
                                       p["metadata"]["name"]))


class FailedPodBackoff:
    """Per (set, node) back-off for deleting failed daemon pods (kube's ``failedPodsBackoff``)."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (delay, last update)
        self._last_gc = clock.now()

    def __len__(self) -> int:
        return len(self._entries)

    def in_backoff(self, key: str) -> float | None:
        """The delay still running for ``key``, or None."""
        entry = self._entries.get(key)
        if entry is None or self.clock.now() - entry[1] >= entry[0]:
            return None
        return entry[0]

    def next(self, key: str) -> None:
        now = self.clock.now()
        if now - self._last_gc >= BACKOFF_GC_INTERVAL:
            self._gc(now)
        entry = self._entries.get(key)
        if entry is None or now - entry[1] > 2 * BACKOFF_MAX:
            self._entries[key] = (BACKOFF_INITIAL, now)
        else:
            self._entries[key] = (min(entry[0] * 2, BACKOFF_MAX), now)

    def _gc(self, now: float) -> None:
        """Forget the entries not updated for twice the longest delay (kube's ``Backoff.GC``), so what is kept
        is bounded by the (set, node) pairs that failed lately, not by every pair that ever failed."""
        self._last_gc = now
        for key in [k for k, (_, last) in self._entries.items() if now - last > 2 * BACKOFF_MAX]:
            del self._entries[key]


@dataclass
class _Plan:
    """What the manage loop decided for one set."""

    create: list[str] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    requeue_after: float | None = None

    def retry_in(self, seconds: float) -> None:
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


class DaemonSetReconciler(ObjectReconciler):
    """Syncs one DaemonSet per reconcile (kube's ``syncDaemonSet``)."""

    def __init__(self, clock: Any, recorder: Any) -> None:
        self.clock, self.recorder = clock, recorder
        self.backoff = FailedPodBackoff(clock)

    async def reconcile(self, ds: Obj) -> Result:
        selector = valid_selector(ds)
        if selector is None:
            return Result()
        if ds["metadata"].get("deletionTimestamp"):
            return Result()
        nodes = list((await self.client.list("nodes")).items)
        revisions = DaemonSetHistory(self.client, ds, lambda: self.node_pods(ds, selector))
        current, old = await revisions.construct(selector)
        hash_ = current["metadata"]["labels"][history.CONTROLLER_REVISION_HASH_LABEL]
        plan = await self.manage(ds, selector, nodes, hash_)
        # kube rolls only once the manage loop's writes were observed: here, when it wrote nothing this sync
        rolling = (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"
        if rolling and not plan.create and not plan.delete:
            await self.rolling_update(ds, selector, nodes, hash_)
        await revisions.cleanup(old)
        requeue = await self.update_status(ds, selector, nodes, hash_)
        delays = [d for d in (plan.requeue_after, requeue) if d is not None]
        return Result(requeue_after=min(delays)) if delays else Result()

    # -- pods -------------------------------------------------------------------------------------------------

    async def node_pods(self, ds: Obj, selector: LabelSelector) -> dict[str, list[Obj]]:
        """``getNodesToDaemonPods``: the set's pods by target node (terminal pods being deleted left out)."""
        listed = (await self.client.list("pods", namespace=ds["metadata"]["namespace"])).items
        out: dict[str, list[Obj]] = {}
        for pod in await RefManager(self.client, ds, "pods", selector).claim(listed):
            if is_terminal(pod) and pod["metadata"].get("deletionTimestamp"):
                continue
            node = target_node(pod)
            if node is not None:
                out.setdefault(node, []).append(pod)
        return out

    def _failed_pod(self, ds: Obj, pod: Obj, node: str, plan: _Plan) -> None:
        key = f"{ds['metadata']['namespace']}/{ds['metadata']['name']}/{node}"
        delay = self.backoff.in_backoff(key)
        if delay is not None:
            plan.retry_in(delay)
            return
        self.backoff.next(key)
        meta = pod["metadata"]
        self.recorder.event(ds, "Warning", "FailedDaemonPod",
                            f"Found failed daemon pod {meta['namespace']}/{meta['name']} on node {node}, "
                            "will try to kill it")
        plan.delete.append(meta["name"])

    def _pods_on_node(self, ds: Obj, node: Obj, pods: Sequence[Obj] | None, hash_: str, plan: _Plan) -> None:
        """``podsShouldBeOnNode``."""
        run, keep = should_run(ds, node)
        name = node["metadata"]["name"]
        if run and pods is None:
            plan.create.append(name)
        elif keep:
            running = []
            for pod in pods or ():
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                if phase(pod) == "Failed":
                    self._failed_pod(ds, pod, name, plan)
                elif phase(pod) == "Succeeded":
                    self.recorder.event(ds, "Normal", "SucceededDaemonPod",
                                        f"Found succeeded daemon pod {pod['metadata']['namespace']}/"
                                        f"{pod['metadata']['name']} on node {name}, will try to delete it")
                    plan.delete.append(pod["metadata"]["name"])
                else:
                    running.append(pod)
            self._trim(ds, running, run, name, hash_, plan)
        elif pods:
            plan.delete.extend(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))

    def _trim(self, ds: Obj, running: list[Obj], run: bool, node: str, hash_: str, plan: _Plan) -> None:
        """Keep one pod on the node (with surge: the oldest new one, and the oldest old one while the new one
        is not available and the old one is ready)."""
        running = oldest_first(running)
        if not allows_surge(ds):
            plan.delete.extend(p["metadata"]["name"] for p in running[1:])
            return
        if not running:
            if run:
                plan.create.append(node)
            return
        generation = template_generation(ds)
        new = [p for p in running if is_pod_updated(p, hash_, generation)]
        old = [p for p in running if not is_pod_updated(p, hash_, generation)]
        plan.delete.extend(p["metadata"]["name"] for p in new[1:] + old[1:])
        if new and old:
            min_ready = int(ds["spec"].get("minReadySeconds") or 0)
            if not is_pod_ready(old[0]) or is_pod_available(new[0], min_ready, self.clock.wall()):
                plan.delete.append(old[0]["metadata"]["name"])

    async def manage(self, ds: Obj, selector: LabelSelector, nodes: Sequence[Obj], hash_: str) -> _Plan:
        """``manage``: create and delete pods so each node that should run one runs one."""
        node_pods = await self.node_pods(ds, selector)
        plan = _Plan()
        for node in nodes:
            self._pods_on_node(ds, node, node_pods.get(node["metadata"]["name"]), hash_, plan)
        known = {node["metadata"]["name"] for node in nodes}
        for node_name, pods in node_pods.items():  # aimed at a node that is gone, never scheduled
            if node_name not in known:
                plan.delete.extend(p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName"))
        await self.sync_nodes(ds, plan.delete, plan.create, hash_)
        return plan

    def _pod_for(self, ds: Obj, node: str, hash_: str) -> dict[str, Any]:
        """``CreatePodTemplate`` aimed at ``node``."""
        template = to_plain(ds["spec"]["template"])
        add_daemon_tolerations(template.setdefault("spec", {}))
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        generation = template_generation(ds)
        if generation is not None:
            labels[TEMPLATE_GENERATION_LABEL] = str(generation)
        if hash_:
            labels[history.CONTROLLER_REVISION_HASH_LABEL] = hash_
        template["spec"]["affinity"] = aim_at_node(template["spec"].get("affinity"), node)
        return pod_from_template(template, ds)

    async def sync_nodes(self, ds: Obj, delete: Sequence[str], create: Sequence[str], hash_: str) -> None:
        """``syncNodes``: at most 250 creations (slow start) and 250 deletions per sync."""
        namespace = ds["metadata"]["namespace"]
        pods = PodControl(self.client, self.recorder)

        async def create_on(node: str) -> None:
            await pods.create(ds, self._pod_for(ds, node, hash_), namespace)

        async def delete_pod(name: str) -> None:
            await pods.delete(ds, name, namespace)

        await slow_start(list(create)[:BURST_REPLICAS], create_on)
        await slow_start(list(delete)[:BURST_REPLICAS], delete_pod, initial=BURST_REPLICAS)

    async def rolling_update(self, ds: Obj, selector: LabelSelector, nodes: Sequence[Obj], hash_: str) -> None:
        """``rollingUpdate``: replace old pods within maxUnavailable / maxSurge."""
        node_pods: dict[str, Sequence[Obj]] = dict(await self.node_pods(ds, selector))
        by_name = {node["metadata"]["name"]: node for node in nodes}
        desired = 0
        for node in nodes:
            if should_run(ds, node)[0]:
                desired += 1
                node_pods.setdefault(node["metadata"]["name"], [])
        max_surge, max_unavailable = surge_count(ds, desired), unavailable_count(ds, desired)
        if desired > 0 and max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1

        def runs_on(name: str) -> bool:
            return name in by_name and should_run(ds, by_name[name])[0]

        plan = RollingUpdate(ds, node_pods, hash_, self.clock.wall(), runs_on, max_surge, max_unavailable,
                             desired).plan()
        await self.sync_nodes(ds, plan.delete, plan.create, hash_)

    # -- status -----------------------------------------------------------------------------------------------

    async def update_status(self, ds: Obj, selector: LabelSelector, nodes: Sequence[Obj], hash_: str) -> float | None:
        """``updateDaemonSetStatus``; returns when to sync again (minReadySeconds), if at all."""
        node_pods = await self.node_pods(ds, selector)
        counts = dict.fromkeys(_STATUS_FIELDS, 0)
        min_ready, now = int(ds["spec"].get("minReadySeconds") or 0), self.clock.wall()
        generation = template_generation(ds)
        for node in nodes:
            pods = node_pods.get(node["metadata"]["name"]) or []
            if not should_run(ds, node)[0]:
                counts["numberMisscheduled"] += bool(pods)
                continue
            counts["desiredNumberScheduled"] += 1
            if not pods:
                continue
            counts["currentNumberScheduled"] += 1
            pod = oldest_first(pods)[0]
            if is_pod_ready(pod):
                counts["numberReady"] += 1
                counts["numberAvailable"] += is_pod_available(pod, min_ready, now)
            counts["updatedNumberScheduled"] += is_pod_updated(pod, hash_, generation)
        counts["numberUnavailable"] = counts["desiredNumberScheduled"] - counts["numberAvailable"]
        await self._store_status(ds, counts)
        if min_ready > 0 and counts["numberReady"] != counts["numberAvailable"]:
            return float(min_ready)
        return None

    async def _store_status(self, ds: Obj, counts: dict[str, int]) -> None:
        status = ds.get("status") or {}
        generation = ds["metadata"].get("generation")
        if all(int(status.get(k) or 0) == v for k, v in counts.items()) and \
                int(status.get("observedGeneration") or 0) >= int(generation or 0):
            return
        written: dict[str, Any] = {k: (v or None) for k, v in counts.items()}
        for always in ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled", "numberReady"):
            written[always] = counts[always]
        written["observedGeneration"] = generation
        meta = ds["metadata"]
        await self.client.patch_status("daemonsets", meta["name"], {"status": written}, namespace=meta["namespace"])


def _node_scheduling_changed(old: Obj, new: Obj) -> bool:
    """``shouldIgnoreNodeUpdate`` negated: the node's labels or taints changed."""
    return bool((old["metadata"].get("labels") != new["metadata"].get("labels"))
                or ((old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints")))


def setup(ctx: Any) -> None:
    """Register the DaemonSet controller (kube-controller-manager's "daemonset")."""
    manager = ctx.manager
    reconciler = DaemonSetReconciler(ctx.clock, ctx.recorder("daemonset-controller"))
    sets = manager.informer("daemonsets")

    def every_set(_node: Obj) -> list[Request]:
        return [Request.for_object(ds) for ds in sets.indexer.list()]

    manager.controller(reconciler, name="daemonset") \
        .for_("daemonsets") \
        .owns("pods") \
        .owns("controllerrevisions") \
        .watches("pods", mapper=orphan_mapper(sets, owner_selector), accepts=is_orphan) \
        .watches("nodes", Funcs(update=_node_scheduling_changed), mapper=every_set) \
        .workers(ctx.options.workers)


__all__ = ["DaemonSetReconciler", "setup"]
