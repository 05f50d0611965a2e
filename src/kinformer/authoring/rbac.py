"""A Manager's RBAC: the ClusterRole its controllers need, and the Role for its Leases.

Derived without contacting a server, as controller-gen derives it from ``+kubebuilder:rbac`` markers: each
controller's :meth:`~kinformer.controller.builder.Builder.access` (get/list/watch on what it watches; create/
update/patch/delete on what it owns or declares with ``.writes()``; the status and finalizers subresources
when declared), events.k8s.io Events (create/patch) when the Manager has an event recorder, TokenReviews and
SubjectAccessReviews when its metrics endpoint authenticates, and Leases (get/create/update, and list/watch/
delete for sharding) in the election namespace. Nothing broader: no wildcard, no verb not derived.

Invariant: rules are merged per (apiGroup, resource) and then grouped by identical verb sets, sorted, so the
output is stable for a given Manager.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kinformer.controller.builder import READ_VERBS, Access
from kinformer.controller.legacyevents import LegacyEventRecorder
from kinformer.kinds.rbac_v1 import ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject

if TYPE_CHECKING:
    from kinformer.controller.manager import Manager

__all__ = ["leader_election_role", "manager_cluster_role", "rbac_documents"]

#: ``resource`` as a builder spells it -> (API group, plural)
Resolve = Callable[[str], tuple[str, str]]

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_V1 = f"{RBAC_GROUP}/v1"
EVENTS = ("events.k8s.io", "events", ("create", "patch"))
CORE_EVENTS = ("", "events", ("create", "patch"))
ELECTION_VERBS = ("get", "create", "update")
SHARDING_VERBS = (*READ_VERBS, "create", "update", "patch", "delete")
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")

Grants = dict[tuple[str, str], set[str]]


def _grant(grants: Grants, group: str, resource: str, verbs: Iterable[str]) -> None:
    grants.setdefault((group, resource), set()).update(verbs)


def _rules(grants: Grants) -> list[PolicyRule]:
    by_verbs: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    for (group, resource), verbs in grants.items():
        by_verbs[(group, tuple(v for v in _VERB_ORDER if v in verbs))].append(resource)
    return [{"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
            for (group, verbs), resources in sorted(by_verbs.items())]


def _controller_grants(access: Iterable[Access], resolve: Resolve, grants: Grants) -> None:
    for a in access:
        group, plural = resolve(a.resource)
        _grant(grants, group, f"{plural}/{a.subresource}" if a.subresource else plural, a.verbs)


def manager_cluster_role(mgr: Manager, resolve: Resolve, name: str) -> ClusterRole:
    """The ClusterRole ``name`` granting what ``mgr``'s controllers, recorders and metrics endpoint use."""
    grants: Grants = {}
    for builder in mgr.builders:
        _controller_grants(builder.access(), resolve, grants)
    for recorder in mgr.event_recorders:
        _grant(grants, *(CORE_EVENTS if isinstance(recorder, LegacyEventRecorder) else EVENTS))
    if mgr.metrics_auth is not None:
        _grant(grants, "authentication.k8s.io", "tokenreviews", ("create",))
        _grant(grants, "authorization.k8s.io", "subjectaccessreviews", ("create",))
    return {"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": {"name": name},
            "rules": _rules(grants)}


def leader_election_role(mgr: Manager, name: str) -> Role | None:
    """The Role for the Leases of ``mgr``'s leader election or sharding (None when it uses neither)."""
    verbs: tuple[str, ...]
    if mgr.leader_election is not None:
        namespace, verbs = mgr.leader_election.lease_namespace, ELECTION_VERBS
    elif mgr.sharding is not None:
        namespace, verbs = mgr.sharding.namespace, SHARDING_VERBS
    else:
        return None
    return {"apiVersion": RBAC_V1, "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": list(verbs)}]}


def _subjects(service_account: str) -> list[Subject]:
    namespace, _, name = service_account.partition("/")
    return [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]


def _cluster_binding(role: ClusterRole, service_account: str) -> ClusterRoleBinding:
    name = role["metadata"]["name"]
    return {"apiVersion": RBAC_V1, "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": _subjects(service_account)}


def _binding(role: Role, service_account: str) -> RoleBinding:
    meta = role["metadata"]
    return {"apiVersion": RBAC_V1, "kind": "RoleBinding", "metadata": {"name": meta["name"],
                                                                      "namespace": meta["namespace"]},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": meta["name"]},
            "subjects": _subjects(service_account)}


def rbac_documents(mgr: Manager, resolve: Resolve, *, name: str = "manager",
                   service_account: str | None = None) -> list[ClusterRole | Role | ClusterRoleBinding | RoleBinding]:
    """The ClusterRole ``<name>-role``, the Role ``<name>-leader-election-role`` when needed, and, given
    ``service_account`` ("namespace/name"), the bindings of both to it."""
    if service_account is not None:
        namespace, _, sa = service_account.partition("/")
        if not namespace or not sa:
            raise ValueError(f'service_account must be "namespace/name", got {service_account!r}')
    cluster_role = manager_cluster_role(mgr, resolve, f"{name}-role")
    election = leader_election_role(mgr, f"{name}-leader-election-role")
    docs: list[ClusterRole | Role | ClusterRoleBinding | RoleBinding] = [cluster_role]
    if election is not None:
        docs.append(election)
    if service_account is not None:
        docs.append(_cluster_binding(cluster_role, service_account))
        if election is not None:
            docs.append(_binding(election, service_account))
    return docs
