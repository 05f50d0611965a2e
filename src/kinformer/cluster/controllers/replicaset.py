"""The replicaset controller (kube 1.32 pkg/controller/replicaset), as ``"replicaset"``.

Implemented as kube does it:

* claim: pods matching the selector are adopted (controller ownerReference, blockOwnerDeletion), controlled
  pods that stopped matching are released; only active pods count (not Succeeded/Failed/being deleted);
* manage: too few pods -> create the difference (at most ``burstReplicas``, 500) in slow-start batches
  (1, 2, 4...; a failed batch stops the rest), too many -> delete the lowest-ranked ones; the key is not
  managed again until the informer has observed those creations and deletions (expectations, 5 min TTL);
* deletion ranking (``ActivePodsWithRanks``): unscheduled < scheduled, Pending < Unknown < Running,
  not ready < ready, lower ``controller.kubernetes.io/pod-deletion-cost`` first, more related pods on the
  same node first, ready for less time first, more restarts first, newer first (ready and creation
  times compared on kube's logarithmic scale, ties broken by uid);
* status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (minReadySeconds; requeued
  after minReadySeconds while ready pods are not available yet), observedGeneration, and the
  ReplicaFailure condition (FailedCreate / FailedDelete with the error) while managing fails;
* events through :class:`.podcontrol.PodControl`: SuccessfulCreate "Created pod: <name>", SuccessfulDelete
  "Deleted pod: <name>", FailedCreate "Error creating: <error>", FailedDelete "Error deleting: <error>".

Not implemented: the re-check of the owner's deletion from the API server before adopting (the cache is
trusted), the ``TerminatingReplicas`` status field (alpha in 1.33), and the ReplicationController twin.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kinformer.controller.reconcile import Request, Result
from kinformer.errors import APIError, NotFound
from kinformer.selectors import LabelSelector, Operator

from ..metatime import parse_time, rfc3339
from ..podutil import is_being_deleted, is_pod_active, is_pod_available, is_pod_ready, ready_condition
from ..wakeups import Wakeups
from .expectations import (
    Expectations,
    Obj,
    meta,
)
from .podcontrol import PodControl, error_message, namespace_terminating
from .podtemplate import pod_from_template
from .refs import RefManager, controller_of, owners_selecting, selector_from
from .slowstart import slow_start_batch

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

log = logging.getLogger(__name__)

#: kube's BurstReplicas: the most pods created or deleted in one sync.
BURST_REPLICAS = 500
SLOW_START_INITIAL_BATCH = 1
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _log_rank(then: float, now: float) -> int:
    """floor(log2(age in nanoseconds)), -1 for no age (``logarithmicRankDiff``'s rank)."""
    age_ns = (now - then) * 1e9
    return int(math.log2(age_ns)) if age_ns > 0 else -1


def _deletion_cost(pod: Obj) -> int:
    try:
        return int((meta(pod).get("annotations") or {}).get(DELETION_COST, "0"))
    except ValueError:
        return 0


def _max_restarts(pod: Obj) -> int:
    return max((c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or ()),
               default=0)


def _compare_times(t1: float | None, t2: float | None, uid1: str, uid2: str, now: float) -> bool | None:
    """Less(i, j) by a timestamp where the later (younger) sorts first; None when equal."""
    if t1 == t2:
        return None
    if t1 is None or t2 is None:
        return t1 is None
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return uid1 < uid2
    return diff < 0


def deletion_less(a: Obj, b: Obj, rank_a: int, rank_b: int, now: float) -> bool:
    """``ActivePodsWithRanks.Less``: True when ``a`` should be deleted before ``b``."""
    node_a, node_b = (a.get("spec") or {}).get("nodeName") or "", (b.get("spec") or {}).get("nodeName") or ""
    if node_a != node_b and (not node_a or not node_b):
        return not node_a
    phase_a = _PHASE_ORDER.get((a.get("status") or {}).get("phase", ""), 0)
    phase_b = _PHASE_ORDER.get((b.get("status") or {}).get("phase", ""), 0)
    if phase_a != phase_b:
        return phase_a < phase_b
    ready_a, ready_b = is_pod_ready(a), is_pod_ready(b)
    if ready_a != ready_b:
        return not ready_a
    if _deletion_cost(a) != _deletion_cost(b):
        return _deletion_cost(a) < _deletion_cost(b)
    if rank_a != rank_b:
        return rank_a > rank_b
    uid_a, uid_b = meta(a).get("uid", ""), meta(b).get("uid", "")
    if ready_a and ready_b:
        by_ready = _compare_times(parse_time((ready_condition(a) or {}).get("lastTransitionTime")),
                                  parse_time((ready_condition(b) or {}).get("lastTransitionTime")),
                                  uid_a, uid_b, now)
        if by_ready is not None:
            return by_ready
    if _max_restarts(a) != _max_restarts(b):
        return _max_restarts(a) > _max_restarts(b)
    by_age = _compare_times(parse_time(meta(a).get("creationTimestamp")),
                            parse_time(meta(b).get("creationTimestamp")), uid_a, uid_b, now)
    return bool(by_age)


def pods_to_delete(pods: Sequence[Obj], related: Sequence[Obj], count: int, now: float) -> list[Obj]:
    """The ``count`` pods to delete first (``getPodsToDelete``): ranked, with pods doubled up on a node with
    other related active pods going first."""
    if count >= len(pods):
        return list(pods)
    on_node = Counter((p.get("spec") or {}).get("nodeName") or "" for p in related if is_pod_active(p))
    ranked = [(p, on_node[(p.get("spec") or {}).get("nodeName") or ""]) for p in pods]
    def cmp(x: tuple[Obj, int], y: tuple[Obj, int]) -> int:
        if deletion_less(x[0], y[0], x[1], y[1], now):
            return -1
        return 1 if deletion_less(y[0], x[0], y[1], x[1], now) else 0

    ranked.sort(key=functools.cmp_to_key(cmp))
    return [p for p, _ in ranked[:count]]


class PodView(NamedTuple):
    """What a ReplicaSet sync reads of one pod version: whether it is active, the uid of its controller
    reference (None without one, ``""`` for one without a uid), its labels, whether its Ready condition is
    True and that condition's ``lastTransitionTime``."""

    active: bool
    controller_uid: str | None
    labels: Mapping[str, str]
    ready: bool
    ready_since: str | None

    def available(self, min_ready_seconds: int, now: float) -> bool:
        """``is_pod_available`` of the pod."""
        if not self.ready:
            return False
        if not min_ready_seconds:
            return True
        since = parse_time(self.ready_since)
        return since is not None and since + min_ready_seconds < now


def pod_view(pod: Obj) -> PodView:
    """The :class:`PodView` of ``pod`` as it is."""
    ref = controller_of(pod)
    cond = ready_condition(pod)
    ready = cond is not None and cond.get("status") == "True"
    return PodView(is_pod_active(pod), None if ref is None else ref.get("uid") or "", meta(pod).get("labels") or {},
                   ready, cond.get("lastTransitionTime") if ready and cond is not None else None)


class PodViews:
    """Each listed pod's :class:`PodView`, made once per pod version.

    Invariant: an entry's view was made from the very object it holds (looked up by ``id``, which cannot be
    reused while the entry holds the object); the informer replaces a pod's object at each change and never
    changes one, so the view stays right. A namespace's entries are those of its last listing (a pod gone
    from the informer is dropped at the next)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[int, tuple[Obj, PodView]]] = {}

    def of(self, namespace: str, pods: Sequence[Obj]) -> list[tuple[Obj, PodView]]:
        """``pods`` (the namespace's listing) with their views, in order."""
        known = self._by_namespace.get(namespace) or {}
        listed: dict[int, tuple[Obj, PodView]] = {}
        for pod in pods:
            key = id(pod)
            entry = known.get(key)
            if entry is None:
                entry = (pod, pod_view(pod))
            listed[key] = entry
        if listed:
            self._by_namespace[namespace] = listed
        else:
            self._by_namespace.pop(namespace, None)
        return list(listed.values())


def calculate_status(rs: Obj, pods: Sequence[Obj], manage_error: BaseException | None, now: float,
                     views: Sequence[PodView] | None = None) -> dict[str, Any]:
    """``calculateStatus``: counts of the claimed active pods and the ReplicaFailure condition. ``views``: the
    pods' :class:`PodView`s when the caller has them (else they are made here)."""
    spec = rs.get("spec") or {}
    status = dict(rs.get("status") or {})
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = spec.get("minReadySeconds") or 0
    conditions = [dict(c) for c in status.get("conditions") or ()]
    failure = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if manage_error is not None and failure is None:
        diff = len(pods) - spec.get("replicas", 1)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        conditions.append({"type": "ReplicaFailure", "status": "True", "lastTransitionTime": rfc3339(now),
                           "reason": reason, "message": str(manage_error)})
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    status["conditions"] = conditions
    if not conditions:
        status.pop("conditions")
    status.update(_counts([pod_view(p) for p in pods] if views is None else views, template_labels, min_ready, now))
    return {k: v for k, v in status.items() if v != 0 or k == "replicas"}  # the API omits the other zero counts


def _counts(views: Sequence[PodView], template_labels: Mapping[str, str], min_ready: int,
            now: float) -> dict[str, int]:
    """replicas, fullyLabeledReplicas, readyReplicas and availableReplicas, in one pass over the pods' views (a
    ReplicaSet of hundreds of pods is counted at every sync)."""
    labeled = ready = available = 0
    wanted = template_labels.items()
    exact = all(v.__class__ is str for v in template_labels.values())  # (a null label matches a missing one)
    for view in views:
        labels = view.labels
        labeled += wanted <= labels.items() if exact else all(labels.get(k) == v for k, v in wanted)
        if view.ready:
            ready += 1
            available += view.available(min_ready, now)
    return {"replicas": len(views), "fullyLabeledReplicas": labeled, "readyReplicas": ready,
            "availableReplicas": available}


def next_available_in(pods: Sequence[Obj], min_ready_seconds: int, now: float) -> float | None:
    """Seconds until the first ready pod that is not available yet becomes available (None: no such pod).

    kube requeues a ReplicaSet ``minReadySeconds`` after a pod turns ready; waiting for the exact moment the
    oldest such pod passes ``minReadySeconds`` reaches the same status without a late or early look."""
    if not min_ready_seconds:
        return None
    waits = [since + min_ready_seconds - now
             for p in pods if is_pod_ready(p) and not is_pod_available(p, min_ready_seconds, now)
             for since in [parse_time((ready_condition(p) or {}).get("lastTransitionTime"))] if since is not None]
    # strictly after the deadline (IsPodAvailable compares with Before), plus the timestamps' 1 s granularity
    return max(min(waits), 0.0) + 0.01 if waits else None


_COUNTS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def status_changed(rs: Obj, status: Mapping[str, Any]) -> bool:
    old = rs.get("status") or {}
    return (any(old.get(k, 0) != status.get(k, 0) for k in _COUNTS)
            or meta(rs).get("generation") != old.get("observedGeneration")
            or (old.get("conditions") or []) != (status.get("conditions") or []))


class ReplicaSetController:
    """Reconciles one ReplicaSet key: claim, manage replicas (when expectations allow), write status."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.client = ctx.manager.client
        self.clock = ctx.clock
        self.recorder = ctx.recorder("replicaset-controller")
        self.pods = PodControl(self.client, self.recorder)
        self.expectations = Expectations(ctx.clock)
        self.wakeups = Wakeups()
        self.pod_views = PodViews()
        self.rs_informer = ctx.manager.informer("replicasets")
        self.pod_informer = ctx.manager.informer("pods")
        self.pod_informer.add_event_handler(on_add=self._pod_added, on_update=self._pod_updated,
                                            on_delete=self._pod_deleted, accepts=_maybe_replicasets)

    # -- pod events: expectations and which ReplicaSets to sync ------------------------------------------

    def _controlling_rs(self, pod: Obj) -> Obj | None:
        ref = controller_of(pod)
        if ref is None or not _is_replicaset(ref):
            return None
        rs = self.rs_informer.indexer.get_by_key(f"{meta(pod).get('namespace')}/{ref.get('name')}")
        if rs is None or meta(rs).get("uid") != ref.get("uid"):
            return None
        return rs

    def _enqueue_matching(self, pod: Obj) -> None:
        """Orphans: every ReplicaSet in the namespace whose selector matches the pod's labels."""
        for request in owners_selecting(self.rs_informer, pod):
            self.wakeups.add(request.namespace, request.name)

    async def _pod_added(self, pod: Obj, is_in_initial_list: bool = False) -> None:
        if is_being_deleted(pod):
            await self._pod_deleted(pod)
            return
        if controller_of(pod) is not None:
            rs = self._controlling_rs(pod)
            if rs is not None:
                self.expectations.creation_observed(_key(rs))
                self.wakeups.add(meta(rs)["namespace"], meta(rs)["name"])
            return
        self._enqueue_matching(pod)

    async def _pod_updated(self, old: Obj, new: Obj, is_resync: bool = False) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return  # a resync: nothing about the pod changed
        if is_being_deleted(new):  # graceful deletion: replace the pod now, not once the kubelet is done
            await self._pod_deleted(new)
            if meta(old).get("labels") != meta(new).get("labels"):
                await self._pod_deleted(old)
            return
        old_rs, new_rs = self._controlling_rs(old), self._controlling_rs(new)
        if old_rs is not None and (new_rs is None or meta(old_rs)["uid"] != meta(new_rs)["uid"]):
            self.wakeups.add(meta(old_rs)["namespace"], meta(old_rs)["name"])
        if new_rs is not None:
            self.wakeups.add(meta(new_rs)["namespace"], meta(new_rs)["name"])
            return
        if controller_of(new) is None and (meta(old).get("labels") != meta(new).get("labels")
                                           or controller_of(old) is not None):
            self._enqueue_matching(new)

    async def _pod_deleted(self, pod: Any) -> None:
        pod = getattr(pod, "obj", pod)
        rs = self._controlling_rs(pod)
        if rs is None:
            return
        self.expectations.deletion_observed(_key(rs), _key(pod))
        self.wakeups.add(meta(rs)["namespace"], meta(rs)["name"])

    # -- reconcile ----------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        rs = self.rs_informer.indexer.get_by_key(request.key)
        if rs is None:
            self.expectations.forget(request.key)
            return Result()
        needs_sync = self.expectations.satisfied(request.key)
        try:
            selector = _selector(rs)
        except ValueError as err:
            log.warning("replicaset %s has an invalid selector: %s", request.key, err)
            return Result()
        listed = self.pod_views.of(request.namespace, self.pod_informer.lister().namespaced(request.namespace).list())
        claimed = await self._claim(rs, selector, listed)
        pods = [p for p, _ in claimed]
        manage_error: BaseException | None = None
        if needs_sync and not is_being_deleted(rs):
            manage_error = await self._manage(rs, pods)
        now = self.clock.wall()
        status = calculate_status(rs, pods, manage_error, now, [v for _, v in claimed])
        updated = await self._write_status(rs, status)
        if manage_error is not None:
            raise manage_error
        wait = next_available_in(pods, (updated.get("spec") or {}).get("minReadySeconds") or 0, now)
        return Result() if wait is None else Result(requeue_after=wait)

    async def _claim(self, rs: Obj, selector: LabelSelector,
                     listed: list[tuple[Obj, PodView]]) -> list[tuple[Obj, PodView]]:
        """:meth:`RefManager.claim` of the active pods of ``listed``, in order: a pod ``rs`` controls and selects
        is kept as it would keep it, without a call; orphans and the pods it controls but no longer selects go
        through it (adopted or released); pods another owner controls and inactive pods are left."""
        uid = meta(rs)["uid"]
        manager = RefManager(self.client, rs, "pods", selector)
        required = required_labels(selector)
        wanted = required.items() if required is not None else None
        claimed = []
        for pod, view in listed:
            if not view.active:
                continue
            if view.controller_uid == uid and (selector.matches(view.labels) if wanted is None
                                               else wanted <= view.labels.items()):
                claimed.append((pod, view))
            elif view.controller_uid in (None, uid) and await manager.claim([pod]):
                claimed.append((pod, view))
        return claimed

    async def _write_status(self, rs: Obj, status: dict[str, Any]) -> Obj:
        if not status_changed(rs, status):
            return rs
        status["observedGeneration"] = meta(rs).get("generation")
        body = {"metadata": {"name": meta(rs)["name"], "namespace": meta(rs)["namespace"],
                             "resourceVersion": meta(rs)["resourceVersion"]}, "status": status}
        try:
            return await self.client.replace_status("replicasets", body)
        except NotFound:
            return rs

    async def _manage(self, rs: Obj, pods: list[Obj]) -> BaseException | None:
        key = _key(rs)
        diff = len(pods) - (rs.get("spec") or {}).get("replicas", 1)
        if diff < 0:
            return await self._create(rs, key, min(-diff, BURST_REPLICAS))
        if diff > 0:
            return await self._delete(rs, key, pods, min(diff, BURST_REPLICAS))
        return None

    async def _create(self, rs: Obj, key: str, count: int) -> BaseException | None:
        self.expectations.expect_creations(key, count)

        async def create_one() -> None:
            body = pod_from_template(rs["spec"].get("template") or {}, rs)
            try:
                await self.pods.create(rs, body, meta(rs)["namespace"])
            except APIError as err:
                if not namespace_terminating(err):
                    raise

        successes, error = await slow_start_batch(range(count), lambda _: create_one(), SLOW_START_INITIAL_BATCH)
        for _ in range(count - successes):
            self.expectations.creation_observed(key)
        return error

    async def _delete(self, rs: Obj, key: str, pods: list[Obj], count: int) -> BaseException | None:
        related = self._related_pods(rs)
        victims = pods_to_delete(pods, related, count, self.clock.wall())
        self.expectations.expect_deletions(key, [_key(p) for p in victims])

        async def delete_one(pod: Obj) -> BaseException | None:
            try:
                if not await self.pods.delete(rs, meta(pod)["name"], meta(pod)["namespace"]):
                    self.expectations.deletion_observed(key, _key(pod))
            except APIError as err:
                self.expectations.deletion_observed(key, _key(pod))
                return RuntimeError(f"unable to delete pods: {error_message(err)}")
            return None

        errors = [e for e in await asyncio.gather(*(delete_one(p) for p in victims)) if e is not None]
        return errors[0] if errors else None

    def _related_pods(self, rs: Obj) -> list[Obj]:
        """Pods of every ReplicaSet with the same controller as ``rs`` (``getIndirectlyRelatedPods``)."""
        ref = controller_of(rs)
        namespace = meta(rs)["namespace"]
        siblings = [rs]
        if ref is not None:
            siblings = [s for s in self.rs_informer.lister().namespaced(namespace).list()
                        if (controller_of(s) or {}).get("uid") == ref.get("uid")]
        seen: dict[str, Obj] = {}
        lister = self.pod_informer.lister().namespaced(namespace)
        for sibling in siblings:
            try:
                selector = _selector(sibling)
            except ValueError:
                continue
            for pod in lister.list(selector):
                seen.setdefault(meta(pod).get("uid", ""), pod)
        return list(seen.values())


def _maybe_replicasets(pod: Obj) -> bool:
    """The pods whose events may concern a ReplicaSet: orphans and pods a ReplicaSet controls (the pod
    handlers do nothing for a pod another kind controls)."""
    ref = controller_of(pod)
    return ref is None or _is_replicaset(ref)


def _is_replicaset(ref: Obj) -> bool:
    return ref.get("kind") == "ReplicaSet" and str(ref.get("apiVersion", "")).startswith("apps/")


_EQUALITIES = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)


def required_labels(selector: LabelSelector) -> dict[str, str] | None:
    """The labels ``selector`` requires when it is equalities only (``matchLabels``, one-value ``In``) and
    selects something: a label set matches it exactly when it holds all of them. None for any other
    selector (``nothing``, other operators, two values required of one key)."""
    requirements = selector.requirements
    if not requirements and not selector.empty():
        return None  # the selector of nothing
    required: dict[str, str] = {}
    for key, op, values in requirements:
        if op not in _EQUALITIES or len(values) != 1 or required.setdefault(key, values[0]) != values[0]:
            return None
    return required


def _selector(rs: Obj) -> LabelSelector:
    return selector_from((rs.get("spec") or {}).get("selector"))


def _key(obj: Obj) -> str:
    return f"{meta(obj).get('namespace')}/{meta(obj).get('name')}"


def setup(ctx: ControllerContext) -> None:
    """Register the replicaset controller: ReplicaSets, and pods through its own handlers (expectations)."""
    controller = ReplicaSetController(ctx)
    ctx.manager.controller(controller, name="replicaset").for_("replicasets") \
        .source(controller.wakeups).workers(ctx.options.workers)
