"""The RBAC authorizer: rbac.authorization.k8s.io/v1 Roles, ClusterRoles and their bindings, read from the watch cache.

Invariants (kube's ``plugin/pkg/auth/authorizer/rbac`` and ``pkg/registry/rbac/validation``):

* Decisions are computed from the objects the server's watch cache holds, so every replica over one store
  authorizes alike, and a change to a role or binding counts as soon as the cache has applied it.
* Nothing is ever denied explicitly: a request is allowed when some rule reachable from the user allows it.
  ClusterRoleBindings apply everywhere; RoleBindings only in their namespace (their ClusterRole's rules too).
* A rule matches a resource request when its verbs, apiGroups, resources (``plural``, ``plural/sub``, ``*`` or
  ``*/sub``; a bare plural never covers its subresources) and resourceNames (empty: any name) match; a
  non-resource request when its verbs and nonResourceURLs (exact, ``*`` or a ``prefix*``) match.
* A ServiceAccount subject without a namespace means the binding's own namespace (none for a cluster binding).
* Members of ``system:masters`` are allowed everything before RBAC is consulted, as kube's privileged group.
* Subjects are indexed per (kind, name); the index is rebuilt lazily after any RBAC object changes.
* :meth:`RBACAuthorizer.refresh` waits until the cache holds every committed write; callers re-decide a
  denial after it, so a just-written binding counts at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..storage.watchcache import CachedEvent, WatchCache
from .authentication import UserInfo
from .authorization import RequestAttributes

__all__ = ["GROUP", "SUPERUSER_GROUP", "PolicyRule", "RBACAuthorizer", "rule_allows", "rules_of"]

GROUP = "rbac.authorization.k8s.io"
SUPERUSER_GROUP = "system:masters"
SA_PREFIX = "system:serviceaccount:"
PREFIXES = {kind: f"/registry/{GROUP}/{plural}/" for kind, plural in (
    ("Role", "roles"), ("ClusterRole", "clusterroles"), ("RoleBinding", "rolebindings"),
    ("ClusterRoleBinding", "clusterrolebindings"))}
_MAX_CACHED_USERS = 1024


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One rbac/v1 PolicyRule (tuples, so rules hash and compare)."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> PolicyRule:
        def strings(key: str) -> tuple[str, ...]:
            value = doc.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        return cls(strings("verbs"), strings("apiGroups"), strings("resources"), strings("resourceNames"),
                   strings("nonResourceURLs"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verbs": list(self.verbs)}
        for key, value in (("apiGroups", self.api_groups), ("resources", self.resources),
                           ("resourceNames", self.resource_names), ("nonResourceURLs", self.non_resource_urls)):
            if value:
                out[key] = list(value)
        return out

    def compact(self) -> str:
        """kube's ``CompactString``: ``{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}``."""
        parts = [f"{label}:[{' '.join(_go_quote(v) for v in values)}]" for label, values in (
            ("APIGroups", self.api_groups), ("Resources", self.resources), ("NonResourceURLs", self.non_resource_urls),
            ("ResourceNames", self.resource_names), ("Verbs", self.verbs)) if values]
        return "{" + ", ".join(parts) + "}"


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rules_of(obj: Mapping[str, Any]) -> list[PolicyRule]:
    """The rules of a Role or ClusterRole object (malformed entries skipped)."""
    rules = obj.get("rules")
    return [PolicyRule.from_dict(r) for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


# ------------------------------------------------------------------------------------------ matching


def _resource_matches(rule: PolicyRule, combined: str, sub: str) -> bool:
    for r in rule.resources:
        if r == "*" or r == combined:
            return True
        if sub and r == "*/" + sub:
            return True
    return False


def url_matches(pattern: str, path: str) -> bool:
    """A nonResourceURLs entry against a path: ``*``, an exact path, or ``prefix*``."""
    if pattern == "*" or pattern == path:
        return True
    return pattern.endswith("*") and path.startswith(pattern[:-1])


def rule_allows(a: RequestAttributes, rule: PolicyRule) -> bool:
    """kube's ``RuleAllows``: does ``rule`` grant the request ``a``."""
    if "*" not in rule.verbs and a.verb not in rule.verbs:
        return False
    if not a.resource_request:
        return any(url_matches(p, a.path) for p in rule.non_resource_urls)
    if "*" not in rule.api_groups and a.api_group not in rule.api_groups:
        return False
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if not _resource_matches(rule, combined, a.subresource):
        return False
    return not rule.resource_names or a.name in rule.resource_names


# ------------------------------------------------------------------------------------------ subjects


def applies_to(user: UserInfo, subject: Mapping[str, Any], binding_namespace: str) -> bool:
    """kube's ``appliesToUser``: does a binding's subject name ``user``."""
    kind, name = subject.get("kind"), subject.get("name")
    if not isinstance(name, str):
        return False
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return bool(ns) and user.name == f"{SA_PREFIX}{ns}:{name}"
    return False


def _subject_keys(user: UserInfo) -> list[tuple[str, str]]:
    keys = [("User", user.name)]
    keys.extend(("Group", g) for g in user.groups)
    if user.name.startswith(SA_PREFIX):
        keys.append(("ServiceAccount", user.name))
    return keys


def _index_key(subject: Mapping[str, Any], binding_namespace: str) -> tuple[str, str] | None:
    kind, name = subject.get("kind"), subject.get("name")
    if not isinstance(name, str) or kind not in ("User", "Group", "ServiceAccount"):
        return None
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return ("ServiceAccount", f"{SA_PREFIX}{ns}:{name}") if ns else None
    return kind, name


@dataclass(frozen=True, slots=True)
class _Binding:
    namespace: str  # "" for a ClusterRoleBinding
    name: str
    role_kind: str
    role_name: str


class RBACAuthorizer:
    """Authorizes requests by the RBAC objects of ``cache`` (see the module invariants)."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache
        self._index: dict[tuple[str, str], list[_Binding]] | None = None
        self._rules_cache: dict[tuple[str, tuple[str, ...], str], tuple[PolicyRule, ...]] = {}
        cache.add_listener(self._on_event, PREFIXES.values(), on_reset=self.invalidate)

    def _on_event(self, prefix: str, ev: CachedEvent) -> None:
        self.invalidate()  # called only for writes of RBAC objects

    def invalidate(self) -> None:
        """Forget derived state (called on every RBAC object change)."""
        self._index = None
        self._rules_cache.clear()

    # -------------------------------------------------------------------------- objects

    def objects(self, kind: str, namespace: str = "") -> list[Mapping[str, Any]]:
        """The cached objects of one RBAC kind (of ``namespace`` when given)."""
        bucket = self.cache.buckets.get(PREFIXES[kind])
        return [co.obj for co in bucket.snapshot(namespace)] if bucket is not None else []

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        bucket = self.cache.buckets.get(PREFIXES[kind])
        if bucket is None:
            return None
        co = bucket.objects.get(f"{PREFIXES[kind]}{namespace}/{name}" if namespace else f"{PREFIXES[kind]}{name}")
        return co.obj if co is not None else None

    def role_rules(self, role_ref: Mapping[str, Any], namespace: str) -> tuple[list[PolicyRule], str | None]:
        """The rules a roleRef names (a Role in ``namespace`` or a ClusterRole), and an error when it is missing."""
        kind, name = role_ref.get("kind"), role_ref.get("name")
        if kind == "ClusterRole" and isinstance(name, str):
            role = self.get("ClusterRole", "", name)
            missing = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        elif kind == "Role" and isinstance(name, str) and namespace:
            role = self.get("Role", namespace, name)
            missing = f'role.rbac.authorization.k8s.io "{name}" not found'
        else:
            return [], f"unsupported role reference kind: {kind!r}"
        return (rules_of(role), None) if role is not None else ([], missing)

    def _build_index(self) -> dict[tuple[str, str], list[_Binding]]:
        index: dict[tuple[str, str], list[_Binding]] = {}
        for kind in ("ClusterRoleBinding", "RoleBinding"):
            for b in self.objects(kind):
                meta = b.get("metadata") or {}
                ns = meta.get("namespace", "") if kind == "RoleBinding" else ""
                ref = b.get("roleRef") or {}
                if not isinstance(ref, Mapping):
                    continue
                binding = _Binding(ns, meta.get("name", ""), str(ref.get("kind", "")), str(ref.get("name", "")))
                for subject in b.get("subjects") or ():
                    key = _index_key(subject, ns) if isinstance(subject, Mapping) else None
                    if key is not None:
                        index.setdefault(key, []).append(binding)
        return index

    def _bindings_for(self, user: UserInfo) -> Iterator[_Binding]:
        index = self._index
        if index is None:
            index = self._index = self._build_index()
        seen: set[_Binding] = set()
        for key in _subject_keys(user):
            for b in index.get(key, ()):
                if b not in seen:
                    seen.add(b)
                    yield b

    # -------------------------------------------------------------------------- decisions

    def visit_rules_for(self, user: UserInfo,
                        namespace: str) -> Iterator[tuple[_Binding, list[PolicyRule], str | None]]:
        """Each binding that applies to ``user`` in ``namespace`` ("" = cluster scope), with its rules."""
        for b in sorted(self._bindings_for(user), key=lambda b: (b.namespace != "", b.namespace, b.name)):
            if b.namespace and b.namespace != namespace:
                continue
            rules, error = self.role_rules({"kind": b.role_kind, "name": b.role_name}, b.namespace)
            yield b, rules, error

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[tuple[PolicyRule, ...], list[str]]:
        """Every rule ``user`` holds in ``namespace`` (cluster-wide ones included), and resolution errors."""
        key = (user.name, user.groups, namespace)
        cached = self._rules_cache.get(key)
        if cached is not None:
            return cached, []
        rules: list[PolicyRule] = []
        errors: list[str] = []
        for _, found, error in self.visit_rules_for(user, namespace):
            rules.extend(found)
            if error:
                errors.append(error)
        result = tuple(dict.fromkeys(rules))
        if not errors:
            if len(self._rules_cache) >= _MAX_CACHED_USERS:
                self._rules_cache.clear()
            self._rules_cache[key] = result
        return result, errors

    def authorize(self, user: UserInfo, a: RequestAttributes) -> tuple[bool, str]:
        """(allowed, reason) as kube's RBAC authorizer answers; the reason names a denial's resolution errors."""
        if SUPERUSER_GROUP in user.groups:
            return True, ""
        rules, errors = self.rules_for(user, a.namespace)
        if any(rule_allows(a, r) for r in rules):
            return True, ""
        return False, ("RBAC: " + ", ".join(errors)) if errors else ""

    def explain(self, user: UserInfo, a: RequestAttributes) -> str:
        """Why ``a`` is allowed, as kube words it (``RBAC: allowed by RoleBinding "b/ns" of Role "r" to User
        "u"``); "" when no binding allows it."""
        index = self._index
        if index is None:
            index = self._index = self._build_index()
        found = [(b, key) for key in _subject_keys(user) for b in index.get(key, ())
                 if not b.namespace or b.namespace == a.namespace]
        for b, (kind, name) in sorted(found, key=lambda f: (f[0].namespace != "", f[0].namespace, f[0].name)):
            rules, _ = self.role_rules({"kind": b.role_kind, "name": b.role_name}, b.namespace)
            if not any(rule_allows(a, r) for r in rules):
                continue
            if kind == "ServiceAccount":
                ns, _, sa = name[len(SA_PREFIX):].partition(":")
                name = f"{sa}/{ns}"
            what = f'RoleBinding "{b.name}/{b.namespace}"' if b.namespace else f'ClusterRoleBinding "{b.name}"'
            return f'RBAC: allowed by {what} of {b.role_kind} "{b.role_name}" to {kind} "{name}"'
        return ""

    async def refresh(self, timeout: float = 1.0) -> None:
        """Wait (bounded) until the cache has applied every write the store has committed."""
        with contextlib.suppress(TimeoutError):
            await self.cache.sync(timeout)

    def allows(self, user: UserInfo, a: RequestAttributes) -> bool:
        return self.authorize(user, a)[0]


def flatten(rules: Sequence[PolicyRule]) -> list[dict[str, Any]]:
    """Rules as rbac/v1 dicts."""
    return [r.to_dict() for r in rules]
