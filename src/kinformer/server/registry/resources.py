"""The resource registry: which kinds the embedded API server serves, and where they live in storage.

Invariants:

* Built-in kinds are registered at construction and never removed or replaced: a CRD naming a built-in
  resource, or a built-in kind of its group, is served nothing (:func:`shadows_builtin`).
* A CRD contributes one :class:`ResourceInfo` per *served* version; all versions of one CRD share
  one storage prefix (``/registry/<group>/<plural>/``), as kube-apiserver stores one version.
* :attr:`Registry.revision` increases on every change, so discovery and OpenAPI caches can key on it.
* The served CRDs follow the stored CRD objects: the API server feeds every CRD event of its watch
  cache (itself fed by the storage watch) to :meth:`Registry.on_crd_event`, so a CRD written through
  any replica sharing the storage is served by every replica once its cache has the event.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.server.schema import builtin_catalog

log = logging.getLogger(__name__)

CRD_PREFIX = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

ALL_VERBS: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Subresource:
    """One subresource of a resource: its verbs and the kind its responses carry."""

    name: str
    verbs: tuple[str, ...]
    group: str
    version: str
    kind: str


# Subresources the resource handlers serve (status, finalize, ephemeralcontainers and a CSR's approval replace
# one part of the object, scale is a view; binding and eviction are a pod's, see :mod:`.endpoints.podsubresources`).
GENERIC_SUBRESOURCES = frozenset({"status", "scale", "finalize", "ephemeralcontainers", "binding", "eviction",
                                  "approval"})
# Subresources kube-apiserver serves by calling the node's kubelet; without one there is nothing to answer.
KUBELET_SUBRESOURCES = frozenset({"log", "exec", "attach", "portforward", "proxy"})


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One served resource (group, version, plural) and how the server treats it.

    ``subresources`` names every subresource discovery lists; ``subresource_details`` carries the verbs and
    response kind of those the built-in catalogue describes (CRD subresources take the defaults).
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = None
    builtin: bool = True
    selectable_fields: tuple[str, ...] = ()
    crd_name: str = field(default="", compare=False)
    #: a CRD's ``subresources.scale`` (specReplicasPath, statusReplicasPath, labelSelectorPath)
    scale_paths: Mapping[str, Any] | None = field(default=None, compare=False)
    subresource_details: tuple[Subresource, ...] = field(default=(), compare=False)
    # Derived from the fields above once, at construction: every request reads them, several times.
    #: ``group/version`` (``version`` for the core group)
    api_version: str = field(init=False, compare=False, repr=False)
    #: key prefix of every object of this resource, ending with ``/``
    storage_prefix: str = field(init=False, compare=False, repr=False)
    #: whether the resource has the status subresource
    has_status: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        derive = object.__setattr__  # frozen: set once here, read-only afterwards
        derive(self, "api_version", f"{self.group}/{self.version}" if self.group else self.version)
        derive(self, "storage_prefix", f"/registry/{self.group or 'core'}/{self.plural}/")
        derive(self, "has_status", "status" in self.subresources)

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def subresource(self, name: str) -> Subresource | None:
        """The catalogue's description of subresource ``name``, or None (CRDs, unknown names)."""
        for sub in self.subresource_details:
            if sub.name == name:
                return sub
        return None


def _catalog_info(row: tuple[Any, ...]) -> ResourceInfo:
    group, version, kind, plural, singular, namespaced, verbs, short, categories, subs = row
    details = tuple(Subresource(*sub) for sub in subs)
    return ResourceInfo(group=group, version=version, kind=kind, plural=plural, singular=singular,
                        namespaced=namespaced, short_names=short, categories=categories, verbs=verbs,
                        subresources=tuple(s.name for s in details), subresource_details=details)


# Every resource kube-apiserver 1.32 serves by default, from the generated catalogue (tools/gen_builtin_catalog.py).
BUILTINS: tuple[ResourceInfo, ...] = tuple(_catalog_info(row) for row in builtin_catalog.RESOURCES)
BUILTIN_RESOURCES = frozenset((i.group, i.plural) for i in BUILTINS)
BUILTIN_KINDS = frozenset((i.group, i.kind) for i in BUILTINS)


def shadows_builtin(group: str, plural: str, kind: str) -> bool:
    """Whether a CRD's resource (or its kind, in the same group) is one the server serves itself."""
    return (group, plural) in BUILTIN_RESOURCES or (group, kind) in BUILTIN_KINDS

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes order: GA > beta > alpha (higher numbers first), then others."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


def crd_resources(crd: Mapping[str, Any]) -> list[ResourceInfo]:
    """The :class:`ResourceInfo` of every served version of an apiextensions.k8s.io/v1 CRD object."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec["group"]
    plural = names["plural"]
    kind = names["kind"]
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    crd_name = (crd.get("metadata") or {}).get("name") or f"{plural}.{group}"
    infos: list[ResourceInfo] = []
    for ver in spec.get("versions") or ():
        if not ver.get("served", True):
            continue
        subs = ver.get("subresources") or {}
        subresources = tuple(s for s in ("status", "scale") if s in subs)
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        selectable = tuple(f.get("jsonPath", "") for f in ver.get("selectableFields") or () if f.get("jsonPath"))
        infos.append(ResourceInfo(
            group=group, version=ver["name"], kind=kind, plural=plural,
            singular=names.get("singular") or kind.lower(), namespaced=namespaced,
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            subresources=subresources, schema=schema, builtin=False, selectable_fields=selectable,
            crd_name=crd_name, scale_paths=subs.get("scale") if isinstance(subs.get("scale"), Mapping) else None,
        ))
    return infos


class Registry:
    """Every resource the server serves, by (group, version, plural) and by (group, kind)."""

    def __init__(self) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceInfo] = {}
        self._crds: dict[str, list[ResourceInfo]] = {}
        self.revision = 0
        for info in BUILTINS:
            self._by_gvr[(info.group, info.version, info.plural)] = info

    def get(self, group: str, version: str, plural: str) -> ResourceInfo | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> ResourceInfo | None:
        """The preferred-version resource of ``kind`` in ``group``."""
        found = [i for i in self._by_gvr.values() if i.group == group and i.kind == kind]
        if not found:
            return None
        return min(found, key=lambda i: version_priority(i.version))

    def by_storage_prefix(self, group: str, plural: str) -> ResourceInfo | None:
        """Any served version of the resource stored under ``/registry/<group>/<plural>/``."""
        found = [i for i in self._by_gvr.values() if (i.group or "core") == group and i.plural == plural]
        return min(found, key=lambda i: version_priority(i.version)) if found else None

    def resources(self) -> list[ResourceInfo]:
        return list(self._by_gvr.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Group -> served versions, preferred first; the core group is ``""`` and comes first."""
        groups: dict[str, set[str]] = {}
        for info in self._by_gvr.values():
            groups.setdefault(info.group, set()).add(info.version)
        ordered = sorted(groups, key=lambda g: (g != "", g))
        return {g: sorted(groups[g], key=version_priority) for g in ordered}

    def add_crd(self, crd: Mapping[str, Any]) -> list[ResourceInfo]:
        """Serve (or re-serve, after an update) the versions of ``crd``; returns what is now served.

        A CRD naming a built-in resource or kind (validation refuses one; storage may hold one written before)
        is served nothing: a built-in's entry is never replaced, so never dropped with the CRD either.
        """
        infos = crd_resources(crd)
        if infos and shadows_builtin(infos[0].group, infos[0].plural, infos[0].kind):
            log.warning("not serving CRD %s: it names a built-in resource", infos[0].crd_name)
            infos = []
        name = infos[0].crd_name if infos else (crd.get("metadata") or {}).get("name", "")
        self._drop(name)
        for info in infos:
            self._by_gvr[(info.group, info.version, info.plural)] = info
        self._crds[name] = infos
        self.revision += 1
        return infos

    def on_crd_event(self, type_: str, crd: Mapping[str, Any]) -> None:
        """Follow one stored CRD change (``type_`` is ADDED, MODIFIED or DELETED); malformed CRDs are skipped."""
        if type_ == "DELETED":
            self.remove_crd((crd.get("metadata") or {}).get("name", ""))
            return
        try:
            self.add_crd(crd)
        except (KeyError, TypeError, AttributeError):
            log.warning("ignoring malformed stored CRD %s", (crd.get("metadata") or {}).get("name", ""))

    def sync_crds(self, crds: Iterable[Mapping[str, Any]]) -> None:
        """Serve exactly ``crds`` (the stored CRD objects), dropping any CRD not among them."""
        keep = set()
        for crd in crds:
            self.on_crd_event("ADDED", crd)
            keep.add((crd.get("metadata") or {}).get("name", ""))
        for name in [n for n in self._crds if n not in keep]:
            self.remove_crd(name)

    def remove_crd(self, crd_name: str) -> None:
        if self._drop(crd_name):
            self.revision += 1

    def _drop(self, crd_name: str) -> bool:
        old = self._crds.pop(crd_name, None)
        if not old:
            return False
        for info in old:
            key = (info.group, info.version, info.plural)
            if self._by_gvr.get(key) is info:
                del self._by_gvr[key]
        return True
