"""RBAC rule matching, the rule resolver over the watch cache, escalation coverage and aggregation (no server)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kinformer.server.auth.authentication import CURRENT_USER, UserInfo
from kinformer.server.auth.authorization import RequestAttributes, forbidden, parse_request
from kinformer.server.auth.bootstrappolicy import bootstrap_objects
from kinformer.server.auth.rbac import PREFIXES, PolicyRule, RBACAuthorizer, rule_allows
from kinformer.server.auth.rbacregistry import (
    FULL_AUTHORITY,
    binding_causes,
    check_binding,
    check_role,
    compact,
    confirm_no_escalation,
    covers,
    role_causes,
)
from kinformer.server.controllers.aggregation import aggregate_rules
from kinformer.server.machinery.status import StatusError
from kinformer.server.registry.resources import Registry
from kinformer.server.storage import open_storage
from kinformer.server.storage.watchcache import WatchCache, decode

RBAC = "rbac.authorization.k8s.io"
ALICE = UserInfo("alice", groups=("dev", "system:authenticated"))


def rule(verbs: list[str], groups: list[str] | None = None, resources: list[str] | None = None,
         names: list[str] | None = None, urls: list[str] | None = None) -> PolicyRule:
    return PolicyRule.from_dict({"verbs": verbs, "apiGroups": groups, "resources": resources,
                                 "resourceNames": names, "nonResourceURLs": urls})


def req(method: str, path: str, **query: str) -> RequestAttributes:
    return parse_request(method, path, query)


# -- rule matching --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("r", "method", "path", "allowed"), [
    (rule(["get"], [""], ["pods"]), "GET", "/api/v1/namespaces/a/pods/p", True),
    (rule(["get"], [""], ["pods"]), "GET", "/api/v1/namespaces/a/pods", False),  # list
    (rule(["list"], [""], ["pods"]), "GET", "/api/v1/namespaces/a/pods", True),
    (rule(["watch"], [""], ["pods"]), "GET", "/api/v1/watch/namespaces/a/pods", True),
    (rule(["get"], [""], ["pods"]), "GET", "/api/v1/namespaces/a/pods/p/status", False),  # bare plural
    (rule(["get"], [""], ["pods/status"]), "GET", "/api/v1/namespaces/a/pods/p/status", True),
    (rule(["get"], [""], ["pods/status"]), "GET", "/api/v1/namespaces/a/pods/p", False),
    (rule(["update"], ["*"], ["*/scale"]), "PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", True),
    (rule(["update"], ["*"], ["*/scale"]), "PUT", "/apis/apps/v1/namespaces/a/deployments/d", False),
    (rule(["*"], ["*"], ["*"]), "DELETE", "/apis/apps/v1/namespaces/a/deployments/d/status", True),
    (rule(["get"], ["apps"], ["deployments"]), "GET", "/apis/extensions/v1/namespaces/a/deployments/d", False),
    (rule(["get"], [""], ["configmaps"], ["x"]), "GET", "/api/v1/namespaces/a/configmaps/x", True),
    (rule(["get"], [""], ["configmaps"], ["x"]), "GET", "/api/v1/namespaces/a/configmaps/y", False),
    (rule(["list"], [""], ["configmaps"], ["x"]), "GET", "/api/v1/namespaces/a/configmaps", False),
    (rule(["deletecollection"], [""], ["configmaps"]), "DELETE", "/api/v1/namespaces/a/configmaps", True),
    (rule(["get"], urls=["/healthz"]), "GET", "/healthz", True),
    (rule(["get"], urls=["/healthz"]), "GET", "/healthz/etcd", False),
    (rule(["get"], urls=["/apis/*"]), "GET", "/apis/apps/v1", True),
    (rule(["get"], urls=["*"]), "GET", "/anything", True),
    (rule(["post"], urls=["/metrics"]), "GET", "/metrics", False),
    (rule(["get"], [""], ["pods"]), "GET", "/metrics", False),  # resource rules never grant paths
])
def test_rule_allows(r: PolicyRule, method: str, path: str, allowed: bool) -> None:
    assert rule_allows(req(method, path), r) is allowed


def test_list_pinned_to_one_name_matches_resource_names() -> None:
    r = rule(["list", "watch"], [""], ["configmaps"], ["x"])
    assert rule_allows(req("GET", "/api/v1/namespaces/a/configmaps", fieldSelector="metadata.name=x"), r)


def test_compact_string_is_kubes() -> None:
    assert rule(["get", "list"], ["apps"], ["deployments"]).compact() == \
        '{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}'
    assert rule(["get"], urls=["/metrics"]).compact() == '{NonResourceURLs:["/metrics"], Verbs:["get"]}'


# -- the resolver over a watch cache ---------------------------------------------------------------------


class FakeCluster:
    """A WatchCache (not started) whose buckets the test fills directly."""

    def __init__(self) -> None:
        self.cache = WatchCache(open_storage("memory"))
        self.rev = 1

    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        kind = obj["kind"]
        prefix = PREFIXES.get(kind) or f"/registry/core/{kind.lower()}s/"
        key = f"{prefix}{meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{prefix}{meta['name']}"
        self.rev += 1
        self.cache.bucket(prefix).objects[key] = decode(key, orjson.dumps(obj), self.rev)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        prefix = PREFIXES[kind]
        del self.cache.bucket(prefix).objects[f"{prefix}{namespace}/{name}" if namespace else f"{prefix}{name}"]


def role(name: str, rules: list[dict[str, Any]], namespace: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": "Role" if namespace else "ClusterRole", "metadata": meta, "rules": rules, **extra}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict[str, Any]],
            namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": "RoleBinding" if namespace else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name}, "subjects": subjects}


@pytest.fixture
def cluster() -> FakeCluster:
    c = FakeCluster()
    objects = bootstrap_objects()
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    for name in ("view", "edit", "admin"):  # what the aggregation controller does, innermost first
        roles[name]["rules"] = aggregate_rules(roles[name], roles)
    for obj in objects:
        c.put(obj)
    return c


def test_role_binding_grants_in_its_namespace_only(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    cluster.put(role("cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], "team-a"))
    cluster.put(binding("alice-cm", "Role", "cm", [{"kind": "User", "name": "alice"}], "team-a"))
    authz.invalidate()
    assert authz.allows(ALICE, req("GET", "/api/v1/namespaces/team-a/configmaps/x"))
    assert not authz.allows(ALICE, req("GET", "/api/v1/namespaces/team-b/configmaps/x"))
    assert not authz.allows(ALICE, req("GET", "/api/v1/configmaps"))
    assert not authz.allows(UserInfo("bob"), req("GET", "/api/v1/namespaces/team-a/configmaps/x"))


def test_cluster_role_in_a_role_binding_and_groups(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    cluster.put(binding("dev-view", "ClusterRole", "view", [{"kind": "Group", "name": "dev"}], "team-a"))
    authz.invalidate()
    assert authz.allows(ALICE, req("GET", "/apis/apps/v1/namespaces/team-a/deployments"))
    assert not authz.allows(ALICE, req("POST", "/apis/apps/v1/namespaces/team-a/deployments"))
    assert not authz.allows(ALICE, req("GET", "/apis/apps/v1/namespaces/team-b/deployments"))


def test_service_account_subjects_default_to_the_binding_namespace(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    cluster.put(role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], "ns"))
    cluster.put(binding("b", "Role", "r", [{"kind": "ServiceAccount", "name": "bot"}], "ns"))
    cluster.put(binding("c", "ClusterRole", "view", [{"kind": "ServiceAccount", "name": "bot"}]))  # no ns: none
    authz.invalidate()
    bot = UserInfo("system:serviceaccount:ns:bot", groups=("system:serviceaccounts",))
    assert authz.allows(bot, req("GET", "/api/v1/namespaces/ns/pods"))
    assert not authz.allows(bot, req("GET", "/api/v1/namespaces/other/pods"))
    assert not authz.allows(UserInfo("system:serviceaccount:other:bot"), req("GET", "/api/v1/namespaces/ns/pods"))
    assert authz.explain(bot, req("GET", "/api/v1/namespaces/ns/pods")) == \
        'RBAC: allowed by RoleBinding "b/ns" of Role "r" to ServiceAccount "bot/ns"'
    assert authz.explain(bot, req("DELETE", "/api/v1/namespaces/ns/pods/p")) == ""


def test_decisions_follow_cache_changes(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    a = req("GET", "/api/v1/namespaces/x/secrets")
    assert not authz.allows(ALICE, a)
    cluster.put(role("s", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]))
    cluster.put(binding("s", "ClusterRole", "s", [{"kind": "User", "name": "alice"}]))
    authz.invalidate()  # what the cache listener does on every RBAC event
    assert authz.allows(ALICE, a)
    cluster.delete("ClusterRole", "s")
    authz.invalidate()
    allowed, reason = authz.authorize(ALICE, a)
    assert not allowed and reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "s" not found'
    assert 'in the namespace "x": RBAC: clusterrole' in forbidden(ALICE, a, reason).message


def test_bootstrap_bindings(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    anonymous = UserInfo("system:anonymous", groups=("system:unauthenticated",))
    user = UserInfo("u", groups=("system:authenticated",))
    assert authz.allows(anonymous, req("GET", "/healthz")) and authz.allows(anonymous, req("GET", "/version"))
    assert not authz.allows(anonymous, req("GET", "/api"))
    assert authz.allows(user, req("GET", "/apis/apps/v1")) and authz.allows(user, req("GET", "/openapi/v2"))
    assert authz.allows(user, req("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"))
    assert authz.allows(user, req("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews"))
    assert not authz.allows(user, req("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"))
    assert not authz.allows(user, req("GET", "/metrics"))
    assert authz.allows(UserInfo("x", groups=("system:masters",)), req("DELETE", "/api/v1/nodes"))
    rules, _ = authz.rules_for(UserInfo("m", groups=("system:masters",)), "")
    assert rule(["*"], ["*"], ["*"]) in rules  # cluster-admin through its binding


def test_the_certificate_controller_may_sign_for_the_kubernetes_io_signers(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    controller = UserInfo("system:serviceaccount:kube-system:certificate-controller",
                          groups=("system:serviceaccounts", "system:serviceaccounts:kube-system"))

    def signer(verb: str, name: str) -> RequestAttributes:
        return RequestAttributes(verb=verb, path="", resource_request=True, api_group="certificates.k8s.io",
                                 api_version="*", resource="signers", name=name)

    for name in ("kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
                 "kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown"):
        assert authz.allows(controller, signer("sign", name))
    assert authz.allows(controller, signer("approve", "kubernetes.io/kube-apiserver-client-kubelet"))
    assert not authz.allows(controller, signer("approve", "kubernetes.io/kube-apiserver-client"))
    assert not authz.allows(controller, signer("sign", "example.com/custom"))
    assert authz.allows(controller, req("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/x/status"))


def test_aggregated_roles_collect_labelled_rules() -> None:
    roles = {o["metadata"]["name"]: o for o in bootstrap_objects() if o["kind"] == "ClusterRole"}
    view = aggregate_rules(roles["view"], roles)
    edit = aggregate_rules(roles["edit"], roles)
    admin = aggregate_rules(roles["admin"], roles)
    assert view == roles["system:aggregate-to-view"]["rules"]
    assert all(r in edit for r in roles["system:aggregate-to-edit"]["rules"])
    assert all(r in admin for r in roles["system:aggregate-to-admin"]["rules"])
    assert aggregate_rules(roles["cluster-admin"], roles) is None
    extra = role("crd-viewer", [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}],
                 metadata={"name": "crd-viewer", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}})
    roles["crd-viewer"] = extra
    assert extra["rules"][0] in aggregate_rules(roles["view"], roles)  # type: ignore[operator]


# -- escalation ------------------------------------------------------------------------------------------


def test_covers_breaks_rules_down() -> None:
    owner = [rule(["get", "list"], [""], ["pods", "configmaps"]), rule(["*"], ["apps"], ["*/scale"]),
             rule(["get"], [""], ["secrets"], ["one"]), rule(["get"], urls=["/logs/*"])]
    assert covers(owner, [rule(["get"], [""], ["pods"])])[0]
    assert covers(owner, [rule(["update"], ["apps"], ["deployments/scale"])])[0]
    assert covers(owner, [rule(["get"], [""], ["secrets"], ["one"])])[0]
    assert covers(owner, [rule(["get"], urls=["/logs/a", "/logs/*"])])[0]
    ok, missing = covers(owner, [rule(["get", "delete"], [""], ["pods", "secrets"])])
    assert not ok
    assert [m.compact() for m in compact(missing)] == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}',
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}']
    assert not covers(owner, [rule(["get"], [""], ["secrets"])])[0]  # a named owner never covers every name
    assert covers(FULL_AUTHORITY, [rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])])[0]


def _info(plural: str) -> Any:
    info = Registry().get(RBAC, "v1", plural)
    assert info is not None
    return info


def test_escalation_checks(cluster: FakeCluster) -> None:
    authz = RBACAuthorizer(cluster.cache)
    cluster.put(role("cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}], "a"))
    cluster.put(binding("alice-cm", "Role", "cm", [{"kind": "User", "name": "alice"}], "a"))
    authz.invalidate()
    held = role("r", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], "a")
    more = role("r", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}], "a")
    token = CURRENT_USER.set(ALICE)
    try:
        check_role(authz, _info("roles"), held, None)
        with pytest.raises(StatusError) as err:
            check_role(authz, _info("roles"), more, None)
        assert err.value.code == 403
        assert err.value.message == (
            'roles.rbac.authorization.k8s.io "r" is forbidden: user "alice" (groups=["dev" "system:authenticated"]) '
            'is attempting to grant RBAC permissions not currently held:\n'
            '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')
        with pytest.raises(StatusError):  # the same rules in another namespace are not held there
            check_role(authz, _info("roles"), {**held, "metadata": {"name": "r", "namespace": "b"}}, None)
        check_binding(authz, _info("rolebindings"), binding("x", "Role", "cm", [], "a"), None)
        with pytest.raises(StatusError, match="not currently held"):
            check_binding(authz, _info("rolebindings"), binding("x", "ClusterRole", "edit", [], "a"), None)
        with pytest.raises(StatusError, match=r'clusterrole\.rbac\.authorization\.k8s\.io "nope" not found'):
            check_binding(authz, _info("rolebindings"), binding("x", "ClusterRole", "nope", [], "a"), None)
        # escalate / bind verbs lift the checks
        cluster.put(role("delegate", [{"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]},
                                      {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"],
                                       "resourceNames": ["edit"]}]))
        cluster.put(binding("alice-delegate", "ClusterRole", "delegate", [{"kind": "User", "name": "alice"}], "a"))
        authz.invalidate()
        check_role(authz, _info("roles"), more, None)
        check_binding(authz, _info("rolebindings"), binding("x", "ClusterRole", "edit", [], "a"), None)
        with pytest.raises(StatusError):
            check_binding(authz, _info("rolebindings"), binding("x", "ClusterRole", "admin", [], "a"), None)
        aggregated = role("agg", [], aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]})
        with pytest.raises(StatusError, match="must have cluster-admin privileges to use the aggregationRule"):
            check_role(authz, _info("clusterroles"), aggregated, None)
        # an update touching only finalizers is never checked
        with_fin = {**more, "metadata": {**more["metadata"], "finalizers": ["x"]}}
        check_role(authz, _info("roles"), with_fin, more)
    finally:
        CURRENT_USER.reset(token)
    check_role(authz, _info("roles"), more, None)  # server-internal writes: no user, no check
    assert confirm_no_escalation(authz, UserInfo("m", groups=("system:masters",)), "", FULL_AUTHORITY) is None


def test_rbac_validation_causes() -> None:
    roles, crbs = _info("roles"), _info("clusterrolebindings")
    assert role_causes(roles, role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], "a")) == []
    fields = [c["field"] for c in role_causes(roles, role("r", [{"resources": ["pods"]},
                                                                {"verbs": ["get"], "nonResourceURLs": ["/x"]}], "a"))]
    assert fields == ["rules[0].verbs", "rules[0].apiGroups", "rules[1].nonResourceURLs"]
    good = binding("b", "ClusterRole", "view", [{"kind": "Group", "name": "g", "apiGroup": RBAC}])
    assert binding_causes(crbs, good, None) == []
    bad = binding("b", "Role", "", [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "r"}])
    assert [c["field"] for c in binding_causes(crbs, bad, None)] == [
        "roleRef.kind", "roleRef.name", "subjects[0].namespace", "subjects[1].kind"]
    changed = binding("b", "ClusterRole", "edit", good["subjects"])
    causes = binding_causes(crbs, changed, good)
    assert causes[0]["field"] == "roleRef" and causes[0]["message"].endswith("cannot change roleRef")
