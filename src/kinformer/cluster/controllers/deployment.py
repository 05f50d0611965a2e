"""The deployment controller (kube 1.32 pkg/controller/deployment), as ``"deployment"``.

Implemented as kube does it:

* ReplicaSets are claimed by the Deployment's selector (adopted / released as the replicaset controller does
  pods); the *new* ReplicaSet is the oldest one whose template equals the Deployment's but for the
  ``pod-template-hash`` label; it is created as ``<deployment>-<hash>`` with that label in its template and
  selector, revision max(old)+1, ``desired-replicas`` / ``max-replicas`` annotations and the Deployment's
  other annotations copied; a name taken by a ReplicaSet with another template bumps ``collisionCount``;
* RollingUpdate: scale the new ReplicaSet up to at most replicas + maxSurge pods in all, scale old ones down
  (unhealthy replicas first) while keeping replicas - maxUnavailable available; Recreate: scale every old
  ReplicaSet to 0, wait until none of their pods runs, then create/scale up the new one;
* a change of ``spec.replicas`` while a rollout is in flight is spread over the active ReplicaSets in
  proportion to their size (``max-replicas`` annotation), leftovers to the largest; a paused Deployment is
  only scaled; ``kubectl rollout undo`` (client side, kubectl patches the template back) makes the old
  ReplicaSet the new one again: it gets the next revision, the old one appended to ``revision-history``;
* old ReplicaSets scaled to 0 beyond ``revisionHistoryLimit`` are deleted once the rollout is complete (or
  while paused), lowest revision first;
* status: replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
  observedGeneration, collisionCount; conditions Available (MinimumReplicasAvailable / ...Unavailable),
  Progressing (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
  ProgressDeadlineExceeded, DeploymentPaused / DeploymentResumed, FailedRSCreate), ReplicaFailure copied from
  the ReplicaSets; a Deployment is requeued to notice its progress deadline passing;
* events ScalingReplicaSet "Scaled up|down replica set <rs> from <old> to <new>", FailedRSCreate,
  SelectingAll.

Not implemented: ``spec.rollbackTo`` (extensions/v1beta1 only, gone from apps/v1), the re-check of the owner's
deletion from the API server before adopting, and the 1.33 alpha ``terminatingReplicas``. The pod-template
hash is FNV-32a of the template's JSON, not of Go's struct dump, so hashes differ from kube's.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kinformer.controller.conditions import find_condition, remove_condition
from kinformer.controller.handlers import maps_any
from kinformer.controller.reconcile import Request, Result
from kinformer.errors import AlreadyExists, APIError, NotFound

from ..metatime import parse_time
from . import deployment_util as du
from .expectations import Obj, meta
from .refs import RefManager, controller_of, controller_ref, owners_selecting, selector_from

if TYPE_CHECKING:
    from kinformer.cluster.cluster import ControllerContext

log = logging.getLogger(__name__)

_STATUS_COUNTS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas")


def _own(obj: Any) -> dict[str, Any]:
    """A mutable deep copy of a cached object."""
    return obj.to_dict() if hasattr(obj, "to_dict") else copy.deepcopy(dict(obj))


def _pruned_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status as the API serializes it: zero counts, a nil collisionCount and no conditions omitted."""
    return {k: v for k, v in status.items() if v not in (0, None, [])}


def _ns_name(obj: Obj) -> tuple[str, str]:
    return meta(obj).get("namespace") or "", meta(obj)["name"]


class DeploymentController:
    """Reconciles one Deployment key (``syncDeployment``)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.client = ctx.manager.client
        self.clock = ctx.clock
        self.recorder = ctx.recorder("deployment-controller")
        self.deployments = ctx.manager.informer("deployments")
        self.replicasets = ctx.manager.informer("replicasets")
        self.pods = ctx.manager.informer("pods")

    # -- event mapping -----------------------------------------------------------------------------------------

    def replicaset_owners(self, rs: Obj) -> list[Request]:
        """The controlling Deployment, or (an orphan) every Deployment whose selector matches."""
        namespace = meta(rs).get("namespace") or ""
        ref = controller_of(rs)
        if ref is not None:
            return [Request(namespace, ref["name"])] if ref.get("kind") == "Deployment" else []
        return owners_selecting(self.deployments, rs)

    def pod_owner(self, pod: Obj) -> list[Request]:
        """A deleted pod of a Recreate Deployment's ReplicaSet wakes the Deployment (old pods gone?)."""
        ref = controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return []
        namespace = meta(pod).get("namespace") or ""
        rs = self.replicasets.indexer.get_by_key(f"{namespace}/{ref['name']}")
        owner = controller_of(rs) if rs is not None else None
        if owner is None or owner.get("kind") != "Deployment":
            return []
        d = self.deployments.indexer.get_by_key(f"{namespace}/{owner['name']}")
        if d is None or du.is_rolling(d):
            return []
        return [Request(namespace, owner["name"])]

    # -- sync ----------------------------------------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        cached = self.deployments.indexer.get_by_key(request.key)
        if cached is None:
            return Result()
        d = _own(cached)
        selector = (d.get("spec") or {}).get("selector") or {}
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            self.recorder.event(cached, "Warning", "SelectingAll",
                                "This deployment is selecting all pods. A non-empty selector is required.")
            if (d.get("status") or {}).get("observedGeneration", 0) < meta(d).get("generation", 0):
                d.setdefault("status", {})["observedGeneration"] = meta(d).get("generation")
                await self._update_status(d)
            return Result()
        rss = await self._claim_replicasets(d)
        if meta(d).get("deletionTimestamp"):
            new, olds = await self._new_and_old(d, rss, create=False)
            await self._sync_status(d, new, olds)
            return Result()
        await self._check_paused_conditions(d)
        if d["spec"].get("paused") or await self._is_scaling_event(d, rss):
            await self._sync(d, rss)
            return Result()
        if du.is_rolling(d):
            return await self._rollout_rolling(d, rss)
        return await self._rollout_recreate(d, rss)

    async def _claim_replicasets(self, d: dict[str, Any]) -> list[dict[str, Any]]:
        namespace = meta(d)["namespace"]
        selector = selector_from(d["spec"]["selector"])
        manager = RefManager(self.client, d, "replicasets", selector)
        claimed = await manager.claim(self.replicasets.lister().namespaced(namespace).list())
        return [_own(rs) for rs in claimed]

    def _pods_by_rs(self, d: Obj, rss: list[dict[str, Any]]) -> dict[str, list[Obj]]:
        """``getPodMapForDeployment``: the Deployment's pods grouped by the uid of their ReplicaSet."""
        by_uid: dict[str, list[Obj]] = {meta(rs)["uid"]: [] for rs in rss}
        selector = selector_from(d["spec"]["selector"])
        for pod in self.pods.lister().namespaced(meta(d)["namespace"]).list(selector):
            ref = controller_of(pod)
            if ref is not None and ref.get("uid") in by_uid:
                by_uid[ref["uid"]].append(pod)
        return by_uid

    async def _check_paused_conditions(self, d: dict[str, Any]) -> None:
        if not du.has_progress_deadline(d):
            return
        status = d.setdefault("status", {})
        cond = find_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == du.TIMED_OUT:
            return
        paused_cond = cond is not None and cond.get("reason") == du.PAUSED
        if d["spec"].get("paused") and not paused_cond:
            du.set_condition(status, du.new_condition("Progressing", "Unknown", du.PAUSED, "Deployment is paused",
                                                      self.clock.wall()))
        elif not d["spec"].get("paused") and paused_cond:
            du.set_condition(status, du.new_condition("Progressing", "Unknown", du.RESUMED, "Deployment is resumed",
                                                      self.clock.wall()))
        else:
            return
        await self._update_status(d)

    async def _is_scaling_event(self, d: dict[str, Any], rss: list[dict[str, Any]]) -> bool:
        new, olds = await self._new_and_old(d, rss, create=False)
        for rs in du.active([*olds, new]):
            desired = du.annotations_of(rs).get(du.DESIRED_REPLICAS)
            if desired is not None and desired.isdigit() and int(desired) != du.replicas(d):
                return True
        return False

    async def _sync(self, d: dict[str, Any], rss: list[dict[str, Any]]) -> None:
        """Scaling only (a paused Deployment, or replicas changed): ``sync``."""
        new, olds = await self._new_and_old(d, rss, create=False)
        await self._scale(d, new, olds)
        if d["spec"].get("paused"):
            await self._cleanup(d, olds)
        await self._sync_status(d, new, olds)

    # -- new and old ReplicaSets -----------------------------------------------------------------------------

    async def _new_and_old(self, d: dict[str, Any], rss: list[dict[str, Any]],
                           create: bool) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """``getAllReplicaSetsAndSyncRevision``: the new ReplicaSet (created when asked) and all the old ones."""
        existing = du.find_new(d, rss)
        olds = [rs for rs in rss if existing is None or meta(rs)["uid"] != meta(existing)["uid"]]
        new_revision = str(du.max_revision(olds) + 1)
        if existing is not None:
            return await self._sync_existing_new(d, existing, new_revision), olds
        if not create:
            return None, olds
        return await self._create_new(d, olds, new_revision), olds

    async def _sync_existing_new(self, d: dict[str, Any], rs: dict[str, Any], new_revision: str) -> dict[str, Any]:
        rs_annotations = rs["metadata"].setdefault("annotations", {})
        changed = du.set_new_rs_annotations(d, rs_annotations, new_revision, exists=True)
        min_ready = d["spec"].get("minReadySeconds", 0)
        if changed or rs["spec"].get("minReadySeconds", 0) != min_ready:
            rs["spec"]["minReadySeconds"] = min_ready
            await self._replace_rs(rs)
            return rs
        await self._set_revision(d, rs_annotations.get(du.REVISION, ""))
        status = d.setdefault("status", {})
        if du.has_progress_deadline(d) and find_condition(status, "Progressing") is None:
            du.set_condition(status, du.new_condition("Progressing", "True", du.FOUND_NEW_RS,
                                                      f'Found new replica set "{meta(rs)["name"]}"', self.clock.wall()))
            await self._update_status(d)
        return rs

    async def _create_new(self, d: dict[str, Any], olds: list[dict[str, Any]], new_revision: str) -> dict[str, Any]:
        status = d.setdefault("status", {})
        template = copy.deepcopy(d["spec"]["template"])
        pod_hash = du.compute_hash(template, status.get("collisionCount"))
        template.setdefault("metadata", {}).setdefault("labels", {})[du.HASH_LABEL] = pod_hash
        selector = copy.deepcopy(d["spec"]["selector"])
        selector.setdefault("matchLabels", {})[du.HASH_LABEL] = pod_hash
        name = f"{meta(d)['name']}-{pod_hash}"
        new: dict[str, Any] = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": meta(d)["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "ownerReferences": [controller_ref(d)], "annotations": {}},
            "spec": {"replicas": 0, "minReadySeconds": d["spec"].get("minReadySeconds", 0), "selector": selector,
                     "template": template}}
        count = self._new_rs_replicas(d, [*olds, new], new)
        new["spec"]["replicas"] = count
        du.set_new_rs_annotations(d, new["metadata"]["annotations"], new_revision, exists=False)
        try:
            created = _own(await self.client.create("replicasets", new, namespace=meta(d)["namespace"]))
        except AlreadyExists:
            return await self._on_name_taken(d, name)
        except APIError as err:
            if any(c.get("type") == "NamespaceTerminating" for c in err.causes):
                raise
            message = f'Failed to create new replica set "{name}": {err.message}'
            if du.has_progress_deadline(d):
                du.set_condition(status, du.new_condition("Progressing", "False", du.FAILED_RS_CREATE, message,
                                                          self.clock.wall()))
                await self._update_status(d)
            self.recorder.event(d, "Warning", du.FAILED_RS_CREATE, message)
            raise
        if count > 0:
            self.recorder.event(d, "Normal", "ScalingReplicaSet",
                                f"Scaled up replica set {name} from 0 to {count}")
        await self._set_revision(d, new_revision)
        if du.has_progress_deadline(d):
            du.set_condition(d.setdefault("status", {}), du.new_condition(
                "Progressing", "True", du.NEW_RS_CREATED, f'Created new replica set "{name}"', self.clock.wall()))
            await self._update_status(d)
        return created

    async def _on_name_taken(self, d: dict[str, Any], name: str) -> dict[str, Any]:
        """Ours already (a stale cache): use it. Another template: a hash collision, bump collisionCount."""
        existing = _own(await self.client.get("replicasets", name, namespace=meta(d)["namespace"]))
        ref = controller_of(existing)
        if ref is not None and ref.get("uid") == meta(d)["uid"] and du.equal_ignore_hash(
                d["spec"]["template"], existing["spec"]["template"]):
            await self._set_revision(d, du.annotations_of(existing).get(du.REVISION, ""))
            return existing
        status = d.setdefault("status", {})
        status["collisionCount"] = (status.get("collisionCount") or 0) + 1
        await self._update_status(d)
        log.info("deployment %s/%s: hash collision on %s, collisionCount now %d", meta(d)["namespace"],
                 meta(d)["name"], name, status["collisionCount"])
        raise RuntimeError(f'replicasets.apps "{name}" already exists (hash collision; collisionCount bumped)')

    def _new_rs_replicas(self, d: Obj, all_rss: list[dict[str, Any]], new: Obj) -> int:
        """``NewRSNewReplicas``: as many as maxSurge allows (RollingUpdate), all of them (Recreate)."""
        if not du.is_rolling(d):
            return du.replicas(d)
        max_total = du.replicas(d) + du.max_surge(d)
        current = du.spec_total(all_rss)
        if current >= max_total:
            return du.replicas(new)
        return du.replicas(new) + min(max_total - current, du.replicas(d) - du.replicas(new))

    # -- writes ------------------------------------------------------------------------------------------------

    async def _set_revision(self, d: dict[str, Any], revision: str) -> None:
        """``SetDeploymentRevision``: the Deployment's revision annotation follows its new ReplicaSet's."""
        if du.annotations_of(d).get(du.REVISION) == revision:
            return
        namespace, name = _ns_name(d)
        patched = await self.client.patch("deployments", name, {"metadata": {
            "annotations": {du.REVISION: revision}, "resourceVersion": meta(d)["resourceVersion"]}},
            namespace=namespace)
        d["metadata"]["annotations"] = dict(meta(patched).get("annotations") or {})
        d["metadata"]["resourceVersion"] = meta(patched)["resourceVersion"]

    async def _update_status(self, d: dict[str, Any]) -> None:
        d["status"] = _pruned_status(d.get("status") or {})
        updated = _own(await self.client.replace_status("deployments", d))
        d["metadata"]["resourceVersion"] = meta(updated)["resourceVersion"]

    async def _replace_rs(self, rs: dict[str, Any]) -> None:
        updated = _own(await self.client.replace("replicasets", rs))
        rs.clear()
        rs.update(updated)

    async def _scale_rs(self, d: Obj, rs: dict[str, Any], size: int, operation: str | None = None) -> bool:
        """``scaleReplicaSet``: the size and the replicas annotations; an event when the size changed."""
        old = du.replicas(rs)
        maximum = du.replicas(d) + du.max_surge(d)
        if old == size and not du.replicas_annotations_need_update(rs, du.replicas(d), maximum):
            return False
        operation = operation or ("up" if old < size else "down")
        rs["spec"]["replicas"] = size
        du.set_replicas_annotations(rs["metadata"].setdefault("annotations", {}), du.replicas(d), maximum)
        await self._replace_rs(rs)
        if old == size:
            return False
        self.recorder.event(d, "Normal", "ScalingReplicaSet",
                            f"Scaled {operation} replica set {meta(rs)['name']} from {old} to {size}")
        return True

    async def _scale_to(self, d: Obj, rs: dict[str, Any], size: int) -> bool:
        """``scaleReplicaSetAndRecordEvent``: nothing when already that size."""
        if du.replicas(rs) == size:
            return False
        return await self._scale_rs(d, rs, size)

    # -- scaling (replicas changed, paused) --------------------------------------------------------------------

    async def _scale(self, d: dict[str, Any], new: dict[str, Any] | None, olds: list[dict[str, Any]]) -> None:
        target = du.find_active_or_latest(new, olds)
        if target is not None:
            if du.replicas(target) != du.replicas(d):
                await self._scale_to(d, target, du.replicas(d))
            return
        if du.is_saturated(d, new):
            for rs in du.active(olds):
                await self._scale_to(d, rs, 0)
            return
        if du.is_rolling(d):
            await self._scale_proportionally(d, new, olds)

    async def _scale_proportionally(self, d: Obj, new: dict[str, Any] | None, olds: list[dict[str, Any]]) -> None:
        live: list[dict[str, Any]] = du.active([*olds, new])
        allowed = du.replicas(d) + du.max_surge(d) if du.replicas(d) > 0 else 0
        to_add = allowed - du.spec_total(live)
        sizes = {meta(rs)["name"]: du.replicas(rs) for rs in live}
        operation = ""
        if to_add > 0:
            live = du.by_size(live, sizes, newer_first=True)
            operation = "up"
        elif to_add < 0:
            live = du.by_size(live, sizes, newer_first=False)
            operation = "down"
        added = 0
        if to_add != 0:
            for rs in live:
                share = du.proportion(d, rs, du.replicas(rs), to_add, added)
                sizes[meta(rs)["name"]] = du.replicas(rs) + share
                added += share
            first = meta(live[0])["name"]
            sizes[first] = max(sizes[first] + to_add - added, 0)
        for rs in live:
            await self._scale_rs(d, rs, sizes[meta(rs)["name"]], operation or None)

    # -- RollingUpdate ---------------------------------------------------------------------------------------------

    async def _rollout_rolling(self, d: dict[str, Any], rss: list[dict[str, Any]]) -> Result:
        new, olds = await self._new_and_old(d, rss, create=True)
        assert new is not None
        all_rss = [*olds, new]
        if await self._reconcile_new(d, all_rss, new):
            return await self._sync_rollout_status(d, all_rss, new)
        if await self._reconcile_olds(d, all_rss, du.active(olds), new):
            return await self._sync_rollout_status(d, all_rss, new)
        if du.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, olds)
        return await self._sync_rollout_status(d, all_rss, new)

    async def _reconcile_new(self, d: Obj, all_rss: list[dict[str, Any]], new: dict[str, Any]) -> bool:
        if du.replicas(new) == du.replicas(d):
            return False
        if du.replicas(new) > du.replicas(d):
            return await self._scale_to(d, new, du.replicas(d))
        return await self._scale_to(d, new, self._new_rs_replicas(d, all_rss, new))

    async def _reconcile_olds(self, d: Obj, all_rss: list[dict[str, Any]], olds: list[dict[str, Any]],
                              new: dict[str, Any]) -> bool:
        if du.spec_total(olds) == 0:
            return False
        min_available = du.replicas(d) - du.max_unavailable(d)
        new_unavailable = du.replicas(new) - du.status_of(new, "availableReplicas")
        max_scaled_down = du.spec_total(all_rss) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        cleaned = await self._cleanup_unhealthy(d, olds, max_scaled_down)
        scaled = await self._scale_down_olds(d, [*olds, new], olds)
        return cleaned + scaled > 0

    async def _cleanup_unhealthy(self, d: Obj, olds: list[dict[str, Any]], max_cleanup: int) -> int:
        """Scale old ReplicaSets down by their unavailable replicas first, oldest first."""
        total = 0
        for rs in du.by_creation(olds):
            if total >= max_cleanup:
                break
            unhealthy = du.replicas(rs) - du.status_of(rs, "availableReplicas")
            if du.replicas(rs) == 0 or unhealthy <= 0:
                continue
            count = min(max_cleanup - total, unhealthy)
            await self._scale_to(d, rs, du.replicas(rs) - count)
            total += count
        return total

    async def _scale_down_olds(self, d: Obj, all_rss: list[dict[str, Any]], olds: list[dict[str, Any]]) -> int:
        """Scale old ReplicaSets down, oldest first, as far as the available pods above the minimum allow."""
        min_available = du.replicas(d) - du.max_unavailable(d)
        available = du.status_total(all_rss, "availableReplicas")
        if available <= min_available:
            return 0
        budget, total = available - min_available, 0
        for rs in du.by_creation(olds):
            if total >= budget:
                break
            if du.replicas(rs) == 0:
                continue
            count = min(du.replicas(rs), budget - total)
            await self._scale_to(d, rs, du.replicas(rs) - count)
            total += count
        return total

    # -- Recreate ----------------------------------------------------------------------------------------------------

    async def _rollout_recreate(self, d: dict[str, Any], rss: list[dict[str, Any]]) -> Result:
        new, olds = await self._new_and_old(d, rss, create=False)
        all_rss = [*olds, new]
        scaled = False
        for rs in du.active(olds):
            scaled = await self._scale_to(d, rs, 0) or scaled
        if scaled or self._old_pods_running(new, olds, self._pods_by_rs(d, rss)):
            return await self._sync_rollout_status(d, all_rss, new)
        if new is None:
            new, olds = await self._new_and_old(d, rss, create=True)
            all_rss = [*olds, new]
        assert new is not None
        await self._scale_to(d, new, du.replicas(d))
        if du.deployment_complete(d, d.get("status") or {}):
            await self._cleanup(d, olds)
        return await self._sync_rollout_status(d, all_rss, new)

    @staticmethod
    def _old_pods_running(new: Obj | None, olds: list[dict[str, Any]], pods: Mapping[str, list[Obj]]) -> bool:
        if du.status_total(olds, "replicas") > 0:
            return True
        new_uid = meta(new)["uid"] if new is not None else None
        return any(uid != new_uid and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")
                   for uid, rs_pods in pods.items() for p in rs_pods)

    # -- cleanup and status -------------------------------------------------------------------------------------

    async def _cleanup(self, d: Obj, olds: list[dict[str, Any]]) -> None:
        """``cleanupDeployment``: delete old, empty ReplicaSets beyond revisionHistoryLimit, oldest revision first."""
        if not du.has_revision_history_limit(d):
            return
        alive = [rs for rs in olds if not meta(rs).get("deletionTimestamp")]
        excess = len(alive) - d["spec"]["revisionHistoryLimit"]
        for rs in du.by_revision(alive)[:max(excess, 0)]:
            if du.status_of(rs, "replicas") or du.replicas(rs) or \
                    meta(rs).get("generation", 0) > du.status_of(rs, "observedGeneration"):
                continue
            try:
                await self.client.delete("replicasets", meta(rs)["name"], namespace=meta(rs)["namespace"])
            except NotFound:
                continue

    def _calculate_status(self, d: Obj, all_rss: Sequence[dict[str, Any] | None], new: Obj | None) -> dict[str, Any]:
        available = du.status_total(all_rss, "availableReplicas")
        status: dict[str, Any] = {
            "observedGeneration": meta(d).get("generation"),
            "replicas": du.status_total(all_rss, "replicas"),
            "updatedReplicas": du.status_total([new], "replicas"),
            "readyReplicas": du.status_total(all_rss, "readyReplicas"),
            "availableReplicas": available,
            "unavailableReplicas": max(du.spec_total(all_rss) - available, 0),
            "collisionCount": (d.get("status") or {}).get("collisionCount"),
            "conditions": [dict(c) for c in (d.get("status") or {}).get("conditions") or ()],
        }
        now = self.clock.wall()
        if available >= du.replicas(d) - du.max_unavailable(d):
            du.set_condition(status, du.new_condition("Available", "True", du.MIN_AVAILABLE,
                                                      "Deployment has minimum availability.", now))
        else:
            du.set_condition(status, du.new_condition("Available", "False", du.MIN_UNAVAILABLE,
                                                      "Deployment does not have minimum availability.", now))
        return status

    async def _sync_status(self, d: dict[str, Any], new: dict[str, Any] | None, olds: list[dict[str, Any]]) -> None:
        """``syncDeploymentStatus`` (scaling, paused, being deleted): counts and Available only."""
        await self._write_if_changed(d, self._calculate_status(d, [*olds, new], new))

    async def _write_if_changed(self, d: dict[str, Any], status: dict[str, Any]) -> bool:
        if _pruned_status(status) == _pruned_status(d.get("status") or {}):
            return False
        d["status"] = status
        await self._update_status(d)
        return True

    async def _sync_rollout_status(self, d: dict[str, Any], all_rss: Sequence[dict[str, Any] | None],
                                   new: Obj | None) -> Result:
        """``syncRolloutStatus``: counts, Available, Progressing (and its deadline), ReplicaFailure."""
        status = self._calculate_status(d, all_rss, new)
        now = self.clock.wall()
        if not du.has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = find_condition(d.get("status") or {}, "Progressing")
        complete = status["replicas"] == status["updatedReplicas"] and current is not None \
            and current.get("reason") == du.NEW_RS_AVAILABLE
        if du.has_progress_deadline(d) and not complete:
            self._progress(d, status, current, new, now)
        failures = self._replica_failures(all_rss, new)
        if failures:
            du.set_condition(status, failures[0])
        else:
            remove_condition(status, "ReplicaFailure")
        if not await self._write_if_changed(d, status):
            return self._requeue_stuck(d, status, now)
        return Result()

    @staticmethod
    def _progress(d: Obj, status: dict[str, Any], current: Mapping[str, Any] | None, new: Obj | None,
                  now: float) -> None:
        name = meta(new)["name"] if new is not None else None
        if du.deployment_complete(d, status):
            message = f'ReplicaSet "{name}" has successfully progressed.' if name \
                else "Deployment has successfully progressed."
            du.set_condition(status, du.new_condition("Progressing", "True", du.NEW_RS_AVAILABLE, message, now))
        elif du.deployment_progressing(d, status):
            message = f'ReplicaSet "{name}" is progressing.' if name else "Deployment is progressing."
            cond = du.new_condition("Progressing", "True", du.RS_UPDATED, message, now)
            if current is not None:
                if current.get("status") == "True":
                    cond["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, "Progressing")
            du.set_condition(status, cond)
        elif du.deployment_timed_out(d, status, now):
            message = f'ReplicaSet "{name}" has timed out progressing.' if name \
                else f'Deployment "{meta(d)["name"]}" has timed out progressing.'
            du.set_condition(status, du.new_condition("Progressing", "False", du.TIMED_OUT, message, now))

    @staticmethod
    def _replica_failures(all_rss: Sequence[dict[str, Any] | None], new: Obj | None) -> list[dict[str, Any]]:
        """ReplicaFailure conditions of the new ReplicaSet, else of the old ones, as Deployment conditions."""
        ordered = [new] if new is not None else []
        ordered += [rs for rs in all_rss if rs is not None and rs is not new]
        for rs in ordered:
            found = [{"type": "ReplicaFailure", "status": c.get("status"), "reason": c.get("reason"),
                      "message": c.get("message"), "lastUpdateTime": c.get("lastTransitionTime"),
                      "lastTransitionTime": c.get("lastTransitionTime")}
                     for c in (rs.get("status") or {}).get("conditions") or () if c.get("type") == "ReplicaFailure"]
            if found:
                return found
        return []

    def _requeue_stuck(self, d: Obj, status: Mapping[str, Any], now: float) -> Result:
        """Look again when the progress deadline passes (``requeueStuckDeployment``)."""
        current = find_condition(d.get("status") or {}, "Progressing")
        if not du.has_progress_deadline(d) or current is None:
            return Result()
        if du.deployment_complete(d, status) or current.get("reason") == du.TIMED_OUT:
            return Result()
        since = parse_time(current.get("lastUpdateTime")) or now
        after = since + d["spec"]["progressDeadlineSeconds"] - now
        if after < 1:
            return Result(requeue=True)
        return Result(requeue_after=after + 1)


def setup(ctx: ControllerContext) -> None:
    """Register the deployment controller: Deployments, their ReplicaSets, and deleted pods (Recreate)."""
    controller = DeploymentController(ctx)
    ctx.manager.controller(controller, name="deployment").for_("deployments") \
        .watches("replicasets", mapper=controller.replicaset_owners) \
        .watches("pods", mapper=controller.pod_owner, accepts=maps_any(controller.pod_owner), events=("delete",)) \
        .workers(ctx.options.workers)
