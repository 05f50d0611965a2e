"""kube-controller-manager's ``resourcequota`` controller: each ResourceQuota's ``status`` counts what its
namespace uses (``pkg/controller/resourcequota``).

Rules carried over (the costs themselves are :mod:`kinformer.quota`'s, shared with the server's admission):

* ``status.hard`` is a copy of ``spec.hard``; ``status.used`` holds, for every hard name, the sum of what the
  namespace's objects matching the quota's scopes cost (zero when none); a used name the quota no longer limits
  is dropped, one no evaluator knows keeps its last value. The status is written (an update guarded by the
  resourceVersion, so a charge made by admission meanwhile is never overwritten) only when it changed.
* Recount triggers (kube's replenishment): a quota's create or spec change; the create or delete of an object
  it may count; an update that changes what a pod, service or claim costs (a pod finishing, a service changing
  type); and every quota again each ``ClusterOptions.resource_quota_sync_period``.
* ``count/<resource>.<group>`` of any resource is counted from a shared informer of that resource, started the
  first time a quota names it; pods, services, claims, configmaps, secrets, replication controllers, quotas and
  the apps and batch workloads are watched from the start.

Not carried over: kube's discovery-driven quota monitors for every resource (other resources are recounted on
the sync period only), and the priority between "missing usage" and ordinary queues. As in kube, a recount
racing an admitted create not yet stored may undercount it until the next recount.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from kinformer import quota
from kinformer.controller import ObjectReconciler, Request, maps_any
from kinformer.controller.predicates import Predicate
from kinformer.quantity import Quantity

from ..cluster import ControllerContext

__all__ = ["QuotaReconciler", "setup"]

#: (resource spec, plural, group) of everything watched for recounts from the start; each spec is spelled as
#: the other controllers spell it, so they all share one informer (one watch, one decode) per resource.
WATCHED = (("pods", "pods", ""), ("services", "services", ""),
           ("persistentvolumeclaims", "persistentvolumeclaims", ""), ("configmaps", "configmaps", ""),
           ("secrets", "secrets", ""), ("replicationcontrollers", "replicationcontrollers", ""),
           ("resourcequotas", "resourcequotas", ""), ("replicasets", "replicasets", "apps"),
           ("deployments", "deployments", "apps"), ("statefulsets", "statefulsets", "apps"),
           ("daemonsets", "daemonsets", "apps"), ("jobs", "jobs", "batch"),
           ("cronjobs", "cronjobs", "batch"))


def _now(ctx_clock: Any) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ctx_clock.wall(), datetime.UTC)


class CostChanged(Predicate):
    """Creates and deletes pass; an update passes when the object's cost or a pod's scope may have changed,
    and only in a namespace with a quota (``has_quota(namespace)``; elsewhere nothing would be recounted, so
    the cost is not computed, as kube's replenishment returns early when the namespace has no quota)."""

    def __init__(self, plural: str, group: str, clock: Any, has_quota: Callable[[str], bool]) -> None:
        self.plural, self.group, self.clock, self.has_quota = plural, group, clock, has_quota

    def update(self, old: Mapping[str, Any], new: Mapping[str, Any], is_resync: bool = False) -> bool:
        if is_resync:
            return False  # the quotas' own sync period recounts
        if not self.has_quota((new.get("metadata") or {}).get("namespace") or ""):
            return False
        now = _now(self.clock)
        if quota.usage(self.plural, self.group, old, now) != quota.usage(self.plural, self.group, new, now):
            return True
        if self.plural == "pods" and not self.group:
            return (old.get("spec") or {}).get("activeDeadlineSeconds") != \
                (new.get("spec") or {}).get("activeDeadlineSeconds")
        return False


def _spec_of(name: str) -> tuple[str, str, str] | None:
    """(resource spec, plural, group) counted by ``count/<resource>[.<group>]``; None for other names."""
    if not name.startswith("count/"):
        return None
    plural, _, group = name[len("count/"):].partition(".")
    return (f"{plural}.{group}" if group else plural), plural, group


def _equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return a.keys() == b.keys() and all(a[k].amount == b[k].amount for k in a)


class QuotaReconciler(ObjectReconciler):
    """Recounts one ResourceQuota's usage and writes its status when it changed."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    async def reconcile(self, rq: Mapping[str, Any]) -> None:
        if rq["metadata"].get("deletionTimestamp"):
            return
        hard = quota.parse_list((rq.get("spec") or {}).get("hard"))
        status = rq.get("status") or {}
        old_used = quota.parse_list(status.get("used"))
        used = {**old_used, **await self._usage(rq, hard)}
        used = {k: v for k, v in used.items() if k in hard}
        if _equal(hard, quota.parse_list(status.get("hard"))) and _equal(used, old_used):
            return
        body = {**rq, "status": {"hard": quota.dump_list(hard), "used": quota.dump_list(used)}}
        await self.client.replace_status("resourcequotas", body, namespace=rq["metadata"]["namespace"])

    def _kinds(self, hard: Mapping[str, Quantity]) -> list[tuple[str, str, str]]:
        kinds = {(p, g): spec for spec, p, g in WATCHED}
        for name in hard:
            if (counted := _spec_of(name)) is not None:
                kinds.setdefault((counted[1], counted[2]), counted[0])
        return [(spec, p, g) for (p, g), spec in kinds.items()]

    async def _usage(self, rq: Mapping[str, Any], hard: Mapping[str, Quantity]) -> quota.ResourceList:
        """What the namespace's objects matching ``rq``'s scopes cost, for every hard name an evaluator knows."""
        namespace = rq["metadata"]["namespace"]
        now = _now(self.ctx.clock)
        total: quota.ResourceList = {}
        for spec, plural, group in self._kinds(hard):
            names = quota.matching_resources(plural, group, hard)
            if not names:
                continue
            try:
                objects = (await self.client.list(spec, namespace=namespace)).items
            except LookupError:  # a count/ of a resource the server does not serve: no usage, as in kube
                continue
            total.update({n: quota.ZERO for n in names})
            for obj in objects:
                if quota.all_scopes_match(rq, plural, group, obj):
                    cost = quota.usage(plural, group, obj, now)
                    total = quota.add(total, {n: cost[n] for n in names if n in cost})
        return total


def setup(ctx: ControllerContext) -> None:
    """Register the resourcequota controller on the shared Manager."""
    mgr = ctx.manager
    quotas = mgr.informer("resourcequotas")

    def quotas_of(obj: Mapping[str, Any]) -> list[Request]:
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return [Request.for_object(q) for q in quotas.lister().list(namespace=namespace)]

    def has_quota(namespace: str) -> bool:
        return bool(quotas.lister().list(namespace=namespace))

    builder = mgr.controller(QuotaReconciler(ctx), "resourcequota").for_("resourcequotas") \
        .every(ctx.options.resource_quota_sync_period).workers(ctx.options.workers)
    for spec, plural, group in WATCHED:  # quotas too: a quota's create or delete is counted by the others
        builder.watches(spec, CostChanged(plural, group, ctx.clock, has_quota), mapper=quotas_of,
                        accepts=maps_any(quotas_of))
