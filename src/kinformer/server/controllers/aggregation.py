"""The ClusterRole aggregation controller: a ClusterRole with an ``aggregationRule`` gets the rules of the others.

Invariants (kube's ``pkg/controller/clusterroleaggregation``):

* The rules of an aggregated ClusterRole are, in order, the rules of every other ClusterRole matched by one
  of its ``clusterRoleSelectors`` (selectors in order, matched roles by name), each rule once.
* The controller follows the watch cache: any ClusterRole change (or a cache reload) triggers a pass over
  every aggregated role; a role already holding its aggregate is not written. Writes go through the normal
  update path (with retries), so several replicas doing the same pass converge on the same object.
* A failed pass is logged and retried after ``retry`` seconds; the loop ends only by cancellation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...selectors import SelectorError, label_selector_from_dict
from ..auth.rbac import GROUP, PREFIXES
from ..machinery import status as st
from ..registry.objects import ObjectStore
from ..registry.resources import Registry
from ..storage.watchcache import WatchCache
from .cachecontroller import CacheController

__all__ = ["ClusterRoleAggregator", "aggregate_rules"]


def aggregate_rules(role: Mapping[str, Any], roles: Mapping[str, Mapping[str, Any]]) -> list[Any] | None:
    """The rules ``role`` aggregates from ``roles`` (name -> ClusterRole); None when it has no aggregationRule."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, Mapping):
        return None
    own = (role.get("metadata") or {}).get("name")
    out: list[Any] = []
    for selector in rule.get("clusterRoleSelectors") or ():
        try:
            sel = label_selector_from_dict(selector if isinstance(selector, Mapping) else None)
        except (SelectorError, ValueError, TypeError):
            continue
        for name in sorted(roles):
            other = roles[name]
            if name == own or not sel.matches((other.get("metadata") or {}).get("labels") or {}):
                continue
            for r in other.get("rules") or ():
                if r not in out:
                    out.append(r)
    return out


class ClusterRoleAggregator(CacheController):
    """Keeps every aggregated ClusterRole's rules equal to its aggregate (see the module invariants)."""

    what = "ClusterRole aggregation"

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, *, retry: float = 1.0) -> None:
        super().__init__(cache, store, PREFIXES["ClusterRole"], retry=retry)
        self.registry = registry

    def _roles(self) -> dict[str, Mapping[str, Any]]:
        bucket = self.cache.buckets.get(self._prefix)
        return {co.name: co.obj for co in bucket.objects.values()} if bucket is not None else {}

    async def sync(self) -> int:
        """One pass: write every aggregated role whose rules differ from its aggregate; returns how many."""
        info = self.registry.get(GROUP, "v1", "clusterroles")
        if info is None:
            return 0
        roles = self._roles()
        written = 0
        for name, role in roles.items():
            want = aggregate_rules(role, roles)
            if want is None or want == (role.get("rules") or []):
                continue

            def update(current: dict[str, Any], want: list[Any] = want) -> dict[str, Any] | None:
                if (current.get("rules") or []) == want:
                    return None
                current["rules"] = want
                return current

            try:
                await self.store.mutate(info, "", name, update)
            except st.StatusError as e:
                if e.code != 404:  # deleted meanwhile: its DELETED event triggers another pass
                    raise
                continue
            written += 1
        return written
