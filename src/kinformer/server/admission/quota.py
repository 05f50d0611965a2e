"""The ResourceQuota admission plugin: a write that would take a namespace past a quota is refused.

kube-apiserver runs it last among the validating plugins; so does this server. Invariants (kube 1.32's
``apiserver/pkg/admission/plugin/resourcequota``, with the costs of :mod:`kinformer.quota`):

* A quota covers a write when its ``status.hard`` limits something the object costs and its scopes match the
  object. A quota whose ``status.used`` lacks one of those names is "status unknown" (403) until the
  resourcequota controller has counted it; a quota with no ``status.hard`` yet covers nothing.
* The charge is the object's cost (on update, the increase over the old object's), restricted to each
  quota's hard names; when ``used + charge`` passes ``hard`` the write is refused with 403 and kube's text:
  ``pods "web" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2``; a pod
  not naming a tracked cpu or memory request or limit: ``failed quota: q: must specify limits.cpu for: web``.
* Every covering quota is checked before any is charged (a refusal seen on the watch cache's copy is judged
  again on the stored quota); each charge is a compare-and-swap on the quota's
  resourceVersion (the store's guaranteed update), judged again on the quota's newest state after a lost
  swap, so concurrent creates never take ``used`` past ``hard``. A dry run is checked but not charged.
* Nothing is given back here: deletions, and writes that failed after admission, are set right by the
  controller's recount.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ... import quota
from ...clock import Clock
from ...quantity import Quantity
from ..machinery import status as st
from ..registry.objects import ObjectStore
from ..registry.resources import Registry, ResourceInfo
from ..storage.watchcache import WatchCache

__all__ = ["QuotaAdmission"]

QUOTAS = ("", "v1", "resourcequotas")
#: Resources kube's quota admission never counts.
IGNORED = frozenset({("", "events"), ("events.k8s.io", "events")})


class QuotaAdmission:
    """Checks and charges the namespace's ResourceQuotas for each admitted write (see the module invariants)."""

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, clock: Clock) -> None:
        self.cache, self.store, self.registry, self.clock = cache, store, registry, clock

    def _quotas(self, info: ResourceInfo, namespace: str) -> list[Mapping[str, Any]]:
        bucket = self.cache.buckets.get(info.storage_prefix)
        return [co.obj for co in bucket.snapshot(namespace)] if bucket is not None else []

    def covers(self, info: ResourceInfo, namespace: str, old: Mapping[str, Any] | None) -> bool:
        """Whether a write (``old``: None on create) of ``info`` in ``namespace`` may be charged: a resource the
        quotas count, in a namespace, with quotas in the cache. False spares the write :meth:`admit` (nearly
        every write)."""
        if not namespace or (info.group, info.plural) in IGNORED or \
                not quota.handles(info.plural, info.group, "CREATE" if old is None else "UPDATE"):
            return False
        quota_info = self.registry.get(*QUOTAS)
        bucket = self.cache.buckets.get(quota_info.storage_prefix) if quota_info is not None else None
        return bucket is not None and bool(bucket.objects)

    async def admit(self, info: ResourceInfo, namespace: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                    *, dry_run: bool, subresource: str = "") -> None:
        """Refuse (403) or charge the write of ``obj`` (replacing ``old``, None on create) in ``namespace``."""
        if not self.covers(info, namespace, old):
            return
        quota_info = self.registry.get(*QUOTAS)
        cached = self._quotas(quota_info, namespace) if quota_info is not None else []
        if quota_info is None or not cached:
            return
        charge = _Charge(info, obj, old, self._now(), subresource)
        charged = [name for q in cached if (name := await self._judge(quota_info, charge, q))]
        if dry_run:
            return
        for name in charged:
            try:
                await self.store.guaranteed_update(quota_info, namespace, name, charge.apply)
            except st.StatusError as e:
                if e.code != 404:  # a quota deleted meanwhile limits nothing
                    raise

    async def _judge(self, quota_info: ResourceInfo, charge: _Charge, cached: Mapping[str, Any]) -> str | None:
        """The name of ``cached`` when it takes a charge; a refusal judged on the cached copy is judged again
        on the quota as stored (the watch cache may lag a recount that freed room)."""
        try:
            return cached["metadata"]["name"] if charge.against(cached) else None
        except st.StatusError:
            meta = cached["metadata"]
            try:
                stored, _ = await self.store.read(quota_info, meta["namespace"], meta["name"])
            except st.StatusError as e:
                if e.code == 404:
                    return None
                raise
            return meta["name"] if charge.against(stored) else None

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.clock.wall(), datetime.UTC)


class _Charge:
    """What one write costs each quota: :meth:`against` judges (raising the refusal), :meth:`apply` charges."""

    def __init__(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                 now: datetime.datetime, subresource: str) -> None:
        self.info, self.obj, self.old, self.subresource = info, obj, old, subresource
        self.cost = quota.usage(info.plural, info.group, obj, now)
        self.old_cost = quota.usage(info.plural, info.group, old, now) if old is not None else None
        meta = obj.get("metadata") or {}
        self.name = meta.get("name") or meta.get("generateName") or "Unknown"

    def _forbidden(self, why: str) -> st.StatusError:
        resource = f"{self.info.plural}.{self.info.group}" if self.info.group else self.info.plural
        return st.StatusError(403, "Forbidden", f'{resource} "{self.name}" is forbidden: {why}',
                              details={"name": self.name, "group": self.info.group, "kind": self.info.plural})

    def against(self, q: Mapping[str, Any]) -> dict[str, Quantity]:
        """The charge ``q`` takes (empty: none); raises the refusal when ``q`` forbids the write."""
        plural, group = self.info.plural, self.info.group
        if not quota.matches(q, plural, group, self.obj):
            return {}
        name = q["metadata"]["name"]
        status = q.get("status") or {}
        hard, used = quota.parse_list(status.get("hard")), quota.parse_list(status.get("used"))
        tracked = quota.matching_resources(plural, group, hard)
        if (error := quota.constraints_error(plural, group, tracked, self.obj)) is not None:
            raise self._forbidden(f"failed quota: {name}: {error}")
        if any(r not in used for r in tracked):
            raise self._forbidden(f"status unknown for quota: {name}, resources: {','.join(tracked)}")
        if negative := sorted(k for k, v in self.cost.items() if v.amount < 0):
            raise self._forbidden(f"quota usage is negative for resource(s): {','.join(negative)}")
        delta = self._delta(q)
        requested = {k: v for k, v in delta.items() if k in hard and v.amount != 0}
        if requested and self.subresource != "status":
            exceeded = sorted(k for k, v in requested.items() if (used.get(k, quota.ZERO) + v).amount > hard[k].amount)
            if exceeded:
                raise self._forbidden(
                    f"exceeded quota: {name}, requested: {quota.pretty({k: requested[k] for k in exceeded})}, "
                    f"used: {quota.pretty({k: used[k] for k in exceeded if k in used})}, "
                    f"limited: {quota.pretty({k: hard[k] for k in exceeded})}")
        return requested

    def _delta(self, q: Mapping[str, Any]) -> dict[str, Quantity]:
        if self.old is None or self.old_cost is None or \
                not quota.matches(q, self.info.plural, self.info.group, self.old):
            return dict(self.cost)
        return {k: v - self.old_cost[k] if k in self.old_cost and v.amount > self.old_cost[k].amount else
                (v if k not in self.old_cost else quota.ZERO) for k, v in self.cost.items()}

    def apply(self, current: dict[str, Any] | None) -> dict[str, Any] | None:
        """The store's update function: charge ``current`` (the quota's newest state), judged again."""
        if current is None:
            return None
        requested = self.against(current)
        if not requested:
            return None
        status = current.setdefault("status", {})
        status["used"] = quota.dump_list(quota.add(quota.parse_list(status.get("used")), requested))
        return current
