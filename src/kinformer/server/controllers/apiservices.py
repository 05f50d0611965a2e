"""The APIServices of the served group versions, kept as kube-apiserver's aggregator keeps them.

Invariants (kube's autoregister, crdregistration and APIService availability controllers):

* Every built-in group version kube registers (``BUILTIN_PRIORITIES``, kube 1.32's table) that this server
  serves has an APIService ``<version>.<group>`` (``v1.`` for the core group) with kube's
  ``groupPriorityMinimum`` and ``versionPriority``, labelled ``kube-aggregator.kubernetes.io/automanaged:
  onstart``; every group version a CRD serves (and no built-in does) has one with priorities 1000 / 100,
  labelled ``"true"``. Their specs are put back when changed and they are re-created when deleted.
* An automanaged APIService whose group version is no longer served (its CRD or CRD version went) is
  deleted. An APIService without the label is the user's: never written, except its status below.
* Every APIService without ``spec.service`` is served by this server and reports ``Available`` True with
  reason ``Local``. One with a Service is left as it is: the embedded server proxies no aggregated API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..machinery import status as st
from ..registry.objects import ObjectStore, timestamp
from ..registry.resources import Registry, ResourceInfo
from ..storage.watchcache import WatchCache
from .cachecontroller import CacheController, create_as
from .garbagecollector import CRD_PREFIX

__all__ = ["BUILTIN_PRIORITIES", "APIServiceRegistration", "desired_apiservices"]

GROUP = "apiregistration.k8s.io"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
CRD_PRIORITY = (1000, 100)
MANAGER = "kube-apiserver"

# (group, version) -> (groupPriorityMinimum, versionPriority), from kube-apiserver's aggregator (1.32)
BUILTIN_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
}


def apiservice_name(group: str, version: str) -> str:
    return f"{version}.{group}"


def desired_apiservices(resources: list[ResourceInfo]) -> dict[str, dict[str, Any]]:
    """Name -> the automanaged APIService (metadata and spec) for the served ``resources``."""
    builtin: set[tuple[str, str]] = set()
    custom: set[tuple[str, str]] = set()
    for info in resources:
        (custom if info.crd_name else builtin).add((info.group, info.version))
    out: dict[str, dict[str, Any]] = {}
    for group, version in sorted(builtin & BUILTIN_PRIORITIES.keys()):
        out[apiservice_name(group, version)] = _apiservice(group, version, BUILTIN_PRIORITIES[(group, version)],
                                                           "onstart")
    for group, version in sorted(custom - builtin):
        out[apiservice_name(group, version)] = _apiservice(group, version, CRD_PRIORITY, "true")
    return out


def _apiservice(group: str, version: str, priority: tuple[int, int], managed: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"group": group} if group else {}
    spec |= {"version": version, "groupPriorityMinimum": priority[0], "versionPriority": priority[1]}
    return {"metadata": {"name": apiservice_name(group, version), "labels": {AUTOMANAGED: managed}}, "spec": spec}


def _available(obj: Mapping[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    return any(isinstance(c, Mapping) and c.get("type") == "Available" and c.get("status") == "True"
               and c.get("reason") == "Local" for c in conditions)


class APIServiceRegistration(CacheController):
    """Keeps the APIServices of the module invariants; a pass runs on any APIService or CRD change."""

    what = "APIService registration"

    def __init__(self, cache: WatchCache, store: ObjectStore, registry: Registry, *, retry: float = 1.0) -> None:
        info = registry.get(GROUP, "v1", "apiservices")
        assert info is not None
        super().__init__(cache, store, info.storage_prefix, also=(CRD_PREFIX,), retry=retry)
        self.info = info
        self.registry = registry

    def _current(self) -> dict[str, Mapping[str, Any]]:
        bucket = self.cache.buckets.get(self._prefix)
        return {co.name: co.obj for co in bucket.objects.values()} if bucket is not None else {}

    async def sync(self) -> int:
        """One pass: create, restore or delete the automanaged APIServices, then mark the local ones available."""
        desired = desired_apiservices(self.registry.resources())
        current = self._current()
        written = 0
        for name, want in desired.items():
            have = current.get(name)
            if have is None:
                written += await self._create(want)
            elif (have.get("metadata") or {}).get("labels", {}).get(AUTOMANAGED) and have.get("spec") != want["spec"]:
                written += await self._restore_spec(name, want["spec"])
        for name, have in current.items():
            if name not in desired and ((have.get("metadata") or {}).get("labels") or {}).get(AUTOMANAGED):
                written += await self._delete(name)
        for name, have in self._current().items():
            if not (have.get("spec") or {}).get("service") and not _available(have):
                written += await self._mark_available(name)
        return written

    async def _create(self, obj: dict[str, Any]) -> int:
        return 0 if await create_as(self.store, self.info, "", obj, MANAGER) is None else 1

    async def _restore_spec(self, name: str, spec: dict[str, Any]) -> int:
        """Put an automanaged APIService's spec back (an ordinary update)."""
        def update(current: dict[str, Any]) -> dict[str, Any] | None:
            if current.get("spec") == spec:
                return None
            current["spec"] = spec
            return current

        return await self._mutate(name, update, raw=False)

    async def _mark_available(self, name: str) -> int:
        """Report a local APIService ``Available`` (a status write, as kube's availability controller makes)."""
        now = timestamp(self.store.clock)

        def update(current: dict[str, Any]) -> dict[str, Any] | None:
            if (current.get("spec") or {}).get("service") or _available(current):
                return None
            status = current.setdefault("status", {})
            others = [c for c in status.get("conditions") or ()
                      if isinstance(c, Mapping) and c.get("type") != "Available"]
            status["conditions"] = [*others, {"type": "Available", "status": "True", "lastTransitionTime": now,
                                              "reason": "Local", "message": "Local APIServices are always available"}]
            return current

        return await self._mutate(name, update, raw=True)

    async def _mutate(self, name: str, update: Any, *, raw: bool) -> int:
        """1 when ``update`` changed the object, 0 when it had nothing to do or the object is gone."""
        try:
            return 0 if await self.store.mutate(self.info, "", name, update, raw=raw) is None else 1
        except st.StatusError as e:
            if e.code != 404:  # deleted meanwhile: its DELETED event triggers another pass
                raise
            return 0

    async def _delete(self, name: str) -> int:
        try:
            await self.store.delete(self.info, "", name)
        except st.StatusError as e:
            if e.code != 404:
                raise
            return 0
        return 1
