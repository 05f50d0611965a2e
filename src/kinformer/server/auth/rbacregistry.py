"""Writes of RBAC objects as kube's ``pkg/registry/rbac`` checks them: validation and escalation prevention.

Invariants:

* A user may create or update a Role/ClusterRole only with rules it already holds in that namespace (cluster
  roles: cluster-wide), unless it may ``escalate`` roles/clusterroles (or is in ``system:masters``). Setting
  or keeping an ``aggregationRule`` needs every permission (``*`` on ``*.*`` and every non-resource URL).
* A user may create or update a RoleBinding/ClusterRoleBinding only for a role whose rules it holds, unless
  it may ``bind`` that role (verb ``bind`` on roles/clusterroles with the role's name, in the binding's
  namespace) or is in ``system:masters``.
* Changes that only touch finalizers or ownerReferences (what the garbage collector needs) skip the checks.
* "Holds" is kube's ``Covers``: every rule, broken into one verb, group, resource, name or URL each, is
  covered by some owner rule (``*`` verbs/groups/resources, ``*/sub`` for subresources, an owner without
  resourceNames for any name, a ``prefix*`` URL for the URLs under it).
* Server-internal writes (no request user: bootstrap, aggregation, seeding) are never checked.
* A binding's ``roleRef`` cannot change on update (kube's "cannot change roleRef").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..machinery import status as st
from ..registry.resources import ResourceInfo
from ..registry.strategy import Cause, DefaultStrategy, StrategyRegistry
from .authentication import CURRENT_USER, UserInfo
from .authorization import RequestAttributes
from .rbac import GROUP, SUPERUSER_GROUP, PolicyRule, RBACAuthorizer, rules_of

__all__ = ["FULL_AUTHORITY", "RBACStrategy", "binding_causes", "confirm_no_escalation", "covers", "install",
           "role_causes"]

FULL_AUTHORITY = (PolicyRule(verbs=("*",), api_groups=("*",), resources=("*",)),
                  PolicyRule(verbs=("*",), non_resource_urls=("*",)))
_SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


# ------------------------------------------------------------------------------------------ coverage


def breakdown(rule: PolicyRule) -> list[PolicyRule]:
    """kube's ``BreakdownRule``: one rule per (group, resource, verb[, name]) and per (URL, verb)."""
    out = [PolicyRule(verbs=(v,), api_groups=(g,), resources=(r,), resource_names=(n,) if n else ())
           for g in rule.api_groups for r in rule.resources for v in rule.verbs
           for n in (rule.resource_names or ("",))]
    out.extend(PolicyRule(verbs=(v,), non_resource_urls=(u,)) for u in rule.non_resource_urls for v in rule.verbs)
    return out


def _resources_cover(owner: Sequence[str], servant: Sequence[str]) -> bool:
    if "*" in owner or all(r in owner for r in servant):
        return True
    for r in servant:
        _, slash, sub = r.partition("/")
        if not slash or ("*/" + sub) not in owner:
            return False
    return True


def _urls_cover(owner: Sequence[str], servant: Sequence[str]) -> bool:
    return all(any(o == u or (o.endswith("*") and u.startswith(o[:-1])) for o in owner) for u in servant)


def rule_covers(owner: PolicyRule, sub: PolicyRule) -> bool:
    """kube's ``ruleCovers`` for one broken-down rule."""
    if not ("*" in owner.verbs or all(v in owner.verbs for v in sub.verbs)):
        return False
    if not ("*" in owner.api_groups or all(g in owner.api_groups for g in sub.api_groups)):
        return False
    if not _resources_cover(owner.resources, sub.resources) or not _urls_cover(owner.non_resource_urls,
                                                                                 sub.non_resource_urls):
        return False
    if not owner.resource_names:
        return True
    return bool(sub.resource_names) and all(n in owner.resource_names for n in sub.resource_names)


def covers(owner: Iterable[PolicyRule], servant: Iterable[PolicyRule]) -> tuple[bool, list[PolicyRule]]:
    """(owner covers servant, the broken-down servant rules it does not cover)."""
    owner = list(owner)
    missing = [s for rule in servant for s in breakdown(rule) if not any(rule_covers(o, s) for o in owner)]
    return not missing, missing


def compact(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """kube's ``CompactRules``: simple rules on one (group, resource) without names merge their verbs."""
    merged: dict[tuple[str, str], list[str]] = {}
    out: list[PolicyRule] = []
    for r in rules:
        if len(r.api_groups) == 1 and len(r.resources) == 1 and not r.resource_names and not r.non_resource_urls:
            verbs = merged.setdefault((r.api_groups[0], r.resources[0]), [])
            verbs.extend(v for v in r.verbs if v not in verbs)
        else:
            out.append(r)
    out.extend(PolicyRule(verbs=tuple(v), api_groups=(g,), resources=(res,)) for (g, res), v in merged.items())
    return out


def _go_strings(values: Iterable[str]) -> str:
    return "[" + " ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def confirm_no_escalation(authz: RBACAuthorizer, user: UserInfo, namespace: str,
                          rules: Sequence[PolicyRule]) -> str | None:
    """None when ``user`` holds ``rules`` in ``namespace``; otherwise kube's explanation."""
    owner, errors = authz.rules_for(user, namespace)
    ok, missing = covers(owner, rules)
    if ok:
        return None
    described = sorted({r.compact() for r in compact(missing)})
    msg = (f"user {_go_strings([user.name])[1:-1]} (groups={_go_strings(user.groups)}) is attempting to grant "
           "RBAC permissions not currently held:\n" + "\n".join(described))
    if errors:
        msg += f"; resolution errors: [{', '.join(errors)}]"
    return msg


# ------------------------------------------------------------------------------------------ validation


def _cause(field: str, message: str, reason: str = "FieldValueInvalid") -> Cause:
    return {"reason": reason, "field": field, "message": message}


def _rule_causes(rules: Any, namespaced: bool) -> list[Cause]:
    if rules is None:
        return []
    if not isinstance(rules, list):
        return [_cause("rules", "Invalid value: must be a list")]
    causes: list[Cause] = []
    for i, r in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(r, Mapping):
            causes.append(_cause(where, "Invalid value: must be an object"))
            continue
        for key in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"):
            value = r.get(key)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                causes.append(_cause(f"{where}.{key}", "Invalid value: must be a list of strings"))
        if not r.get("verbs"):
            causes.append(_cause(f"{where}.verbs", "Required value: verbs must contain at least one value",
                                 "FieldValueRequired"))
        urls = r.get("nonResourceURLs")
        if urls:
            if namespaced:
                causes.append(_cause(f"{where}.nonResourceURLs",
                                     f"Invalid value: {_go_strings(urls)}: namespaced rules cannot apply to "
                                     "non-resource URLs"))
            if r.get("apiGroups") or r.get("resources"):
                causes.append(_cause(f"{where}.nonResourceURLs",
                                     f"Invalid value: {_go_strings(urls)}: rules cannot apply to both regular "
                                     "resources and non-resource URLs"))
            continue
        if not r.get("apiGroups"):
            causes.append(_cause(f"{where}.apiGroups",
                                 "Required value: resource rules must supply at least one api group",
                                 "FieldValueRequired"))
        if not r.get("resources"):
            causes.append(_cause(f"{where}.resources",
                                 "Required value: resource rules must supply at least one resource",
                                 "FieldValueRequired"))
    return causes


def role_causes(info: ResourceInfo, obj: Mapping[str, Any]) -> list[Cause]:
    """kube's Role/ClusterRole validation of ``rules``."""
    return _rule_causes(obj.get("rules"), info.namespaced)


def binding_causes(info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """kube's RoleBinding/ClusterRoleBinding validation: roleRef (immutable) and subjects."""
    causes: list[Cause] = []
    ref = obj.get("roleRef")
    kinds = ("Role", "ClusterRole") if info.namespaced else ("ClusterRole",)
    if not isinstance(ref, Mapping):
        causes.append(_cause("roleRef", "Required value", "FieldValueRequired"))
    else:
        if ref.get("apiGroup") != GROUP:
            causes.append(_cause("roleRef.apiGroup", f'Unsupported value: "{ref.get("apiGroup", "")}": supported '
                                 f'values: "{GROUP}"', "FieldValueNotSupported"))
        if ref.get("kind") not in kinds:
            causes.append(_cause("roleRef.kind", f'Unsupported value: "{ref.get("kind", "")}": supported values: '
                                 + ", ".join(f'"{k}"' for k in kinds), "FieldValueNotSupported"))
        if not isinstance(ref.get("name"), str) or not ref.get("name"):
            causes.append(_cause("roleRef.name", "Required value", "FieldValueRequired"))
    if old is not None and ref != old.get("roleRef"):
        causes.append(_cause("roleRef", f"Invalid value: {_describe_ref(ref)}: cannot change roleRef"))
    subjects = obj.get("subjects") or []
    for i, s in enumerate(subjects if isinstance(subjects, list) else [None]):
        where = f"subjects[{i}]"
        if not isinstance(s, Mapping):
            causes.append(_cause(where, "Invalid value: must be an object"))
            continue
        if not s.get("name"):
            causes.append(_cause(f"{where}.name", "Required value", "FieldValueRequired"))
        if s.get("kind") not in _SUBJECT_KINDS:
            causes.append(_cause(f"{where}.kind", f'Unsupported value: "{s.get("kind", "")}": supported values: '
                                 '"ServiceAccount", "User", "Group"', "FieldValueNotSupported"))
        elif s["kind"] == "ServiceAccount":
            if s.get("apiGroup"):
                causes.append(_cause(f"{where}.apiGroup", f'Unsupported value: "{s["apiGroup"]}": supported '
                                     'values: ""', "FieldValueNotSupported"))
            if not info.namespaced and not s.get("namespace"):
                causes.append(_cause(f"{where}.namespace", "Required value", "FieldValueRequired"))
        elif s.get("apiGroup") != GROUP:
            causes.append(_cause(f"{where}.apiGroup", f'Unsupported value: "{s.get("apiGroup", "")}": supported '
                                 f'values: "{GROUP}"', "FieldValueNotSupported"))
    return causes


def _describe_ref(ref: Any) -> str:
    if not isinstance(ref, Mapping):
        return "null"
    return f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", ' \
           f'Name:"{ref.get("name", "")}"}}'


# ------------------------------------------------------------------------------------------ escalation


def _gc_only(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """True when an update changes nothing but finalizers/ownerReferences (and server-set metadata)."""
    if old is None:
        return False
    skip = ("finalizers", "ownerReferences", "resourceVersion", "managedFields", "generation")

    def rest(o: Mapping[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in skip}
        return {**{k: v for k, v in o.items() if k != "metadata"}, "metadata": meta}

    return rest(obj) == rest(old)


def _attrs(verb: str, resource: str, namespace: str, name: str) -> RequestAttributes:
    return RequestAttributes(verb=verb, path="", resource_request=True, api_group=GROUP, api_version="v1",
                             namespace=namespace, resource=resource, name=name)


def check_role(authz: RBACAuthorizer, info: ResourceInfo, obj: Mapping[str, Any],
               old: Mapping[str, Any] | None) -> None:
    """Refuse (403) a Role/ClusterRole write that grants more than the request's user holds."""
    user = CURRENT_USER.get()
    if user is None or SUPERUSER_GROUP in user.groups or _gc_only(obj, old):
        return
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace", "") if info.namespaced else "", meta.get("name", "")
    if authz.allows(user, _attrs("escalate", info.plural, namespace, name if old is not None else "")):
        return
    why = confirm_no_escalation(authz, user, namespace, rules_of(obj))
    if why is None and not info.namespaced and (obj.get("aggregationRule") or (old or {}).get("aggregationRule")):
        if confirm_no_escalation(authz, user, "", FULL_AUTHORITY) is not None:
            why = "must have cluster-admin privileges to use the aggregationRule"
    if why is not None:
        raise st.forbidden(info, name, why)


def check_binding(authz: RBACAuthorizer, info: ResourceInfo, obj: Mapping[str, Any],
                  old: Mapping[str, Any] | None) -> None:
    """Refuse (403) a binding to a role whose rules the request's user neither holds nor may ``bind``."""
    user = CURRENT_USER.get()
    if user is None or SUPERUSER_GROUP in user.groups or _gc_only(obj, old):
        return
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace", "") if info.namespaced else "", meta.get("name", "")
    ref = obj.get("roleRef") or {}
    resource = {"ClusterRole": "clusterroles", "Role": "roles"}.get(ref.get("kind", ""))
    if resource is None:
        return  # validation answers
    if authz.allows(user, _attrs("bind", resource, namespace, ref.get("name", ""))):
        return
    rules, error = authz.role_rules(ref, namespace)
    why = error or confirm_no_escalation(authz, user, namespace, rules)
    if why is not None:
        raise st.forbidden(info, name, why)


class RBACStrategy(DefaultStrategy):
    """The write rules of one RBAC kind: escalation checks in ``prepare_*`` (they run first), then validation."""

    def __init__(self, authz: RBACAuthorizer, binding: bool) -> None:
        self.authz = authz
        self.binding = binding

    def _check(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        (check_binding if self.binding else check_role)(self.authz, info, obj, old)

    def prepare_for_create(self, info: ResourceInfo, obj: dict[str, Any]) -> None:
        super().prepare_for_create(info, obj)
        self._check(info, obj, None)

    def prepare_for_update(self, info: ResourceInfo, obj: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_for_update(info, obj, old)
        self._check(info, obj, old)

    def validate(self, info: ResourceInfo, obj: Mapping[str, Any]) -> list[Cause]:
        return binding_causes(info, obj, None) if self.binding else role_causes(info, obj)

    def validate_update(self, info: ResourceInfo, obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
        return binding_causes(info, obj, old) if self.binding else role_causes(info, obj)


def install(strategies: StrategyRegistry, authz: RBACAuthorizer) -> None:
    """Use :class:`RBACStrategy` for the four RBAC kinds."""
    for plural in ("roles", "clusterroles"):
        strategies.register(GROUP, plural, RBACStrategy(authz, binding=False))
    for plural in ("rolebindings", "clusterrolebindings"):
        strategies.register(GROUP, plural, RBACStrategy(authz, binding=True))
