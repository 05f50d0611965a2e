"""The StatefulSet controller, as kube 1.32's pkg/controller/statefulset.

Implemented:

* pods ``<set>-<ordinal>`` for ``spec.ordinals.start`` .. ``start + replicas - 1`` with their identity and claims
  (:mod:`.statefulset_pods`); pods and revisions adopted and released as kube's ``ControllerRefManager``;
* ``podManagementPolicy: OrderedReady``: one pod at a time, in ordinal order, each Running, Ready (and
  available after ``minReadySeconds``) before the next is created; scale down from the highest ordinal, one at a
  time, only while every other pod is healthy (the first unhealthy one may go); ``Parallel``: every pod created
  and deleted at once (in slow-start batches), nothing waits;
* a Failed or Succeeded pod is deleted, and made again at the next sync;
* ControllerRevisions (:mod:`.history`): the update revision is the set's template; an equal older revision is
  reused with the next number (a roll back); ``revisionHistoryLimit`` old revisions no pod uses are kept;
* ``RollingUpdate``: the highest-ordinal pod not at the update revision is deleted (and made again at it) once
  every pod is healthy, down to ``partition``; pods below the partition are made at the current revision;
  ``OnDelete``: pods are made at the update revision only when deleted;
* status: replicas, readyReplicas, currentReplicas, updatedReplicas, availableReplicas, currentRevision,
  updateRevision, observedGeneration, collisionCount; the rollout completes (current := update) once every
  pod is updated and ready; with ``minReadySeconds`` the set is synced again after that many seconds while
  some pod is not available yet.
* expectations: every write is read back before the set's next sync (the Manager's read-your-writes), so a
  pod whose creation has not reached the cache yet is never created twice.

Not implemented: ``spec.updateStrategy.rollingUpdate.maxUnavailable`` (alpha ``MaxUnavailableStatefulSet``,
off by default in kube 1.32: the one-pod-at-a-time rule applies); status conditions (kube sets none).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kinformer.controller.reconcile import ObjectReconciler, Result

from ..podutil import is_being_deleted, is_pod_available, is_running_and_ready, phase
from . import history
from .refs import RefManager, is_orphan, orphan_mapper, owner_selector, valid_selector
from .slowstart import slow_start
from .statefulset_pods import (
    StatefulPodControl,
    identity_matches,
    in_ordinal_range,
    is_member_of,
    new_pod,
    ordinal_of,
    pod_revision,
    replicas_of,
    start_ordinal,
    storage_matches,
)

Obj = Mapping[str, Any]
#: Status fields Go writes even when zero (the others are ``omitempty``).
_ALWAYS_WRITTEN = ("replicas", "availableReplicas", "collisionCount")  # collisionCount: a pointer, always set


def is_created(pod: Obj) -> bool:
    return phase(pod) != ""


def is_healthy(pod: Obj) -> bool:
    return is_running_and_ready(pod) and not is_being_deleted(pod)


def allows_burst(sts: Obj) -> bool:
    return sts["spec"].get("podManagementPolicy") == "Parallel"


def strategy_type(sts: Obj) -> str:
    return (sts["spec"].get("updateStrategy") or {}).get("type") or "RollingUpdate"


def partition_of(sts: Obj) -> int | None:
    rolling = (sts["spec"].get("updateStrategy") or {}).get("rollingUpdate")
    return None if rolling is None else int(rolling.get("partition") or 0)


def made_at_current_revision(sts: Obj, ordinal: int) -> bool:
    """``newVersionedStatefulSetPod``: a missing pod below the partition is made at the current revision."""
    partition = partition_of(sts)
    return partition is not None and ordinal < start_ordinal(sts) + partition


def compute_status(pods: Sequence[Obj], min_ready: int, now_wall: float, current: str, update: str) -> dict[str, int]:
    """``computeReplicaStatus`` over ``pods``."""
    counts = dict.fromkeys(("replicas", "readyReplicas", "availableReplicas", "currentReplicas",
                            "updatedReplicas"), 0)
    for pod in pods:
        if is_created(pod):
            counts["replicas"] += 1
        if is_running_and_ready(pod):
            counts["readyReplicas"] += 1
            if is_pod_available(pod, min_ready, now_wall):
                counts["availableReplicas"] += 1
        if is_created(pod) and not is_being_deleted(pod):
            revision = pod_revision(pod)
            counts["currentReplicas"] += revision == current
            counts["updatedReplicas"] += revision == update
    return counts


async def run_for_all(count: int, call: Callable[[int], Awaitable[bool]], monotonic: bool) -> bool:
    """``runForAll``: in order, stopping at the first call that asks to (monotonic), or all in slow-start
    batches (burst; only errors stop). True when the pass must end here."""
    if monotonic:
        for i in range(count):
            if await call(i):
                return True
        return False
    await slow_start(range(count), call)
    return False


@dataclass
class _Pass:
    """One sync of a set: its pods by ordinal slot, the condemned ones, and the revisions."""

    sts: Obj
    current: Obj
    update: Obj
    pods: StatefulPodControl
    now_wall: float
    replicas: list[Obj] = field(default_factory=list)
    condemned: list[Obj] = field(default_factory=list)

    @property
    def monotonic(self) -> bool:
        return not allows_burst(self.sts)

    @property
    def min_ready(self) -> int:
        return int(self.sts["spec"].get("minReadySeconds") or 0)

    def place(self, pods: Sequence[Obj]) -> None:
        """Slot each pod by ordinal, make the missing ones (not created yet), condemn the rest (highest first)."""
        start, count = start_ordinal(self.sts), replicas_of(self.sts)
        slots: list[Obj | None] = [None] * count
        for pod in pods:
            if in_ordinal_range(pod, self.sts):
                slots[ordinal_of(pod) - start] = pod
            elif ordinal_of(pod) >= 0:
                self.condemned.append(pod)
        self.replicas = [pod if pod is not None else self._missing(start + i) for i, pod in enumerate(slots)]
        self.condemned.sort(key=ordinal_of, reverse=True)

    def _missing(self, ordinal: int) -> dict[str, Any]:
        revision = self.current if made_at_current_revision(self.sts, ordinal) else self.update
        return new_pod(self.sts, history.revision_template(revision), ordinal, revision["metadata"]["name"])

    def first_unhealthy(self) -> Obj | None:
        for pod in [*self.replicas, *reversed(self.condemned)]:
            if not is_healthy(pod):
                return pod
        return None

    def status_counts(self) -> dict[str, int]:
        return compute_status([*self.replicas, *self.condemned], self.min_ready, self.now_wall,
                              self.current["metadata"]["name"], self.update["metadata"]["name"])

    async def process_replica(self, i: int) -> bool:
        """``processReplica``: True when a monotonic pass must stop at this pod."""
        pod, monotonic = self.replicas[i], self.monotonic
        if phase(pod) in ("Failed", "Succeeded"):
            if not is_being_deleted(pod):
                await self.pods.delete_pod(self.sts, pod)
            return True
        if not is_created(pod):
            if await self.pods.claim_is_stale(self.sts, pod):
                return True
            await self.pods.create_pod(self.sts, dict(pod))
            return monotonic
        if phase(pod) == "Pending":
            await self.pods.create_missing_claims(self.sts, pod)
        if monotonic and (is_being_deleted(pod) or not is_running_and_ready(pod)
                          or not is_pod_available(pod, self.min_ready, self.now_wall)):
            return True
        if (identity_matches(self.sts, pod) and storage_matches(self.sts, pod)
                and await self.pods.claims_match_retention(self.sts, pod)):
            return False
        await self.pods.fix_identity(self.sts, pod)
        return False

    async def fix_condemned_claims(self, i: int) -> bool:
        pod = self.condemned[i]
        if not await self.pods.claims_match_retention(self.sts, pod):
            await self.pods.update_claims_for_retention(self.sts, pod)
        return False

    async def process_condemned(self, i: int, first_unhealthy: Obj | None) -> bool:
        """``processCondemned``: delete the condemned pod, waiting (monotonic) while another pod is unhealthy."""
        pod = self.condemned[i]
        if is_being_deleted(pod):
            return self.monotonic
        healthy = is_running_and_ready(pod) and is_pod_available(pod, self.min_ready, self.now_wall)
        if self.monotonic and not healthy and pod is not first_unhealthy:
            return True
        await self.pods.delete_pod(self.sts, pod)
        return True

    async def rolling_update(self) -> int:
        """Delete the highest pod not at the update revision once all above it are healthy; returns the number
        of pods deleted (0 or 1)."""
        floor = partition_of(self.sts) or 0
        update_name = self.update["metadata"]["name"]
        for target in range(len(self.replicas) - 1, floor - 1, -1):
            pod = self.replicas[target]
            if pod_revision(pod) != update_name and not is_being_deleted(pod):
                await self.pods.delete_pod(self.sts, pod)
                return 1
            if not is_healthy(pod):
                return 0
        return 0

    async def run(self) -> int:
        """``updateStatefulSet``: create, fix, condemn and roll; returns how many pods the roll deleted."""
        if self.sts["metadata"].get("deletionTimestamp"):
            return 0
        if await run_for_all(len(self.replicas), self.process_replica, self.monotonic):
            return 0
        if await run_for_all(len(self.condemned), self.fix_condemned_claims, self.monotonic):
            return 0
        first_unhealthy = self.first_unhealthy()

        async def condemn(i: int) -> bool:
            return await self.process_condemned(i, first_unhealthy)

        if await run_for_all(len(self.condemned), condemn, self.monotonic):
            return 0
        if strategy_type(self.sts) == "OnDelete":
            return 0
        return await self.rolling_update()


class StatefulSetReconciler(ObjectReconciler):
    """Syncs one StatefulSet per reconcile (kube's ``StatefulSetController.sync``)."""

    def __init__(self, clock: Any, recorder: Any) -> None:
        self.clock, self.recorder = clock, recorder

    async def reconcile(self, sts: Obj) -> Result:
        selector = valid_selector(sts)
        if selector is None:
            return Result()
        namespace = sts["metadata"]["namespace"]
        revisions = await RefManager(self.client, sts, "controllerrevisions", selector).claim(
            (await self.client.list("controllerrevisions", namespace=namespace)).items)
        pods = await RefManager(self.client, sts, "pods", selector, lambda pod: is_member_of(sts, pod)).claim(
            (await self.client.list("pods", namespace=namespace)).items)
        status = await self.sync(sts, pods, history.sort_revisions(revisions))
        min_ready = int(sts["spec"].get("minReadySeconds") or 0)
        if min_ready > 0 and status.get("availableReplicas", 0) != replicas_of(sts):
            return Result(requeue_after=float(min_ready))
        return Result()

    async def revisions(self, sts: Obj, revisions: Sequence[Obj]) -> tuple[Obj, Obj, int]:
        """``getStatefulSetRevisions``: (current, update, collision count)."""
        collision = int((sts.get("status") or {}).get("collisionCount") or 0)
        wanted = history.new_revision(sts, history.template_patch(sts), history.next_revision(revisions), collision,
                                      labels=(sts["spec"]["template"].get("metadata") or {}).get("labels"),
                                      annotations=sts["metadata"].get("annotations"))
        equal = history.find_equal_revisions(revisions, wanted)
        update: Obj
        if equal and history.equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]
        elif equal:
            update = await history.update_revision_number(self.client, equal[-1], history.revision_number(wanted))
        else:
            update, collision = await history.create_revision(self.client, sts, wanted, collision)
        current_name = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if r["metadata"]["name"] == current_name), update)
        return current, update, collision

    async def sync(self, sts: Obj, pods: Sequence[Obj], revisions: Sequence[Obj]) -> dict[str, Any]:
        """``performUpdate``: run the pass, write the status (even when the pass failed), trim the history."""
        current, update, collision = await self.revisions(sts, revisions)
        work = _Pass(sts, current, update, StatefulPodControl(self.client, self.recorder), self.clock.wall())
        work.place(pods)
        status = {"observedGeneration": sts["metadata"].get("generation"),
                  "currentRevision": current["metadata"]["name"], "updateRevision": update["metadata"]["name"],
                  "collisionCount": collision}
        failure: Exception | None = None
        rolled = 0
        try:
            rolled = await work.run()
        except Exception as err:  # the status is written all the same, then the sync is retried
            failure = err
        status.update(work.status_counts())
        status["currentReplicas"] -= rolled
        await self.write_status(sts, status)
        if failure is not None:
            raise failure
        await self.truncate_history(sts, pods, revisions, current, update)
        return status

    async def write_status(self, sts: Obj, status: dict[str, Any]) -> None:
        """``updateStatefulSetStatus``: complete a finished rolling update, then write what changed."""
        if (strategy_type(sts) == "RollingUpdate" and status["updatedReplicas"] == status["replicas"]
                and status["readyReplicas"] == status["replicas"]):
            status["currentReplicas"] = status["updatedReplicas"]
            status["currentRevision"] = status["updateRevision"]
        old = sts.get("status") or {}
        written = {k: (v if v or k in _ALWAYS_WRITTEN else None) for k, v in status.items()}
        if all(old.get(k) == v for k, v in written.items()):
            return
        meta = sts["metadata"]
        await self.client.patch_status("statefulsets", meta["name"], {"status": written},
                                       namespace=meta["namespace"])

    async def truncate_history(self, sts: Obj, pods: Sequence[Obj], revisions: Sequence[Obj], current: Obj,
                               update: Obj) -> None:
        """Delete the oldest revisions that neither the set nor any pod uses, beyond ``revisionHistoryLimit``."""
        live = {current["metadata"]["name"], update["metadata"]["name"], *(pod_revision(p) for p in pods)}
        old = [r for r in revisions if r["metadata"]["name"] not in live]
        limit = history.history_limit(sts)
        for revision in old[:max(0, len(old) - limit)]:
            await self.client.delete("controllerrevisions", revision["metadata"]["name"],
                                     namespace=revision["metadata"]["namespace"])


def setup(ctx: Any) -> None:
    """Register the StatefulSet controller (kube-controller-manager's "statefulset")."""
    manager = ctx.manager
    reconciler = StatefulSetReconciler(ctx.clock, ctx.recorder("statefulset-controller"))
    sets = manager.informer("statefulsets")
    manager.controller(reconciler, name="statefulset") \
        .for_("statefulsets") \
        .owns("pods") \
        .watches("pods", mapper=orphan_mapper(sets, owner_selector), accepts=is_orphan) \
        .workers(ctx.options.workers)


__all__ = ["StatefulSetReconciler", "compute_status", "setup"]
