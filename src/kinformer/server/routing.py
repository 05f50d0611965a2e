"""Request routing of the resource API: a path under ``/api/v1`` or ``/apis/<group>/<version>`` to a :class:`Target`."""

from __future__ import annotations

from dataclasses import dataclass

from . import status as st
from .registry import GENERIC_SUBRESOURCES, Registry, ResourceInfo


@dataclass(slots=True)
class Target:
    """What a request addresses: a resource, optionally a namespace, an object and a subresource."""

    info: ResourceInfo
    namespace: str
    name: str
    subresource: str
    watch: bool


def resolve_target(registry: Registry, group: str, version: str, rest: str) -> Target:
    """The :class:`Target` of the path ``rest`` under a group version; 404 for anything not served."""
    parts = rest.split("/")
    if parts and parts[-1] == "":
        parts.pop()
    watch = False
    if parts and parts[0] == "watch":
        watch = True
        parts = parts[1:]
    if not parts or any(p == "" for p in parts):
        raise st.route_not_found()
    namespace = ""
    ns_info = registry.get(group, version, "namespaces") if not group else None
    if parts[0] == "namespaces" and len(parts) >= 3 and not (ns_info and len(parts) == 3
                                                             and parts[2] in ns_info.subresources):
        namespace = parts[1]
        parts = parts[2:]
        info = registry.get(group, version, parts[0])
        if info is None or not info.namespaced:
            raise st.route_not_found()
    else:
        info = registry.get(group, version, parts[0])
        if info is None:
            raise st.route_not_found()
        if info.namespaced and len(parts) > 1:
            raise st.route_not_found()
    sub = parts[2] if len(parts) > 2 else ""
    if len(parts) > 3 and sub != "proxy":
        raise st.route_not_found()
    name = parts[1] if len(parts) > 1 else ""
    if sub and sub not in info.subresources:
        raise st.route_not_found()
    if sub and sub not in GENERIC_SUBRESOURCES:
        raise st.subresource_not_served(info, name, sub)
    return Target(info, namespace, name, sub, watch)


_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_verb(method: str, t: Target, watch_param: bool) -> str:
    """kube's verb for a request (get, list, watch, create, update, patch, delete, deletecollection)."""
    if method in ("GET", "HEAD"):
        if t.watch or (watch_param and not t.name):
            return "watch"
        return "get" if t.name else "list"
    if method == "DELETE":
        return "delete" if t.name else "deletecollection"
    return _WRITE_VERBS.get(method, method.lower())


def check_verb(t: Target, verb: str) -> None:
    """405 MethodNotAllowed unless the resource (or its subresource) serves ``verb``, as kube-apiserver answers."""
    if t.subresource:
        sub = t.info.subresource(t.subresource)
        allowed = sub.verbs if sub is not None else ("get", "patch", "update")
    else:
        allowed = t.info.verbs
    if verb not in allowed:
        raise st.method_not_allowed()
