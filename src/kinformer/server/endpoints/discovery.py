"""API discovery: ``/version``, ``/api``, ``/apis`` and the per-group documents.

Two families of documents are served from the same registry:

* the older discovery documents (``APIVersions``, ``APIGroupList``, ``APIGroup``, ``APIResourceList``),
  which kopf, kr8s and the dynamic Python client read; subresources appear there as their own
  entries (``pods/status``, ``deployments/scale``);
* aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``), which kubectl asks for
  through its ``Accept`` header on ``/api`` and ``/apis``.

Invariants: every document is built from one consistent view of the registry, encoded once, and
reused until ``registry.revision`` changes (a CRD added or removed). A document never mixes two
revisions. Unknown groups and versions answer a ``NotFound`` Status, never an empty document.
"""

from __future__ import annotations

import base64
import hashlib
import platform
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..machinery.status import json_body
from ..schema import builtin_conversion

if TYPE_CHECKING:
    from kinformer.server.registry.resources import Registry, ResourceInfo

__all__ = [
    "AGGREGATED_CONTENT_TYPES",
    "DiscoveryDocuments",
    "routes",
    "subresource_kind",
    "subresource_verbs",
    "version_info",
]

KUBE_MAJOR = "1"
KUBE_MINOR = "32"
GIT_VERSION = "v1.32.0-kinformer"

# Accept-header media type -> apiVersion of the aggregated document served for it, newest first.
AGGREGATED_CONTENT_TYPES: dict[str, str] = {
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList": "apidiscovery.k8s.io/v2",
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList": "apidiscovery.k8s.io/v2beta1",
}

# Verbs of CRD subresources (built-ins carry theirs in the catalogue).
_DEFAULT_SUBRESOURCE_VERBS = ("get", "patch", "update")
_SCALE = ("autoscaling", "v1", "Scale")

_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386",
            "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}


def version_info() -> dict[str, str]:
    """The ``/version`` document: kube-apiserver's ``version.Info`` shape, describing this server."""
    from kinformer import __version__

    try:
        built = datetime.fromtimestamp(Path(__file__).stat().st_mtime, tz=UTC)
    except OSError:  # pragma: no cover - the module file always exists when imported from disk
        built = datetime.now(tz=UTC)
    machine = platform.machine().lower()
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": GIT_VERSION,
        "gitCommit": f"kinformer-{__version__}",
        "gitTreeState": "clean",
        "buildDate": built.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{sys.platform}/{_GO_ARCH.get(machine, machine)}",
    }


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _storage_version_hash(info: ResourceInfo) -> str:
    """kube's storageVersionHash: the first 8 bytes of sha256("group/version/kind") of the version the
    resource is stored in, base64 (every served version of a multi-version built-in shares it)."""
    group, version = (builtin_conversion.storage_of(info.group, info.plural) if info.builtin else None) or (
        info.group, info.version)
    digest = hashlib.sha256(f"{group}/{version}/{info.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def subresource_verbs(info: ResourceInfo, subresource: str) -> tuple[str, ...]:
    """The verbs ``info``'s subresource serves: the catalogue's for built-ins, get/patch/update for CRDs."""
    found = info.subresource(subresource)
    if found is not None:
        return found.verbs
    return _DEFAULT_SUBRESOURCE_VERBS


def subresource_kind(info: ResourceInfo, sub: str) -> tuple[str, str, str]:
    """(group, version, kind) of the objects a subresource answers with (a CRD's scale: autoscaling/v1 Scale)."""
    found = info.subresource(sub)
    if found is not None:
        return found.group, found.version, found.kind
    return _SCALE if sub == "scale" else (info.group, info.version, info.kind)


def _api_resource_entries(info: ResourceInfo) -> list[dict[str, Any]]:
    """The ``APIResourceList`` entries of one resource: the resource itself, then each subresource."""
    main: dict[str, Any] = {
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        main["shortNames"] = list(info.short_names)
    if info.categories:
        main["categories"] = list(info.categories)
    main["storageVersionHash"] = _storage_version_hash(info)
    entries = [main]
    for sub in info.subresources:
        group, version, kind = subresource_kind(info, sub)
        entry: dict[str, Any] = {"name": f"{info.plural}/{sub}", "singularName": "", "namespaced": info.namespaced}
        if (group, version) != (info.group, info.version):
            entry["group"] = group
            entry["version"] = version
        entry["kind"] = kind
        entry["verbs"] = list(subresource_verbs(info, sub))
        entries.append(entry)
    return entries


def _aggregated_resource(info: ResourceInfo) -> dict[str, Any]:
    """One ``APIResourceDiscovery`` (apidiscovery.k8s.io/v2) entry."""
    doc: dict[str, Any] = {
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        doc["shortNames"] = list(info.short_names)
    if info.categories:
        doc["categories"] = list(info.categories)
    if info.subresources:
        subs = []
        for sub in info.subresources:
            group, version, kind = subresource_kind(info, sub)
            subs.append({
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": list(subresource_verbs(info, sub)),
            })
        doc["subresources"] = subs
    return doc


class DiscoveryDocuments:
    """Every discovery document of one registry, encoded to bytes and cached per ``registry.revision``.

    Documents are built lazily on first request and dropped together as soon as the registry's
    revision moves, so a reader sees either all-old or all-new documents for a given request.
    """

    __slots__ = ("_cache", "_registry", "_revision")

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._revision: int | None = None
        self._cache: dict[tuple[str, ...], bytes | None] = {}

    def _get(self, key: tuple[str, ...], build: Callable[[], Any]) -> bytes | None:
        revision = self._registry.revision
        if revision != self._revision:
            self._cache = {}
            self._revision = revision
        try:
            return self._cache[key]
        except KeyError:
            doc = build()
            body = None if doc is None else json_body(doc)
            self._cache[key] = body
            return body

    # -- views of the registry -------------------------------------------------------------------

    def _by_group_version(self) -> dict[tuple[str, str], list[ResourceInfo]]:
        out: dict[tuple[str, str], list[ResourceInfo]] = {}
        for info in self._registry.resources():
            out.setdefault((info.group, info.version), []).append(info)
        for infos in out.values():
            infos.sort(key=lambda i: i.plural)
        return out

    def _groups(self) -> list[tuple[str, list[str]]]:
        """Non-core groups with their versions (preferred first), sorted by name for a stable order."""
        return sorted((g, list(vs)) for g, vs in self._registry.group_versions().items() if g and vs)

    @staticmethod
    def _api_group(name: str, versions: list[str]) -> dict[str, Any]:
        gvs = [{"groupVersion": _group_version(name, v), "version": v} for v in versions]
        return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}

    # -- documents -------------------------------------------------------------------------------

    def api_versions(self, server_address: str) -> bytes:
        """``/api``: the core group's versions."""
        def build() -> dict[str, Any]:
            versions = self._registry.group_versions().get("", []) or ["v1"]
            return {
                "kind": "APIVersions",
                "versions": list(versions),
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
            }
        body = self._get(("api", server_address), build)
        assert body is not None
        return body

    def api_group_list(self) -> bytes:
        """``/apis``: every non-core group."""
        def build() -> dict[str, Any]:
            groups = [self._api_group(name, versions) for name, versions in self._groups()]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        body = self._get(("apis",), build)
        assert body is not None
        return body

    def api_group(self, group: str) -> bytes | None:
        """``/apis/<group>``, or None when the group is not served."""
        def build() -> dict[str, Any] | None:
            versions = self._registry.group_versions().get(group) if group else None
            if not versions:
                return None
            return {"kind": "APIGroup", "apiVersion": "v1", **self._api_group(group, list(versions))}
        return self._get(("group", group), build)

    def api_resource_list(self, group: str, version: str) -> bytes | None:
        """``/api/v1`` or ``/apis/<group>/<version>``, or None when that group/version is not served."""
        def build() -> dict[str, Any] | None:
            if version not in self._registry.group_versions().get(group, ()):
                return None
            infos = self._by_group_version().get((group, version), [])
            resources = [entry for info in infos for entry in _api_resource_entries(info)]
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": _group_version(group, version), "resources": resources}
        return self._get(("resources", group, version), build)

    def aggregated(self, core: bool, api_version: str) -> bytes:
        """The ``APIGroupDiscoveryList`` for the core group (``core``) or for all other groups."""
        def build() -> dict[str, Any]:
            by_gv = self._by_group_version()
            groups = [("", list(self._registry.group_versions().get("", []) or ["v1"]))] if core else self._groups()
            items = []
            for name, versions in groups:
                version_docs = [{
                    "version": v,
                    "resources": [_aggregated_resource(i) for i in by_gv.get((name, v), [])],
                    "freshness": "Current",
                } for v in versions]
                metadata: dict[str, Any] = {"creationTimestamp": None}
                if name:  # the core group has no name
                    metadata["name"] = name
                items.append({"metadata": metadata, "versions": version_docs})
            return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}
        body = self._get(("aggregated", "core" if core else "apis", api_version), build)
        assert body is not None
        return body


def _accepted_aggregated(accept: str) -> str | None:
    """The aggregated media type the client asked for (most preferred first), or None.

    Parameters are compared without whitespace and in any order, as clients format them freely;
    a media range with ``q=0`` is a refusal and is skipped.
    """
    for media_range in accept.split(","):
        parts = [p.strip() for p in media_range.split(";") if p.strip()]
        if not parts or parts[0].lower() != "application/json":
            continue
        params = {}
        for p in parts[1:]:
            key, _, value = p.partition("=")
            params[key.strip().lower()] = value.strip()
        if params.get("as") != "APIGroupDiscoveryList" or params.get("g") != "apidiscovery.k8s.io":
            continue
        if params.get("q") in {"0", "0.0", "0.00", "0.000"}:
            continue
        content_type = f"application/json;g=apidiscovery.k8s.io;v={params.get('v', '')};as=APIGroupDiscoveryList"
        if content_type in AGGREGATED_CONTENT_TYPES:
            return content_type
    return None


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32].upper() + '"'


def _json(body: bytes, content_type: str = "application/json", request: web.Request | None = None) -> web.Response:
    """A JSON response; with ``request``, also an ETag (and 304 when the client already has it)."""
    headers = {"Content-Type": content_type, "Cache-Control": "no-cache, private"}
    if request is not None:
        etag = _etag(body)
        headers["ETag"] = etag
        headers["Vary"] = "Accept"
        if etag in (request.headers.get("If-None-Match") or ""):
            del headers["Content-Type"]
            return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers=headers)


def _not_found(message: str) -> web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
              "reason": "NotFound", "details": {}, "code": 404}
    return web.Response(status=404, body=json_body(status), content_type="application/json")


def _server_address(request: web.Request) -> str:
    host = request.host or ""
    if host:
        return host
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return f"{sockname[0]}:{sockname[1]}" if sockname else ""


def routes(registry: Registry) -> list[web.RouteDef]:
    """aiohttp route definitions serving every discovery document of ``registry``.

    Covers ``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/{group}`` and
    ``/apis/{group}/{version}``, each with and without a trailing slash.
    """
    docs = DiscoveryDocuments(registry)
    version_body = orjson.dumps(version_info())

    async def get_version(request: web.Request) -> web.Response:
        return _json(version_body)

    async def get_api(request: web.Request) -> web.Response:
        content_type = _accepted_aggregated(request.headers.get("Accept", ""))
        if content_type is not None:
            body = docs.aggregated(core=True, api_version=AGGREGATED_CONTENT_TYPES[content_type])
            return _json(body, content_type, request)
        return _json(docs.api_versions(_server_address(request)))

    async def get_apis(request: web.Request) -> web.Response:
        content_type = _accepted_aggregated(request.headers.get("Accept", ""))
        if content_type is not None:
            body = docs.aggregated(core=False, api_version=AGGREGATED_CONTENT_TYPES[content_type])
            return _json(body, content_type, request)
        return _json(docs.api_group_list())

    async def get_core_v1(request: web.Request) -> web.Response:
        version = request.match_info.get("version", "v1")
        body = docs.api_resource_list("", version)
        return _json(body) if body is not None else _not_found("the server could not find the requested resource")

    async def get_group(request: web.Request) -> web.Response:
        body = docs.api_group(request.match_info["group"])
        return _json(body) if body is not None else _not_found("the server could not find the requested resource")

    async def get_group_version(request: web.Request) -> web.Response:
        body = docs.api_resource_list(request.match_info["group"], request.match_info["version"])
        return _json(body) if body is not None else _not_found("the server could not find the requested resource")

    table: Iterable[tuple[str, Callable[[web.Request], Any]]] = (
        ("/version", get_version),
        ("/api", get_api),
        ("/apis", get_apis),
        ("/api/{version}", get_core_v1),
        ("/apis/{group}", get_group),
        ("/apis/{group}/{version}", get_group_version),
    )
    out: list[web.RouteDef] = []
    for path, handler in table:
        out.append(web.get(path, handler, allow_head=True))
        out.append(web.get(path + "/", handler, allow_head=True))
    return out
