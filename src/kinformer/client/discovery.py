"""Resource resolution through API discovery.

Accepted spellings: a plural (``configmaps``), singular, kind (``ConfigMap``) or short name (``cm``), each
optionally qualified: ``v1/pods``, ``apps/v1/deployments``, ``example.com/v1/foos``, ``deployments.apps``,
``deployments.v1.apps``. Discovery documents (``/api/v1``, ``/apis``, ``/apis/<g>/<v>``) are cached, and so is
what each spelling resolved to (a controller resolves the same few names at every request); a name that is not
found refreshes the cache once before failing. Invalidating forgets both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kinformer.errors import KinformerError, NotFound

__all__ = ["Discovery", "Resource", "ResourceNotFound", "parse_resource_spec"]


class ResourceNotFound(KinformerError, LookupError):
    """No resource of that name is served."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: where it lives and how its URLs are built.

    Invariant: ``group`` is ``""`` for the core group; ``plural`` is the URL segment.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    subresources: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection (no ``name``) or of one object, optionally a subresource.

        A namespaced resource without ``namespace`` addresses all namespaces (list/watch only).
        """
        parts = [self.group_version_path]
        if self.namespaced and namespace:
            parts.append(f"/namespaces/{quote(namespace, safe='')}")
        parts.append(f"/{self.plural}")
        if name is not None:
            if not name:
                raise ValueError("resource name must not be empty")
            parts.append(f"/{quote(name, safe='')}")
        if subresource:
            if name is None:
                raise ValueError("a subresource needs an object name")
            parts.append(f"/{subresource}")
        return "".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    group: str | None  # None = any group
    version: str | None  # None = preferred version


def parse_resource_spec(spec: str) -> list[_Spec]:
    """The candidate readings of ``spec``, most specific first."""
    parts = spec.split("/")
    if len(parts) == 2:
        return [_Spec(parts[1], "", parts[0])]
    if len(parts) == 3:
        return [_Spec(parts[2], parts[0], parts[1])]
    if len(parts) != 1 or not spec:
        raise ResourceNotFound(f"cannot parse resource {spec!r}")
    if "." not in spec:
        return [_Spec(spec, None, None)]
    name, _, rest = spec.partition(".")
    out = []
    version, _, group = rest.partition(".")
    if group and version.startswith("v") and version[1:2].isdigit():
        out.append(_Spec(name, group, version))  # deployments.v1.apps
    out.append(_Spec(name, rest, None))  # deployments.apps
    return out


def _matches(res: Resource, name: str) -> bool:
    if name == res.plural or name == res.singular or name in res.short_names:
        return True
    return name.lower() in (res.kind.lower(), res.plural.lower())


class Discovery:
    """Cached discovery over ``get_json(path) -> document`` (the client's GET)."""

    def __init__(self, get_json: Callable[[str], Awaitable[Mapping[str, Any]]]) -> None:
        self._get = get_json
        self._groups: list[tuple[str, list[str], str]] | None = None  # (group, versions, preferred)
        self._resources: dict[tuple[str, str], list[Resource]] = {}
        self._resolved: dict[str, Resource] = {}  # spelling -> what it resolved to, from the cached documents
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        """Forget every cached document and resolution."""
        self._groups = None
        self._resources.clear()
        self._resolved.clear()

    async def groups(self) -> list[tuple[str, list[str], str]]:
        """(group, versions, preferred version) for every group, the core group first."""
        if self._groups is None:
            core = await self._get("/api")
            groups: list[tuple[str, list[str], str]] = []
            core_versions = list(core.get("versions") or ["v1"])
            groups.append(("", core_versions, core_versions[0] if core_versions else "v1"))
            doc = await self._get("/apis")
            for g in doc.get("groups") or []:
                versions = [v["version"] for v in g.get("versions") or []]
                preferred = (g.get("preferredVersion") or {}).get("version") or (versions[0] if versions else "")
                groups.append((g["name"], versions, preferred))
            self._groups = groups
        return self._groups

    async def resources(self, group: str, version: str) -> list[Resource]:
        """The resources of one group/version (cached)."""
        key = (group, version)
        cached = self._resources.get(key)
        if cached is not None:
            return cached
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = await self._get(path)
        except NotFound:
            self._resources[key] = []
            return []
        entries = doc.get("resources") or []
        subs: dict[str, list[str]] = {}
        for e in entries:
            main, _, sub = e.get("name", "").partition("/")
            if sub:
                subs.setdefault(main, []).append(sub)
        out = [
            Resource(group=e.get("group") or group, version=e.get("version") or version, plural=e["name"],
                     kind=e.get("kind", ""), namespaced=bool(e.get("namespaced")),
                     singular=e.get("singularName") or "", short_names=tuple(e.get("shortNames") or ()),
                     verbs=tuple(e.get("verbs") or ()), subresources=tuple(subs.get(e["name"], ())))
            for e in entries if "/" not in e.get("name", "/")
        ]
        self._resources[key] = out
        return out

    async def _find(self, spec: _Spec) -> Resource | None:
        if spec.group is not None and spec.version is not None:
            for res in await self.resources(spec.group, spec.version):
                if _matches(res, spec.name):
                    return res
            return None
        groups = await self.groups()
        if spec.group is not None:
            groups = [g for g in groups if g[0] == spec.group]
        docs = await asyncio.gather(*(self.resources(g, pref) for g, _, pref in groups if pref))
        for resources in docs:
            for res in resources:
                if _matches(res, spec.name):
                    return res
        return None

    async def resolve(self, spec: str | Resource) -> Resource:
        """Resolve ``spec`` to a :class:`Resource`; on a miss, refresh discovery once, then raise
        :class:`ResourceNotFound`."""
        if isinstance(spec, Resource):
            return spec
        resolved = self._resolved.get(spec)
        if resolved is not None:
            return resolved
        candidates = parse_resource_spec(spec)
        for attempt in range(2):
            for cand in candidates:
                res = await self._find(cand)
                if res is not None:
                    self._resolved[spec] = res
                    return res
            if attempt == 0:
                async with self._lock:
                    self.invalidate()
        raise ResourceNotFound(f"the server does not serve a resource {spec!r}")
