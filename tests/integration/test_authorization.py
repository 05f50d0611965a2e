"""RBAC over HTTP: roles and bindings changed at run time, escalation prevention, aggregation, the review APIs
and impersonation, on an in-process server over SQLite, and two replicas over etcd when the binary exists."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from test_etcd_storage import ETCD, start_single

from kinformer.server import APIServer
from kinformer.server.auth.authentication import UserInfo
from testlib import call, wait_until

RBAC = "rbac.authorization.k8s.io"
RBAC_V1 = f"/apis/{RBAC}/v1"


async def req(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
              user: str | None = None, groups: tuple[str, ...] = (), headers: Any = ()) -> tuple[int, Any]:
    """``call`` with impersonation headers (the in-process server's admin may impersonate anyone)."""
    hdrs: list[tuple[str, str]] = [("Content-Type", "application/json"), *headers]
    if user is not None:
        hdrs += [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)]
    async with http.request(method, path, data=orjson.dumps(body) if body is not None else None,
                            headers=hdrs) as r:
        return r.status, orjson.loads(await r.read())


def role(name: str, rules: list[dict[str, Any]], namespace: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {}), **extra.pop("meta", {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role" if namespace else "ClusterRole", "metadata": meta,
            "rules": rules, **extra}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict[str, Any]],
            namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
            "subjects": subjects}


def user(name: str) -> dict[str, str]:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


def rules_path(kind: str, namespace: str = "") -> str:
    plural = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
              "ClusterRoleBinding": "clusterrolebindings"}[kind]
    return f"{RBAC_V1}/namespaces/{namespace}/{plural}" if namespace else f"{RBAC_V1}/{plural}"


async def create(http: aiohttp.ClientSession, obj: dict[str, Any], **kw: Any) -> tuple[int, Any]:
    return await req(http, "POST", rules_path(obj["kind"], obj["metadata"].get("namespace", "")), obj, **kw)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[APIServer]:
    async with APIServer(storage=f"sqlite:///{tmp_path / 'db.sqlite'}") as s:
        yield s


@pytest.fixture
async def http(server: APIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        for ns in ("team-a", "team-b"):
            assert (await call(session, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}}))[0] == 201
        yield session


CM_RULE = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}


async def test_role_binding_grants_exactly_its_rules_in_its_namespace(http: aiohttp.ClientSession) -> None:
    assert (await create(http, role("cm", [CM_RULE], "team-a")))[0] == 201
    code, body = await req(http, "GET", "/api/v1/namespaces/team-a/configmaps", user="alice")
    assert code == 403 and body["message"] == ('configmaps is forbidden: User "alice" cannot list resource '
                                               '"configmaps" in API group "" in the namespace "team-a"')
    assert (await create(http, binding("alice", "Role", "cm", [user("alice")], "team-a")))[0] == 201
    # allowed at once: a denial is re-decided once the cache holds every committed write
    assert (await req(http, "GET", "/api/v1/namespaces/team-a/configmaps", user="alice"))[0] == 200
    cm = {"metadata": {"name": "c"}, "data": {"k": "v"}}
    assert (await req(http, "POST", "/api/v1/namespaces/team-a/configmaps", cm, user="alice"))[0] == 201
    for method, path in (("DELETE", "/api/v1/namespaces/team-a/configmaps/c"),
                         ("GET", "/api/v1/namespaces/team-b/configmaps"), ("GET", "/api/v1/configmaps"),
                         ("GET", "/api/v1/namespaces/team-a/secrets")):
        assert (await req(http, method, path, user="alice"))[0] == 403, (method, path)
    code, body = await req(http, "GET", "/api/v1/namespaces/team-b/configmaps/c", user="alice")
    assert body["message"] == ('configmaps "c" is forbidden: User "alice" cannot get resource "configmaps" in API '
                               'group "" in the namespace "team-b"')
    # revoking follows the watch cache
    assert (await req(http, "DELETE", f"{rules_path('RoleBinding', 'team-a')}/alice"))[0] == 200

    async def revoked() -> bool:
        return (await req(http, "GET", "/api/v1/namespaces/team-a/configmaps", user="alice"))[0] == 403

    await wait_until(revoked, what="the deleted binding to stop granting")


async def test_cluster_roles_groups_and_resource_names(http: aiohttp.ClientSession) -> None:
    one = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"], "resourceNames": ["one"]}
    assert (await create(http, role("one-cm", [one])))[0] == 201
    assert (await create(http, binding("dev-one", "ClusterRole", "one-cm", [
        {"apiGroup": RBAC, "kind": "Group", "name": "dev"}])))[0] == 201
    assert (await create(http, binding("dev-view", "ClusterRole", "view", [
        {"apiGroup": RBAC, "kind": "Group", "name": "dev"}], "team-b")))[0] == 201
    for name in ("one", "two"):
        await req(http, "POST", "/api/v1/namespaces/team-a/configmaps", {"metadata": {"name": name}})
    assert (await req(http, "GET", "/api/v1/namespaces/team-a/configmaps/one", user="bob", groups=("dev",)))[0] == 200
    assert (await req(http, "GET", "/api/v1/namespaces/team-a/configmaps/two", user="bob", groups=("dev",)))[0] == 403
    assert (await req(http, "GET", "/api/v1/namespaces/team-a/configmaps/one", user="bob"))[0] == 403
    # the aggregated "view" role, bound in team-b only
    assert (await req(http, "GET", "/apis/apps/v1/namespaces/team-b/deployments", user="bob", groups=("dev",)))[0] \
        == 200
    assert (await req(http, "GET", "/apis/apps/v1/namespaces/team-a/deployments", user="bob", groups=("dev",)))[0] \
        == 403
    assert (await req(http, "GET", "/api/v1/namespaces/team-b/secrets", user="bob", groups=("dev",)))[0] == 403


async def test_escalation_is_refused_unless_held_or_escalate_or_bind(http: aiohttp.ClientSession) -> None:
    assert (await create(http, binding("carol-edit", "ClusterRole", "admin", [user("carol")], "team-a")))[0] == 201
    held = role("cm", [CM_RULE], "team-a")
    assert (await create(http, held, user="carol"))[0] == 201
    nodes = role("nodes", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}], "team-a")
    code, body = await create(http, nodes, user="carol")
    assert code == 403
    assert body["message"] == (
        'roles.rbac.authorization.k8s.io "nodes" is forbidden: user "carol" (groups=["system:authenticated"]) is '
        'attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}')
    assert body["details"] == {"name": "nodes", "group": RBAC, "kind": "roles"}
    code, body = await create(http, binding("x", "ClusterRole", "cluster-admin", [user("carol")], "team-a"),
                              user="carol")
    assert code == 403 and "is attempting to grant RBAC permissions not currently held" in body["message"]
    assert (await create(http, binding("y", "ClusterRole", "view", [user("dan")], "team-a"), user="carol"))[0] == 201
    assert (await create(http, held | {"metadata": {"name": "cm", "namespace": "team-b"}}, user="carol"))[0] == 403
    # escalate and bind, granted by the admin
    delegate = role("delegate", [{"apiGroups": [RBAC], "resources": ["roles"], "verbs": ["escalate"]},
                                 {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"],
                                  "resourceNames": ["cluster-admin"]}])
    assert (await create(http, delegate))[0] == 201
    assert (await create(http, binding("carol-delegate", "ClusterRole", "delegate", [user("carol")], "team-a")))[0] \
        == 201
    assert (await create(http, nodes, user="carol"))[0] == 201
    assert (await create(http, binding("x", "ClusterRole", "cluster-admin", [user("carol")], "team-a"),
                         user="carol"))[0] == 201
    # roleRef is immutable
    changed = binding("y", "ClusterRole", "edit", [user("dan")], "team-a")
    code, body = await req(http, "PUT", f"{rules_path('RoleBinding', 'team-a')}/y", changed)
    assert code == 422 and "cannot change roleRef" in body["message"]
    bad = role("bad", [{"apiGroups": [""], "resources": ["pods"]}], "team-a")
    code, body = await create(http, bad)
    assert code == 422 and "rules[0].verbs" in body["message"]


async def test_aggregation_follows_labelled_cluster_roles(http: aiohttp.ClientSession) -> None:
    widget = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}
    labelled = role("widget-viewer", [widget], meta={"labels": {f"{RBAC}/aggregate-to-view": "true"}})
    assert (await create(http, labelled))[0] == 201

    async def aggregated(name: str) -> bool:
        code, body = await req(http, "GET", f"{rules_path('ClusterRole')}/{name}")
        return code == 200 and widget in (body.get("rules") or [])

    for name in ("view", "edit", "admin"):  # view -> edit -> admin, as in kube
        await wait_until(lambda n=name: aggregated(n), what=f"{name} to aggregate the widget rules")
    code, body = await create(http, role("mine", [], aggregationRule={"clusterRoleSelectors": [
        {"matchLabels": {"x": "y"}}]}), user="erin")
    assert code == 403  # erin may not create cluster roles at all
    assert (await create(http, binding("erin-roles", "ClusterRole", "cr-writer", [user("erin")])))[0] == 201
    writer = role("cr-writer", [{"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["create"]}])
    assert (await create(http, writer))[0] == 201
    code, body = await create(http, role("mine", [], aggregationRule={"clusterRoleSelectors": [
        {"matchLabels": {"x": "y"}}]}), user="erin")
    assert code == 403 and body["message"].endswith("must have cluster-admin privileges to use the aggregationRule")


async def test_access_reviews(http: aiohttp.ClientSession) -> None:
    assert (await create(http, role("cm", [CM_RULE], "team-a")))[0] == 201
    assert (await create(http, binding("alice", "Role", "cm", [user("alice")], "team-a")))[0] == 201
    ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

    def attrs(verb: str, resource: str, ns: str = "team-a", **more: str) -> dict[str, Any]:
        return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns, **more}}}

    code, body = await req(http, "POST", ssar, attrs("list", "configmaps"), user="alice")
    assert code == 201 and body["status"] == {
        "allowed": True, "reason": 'RBAC: allowed by RoleBinding "alice/team-a" of Role "cm" to User "alice"'}
    assert body["kind"] == "SelfSubjectAccessReview" and body["metadata"] == {"creationTimestamp": None}
    assert (await req(http, "POST", ssar, attrs("delete", "configmaps"), user="alice"))[1]["status"]["allowed"] is False
    assert (await req(http, "POST", ssar, attrs("list", "configmaps", "team-b"), user="alice"))[1]["status"] == \
        {"allowed": False}
    url = {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/api"}}}
    assert (await req(http, "POST", ssar, url, user="alice"))[1]["status"] == {
        "allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole '
                                   '"system:discovery" to Group "system:authenticated"'}
    code, body = await req(http, "POST", ssar, {"spec": {}}, user="alice")
    assert code == 422 and "exactly one of nonResourceAttributes or resourceAttributes" in body["message"]
    assert (await req(http, "GET", ssar))[0] == 405
    # subject access reviews: for system:auth-delegator (and the admin)
    sar = {"spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "configmaps",
                                                            "namespace": "team-a"}}}
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    assert (await req(http, "POST", path, sar))[1]["status"]["allowed"] is True
    assert (await req(http, "POST", path, sar, user="alice"))[0] == 403
    code, body = await req(http, "POST", path, {"spec": {"resourceAttributes": {"verb": "get"}}})
    assert code == 422 and "at least one of user or group must be specified" in body["message"]
    for field, value in (("groups", "dev"), ("groups", 1), ("user", ["a"]), ("extra", {"k": "v"})):
        code, body = await req(http, "POST", path, {"spec": {"user": "a", field: value,
                                                             "resourceAttributes": {"verb": "get"}}})
        assert code == 422 and f"spec.{field}" in body["message"], (field, value)
    local = "/apis/authorization.k8s.io/v1/namespaces/team-b/localsubjectaccessreviews"
    code, body = await req(http, "POST", local, sar)
    assert code == 400 and body["message"] == "spec.resourceAttributes.namespace must match namespace: team-b"
    sar["spec"]["resourceAttributes"]["namespace"] = "team-b"
    code, body = await req(http, "POST", local, sar)
    assert code == 201 and body["status"]["allowed"] is False and body["metadata"]["namespace"] == "team-b"
    # rules review
    code, body = await req(http, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                           {"spec": {"namespace": "team-a"}}, user="alice")
    assert code == 201 and body["status"]["incomplete"] is False
    assert {"verbs": ["get", "list", "create"], "apiGroups": [""], "resources": ["configmaps"]} in \
        body["status"]["resourceRules"]
    assert any("/api" in r["nonResourceURLs"] for r in body["status"]["nonResourceRules"])


async def test_self_subject_review_and_impersonation(server: APIServer, http: aiohttp.ClientSession,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    code, body = await req(http, "POST", whoami, {})
    assert code == 201 and body["status"]["userInfo"] == {
        "username": "kinformer-admin", "uid": "kinformer-admin", "groups": ["system:masters", "system:authenticated"]}
    caplog.set_level(logging.INFO, logger="kinformer.server.audit")
    hdrs = [("Impersonate-User", "alice"), ("Impersonate-Group", "dev"), ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "u-1"), ("Impersonate-Extra-Scopes", "a"), ("Impersonate-Extra-Scopes", "b"),
            ("Impersonate-Extra-Acme.com%2Fteam", "x")]
    body = (await req(http, "POST", whoami, {}, headers=hdrs))[1]
    assert body["status"]["userInfo"] == {"username": "alice", "uid": "u-1",
                                          "groups": ["dev", "ops", "system:authenticated"],
                                          "extra": {"scopes": ["a", "b"], "acme.com/team": ["x"]}}
    assert any("kinformer-admin is acting as alice" in r.getMessage() for r in caplog.records)
    body = (await req(http, "POST", whoami, {}, user="system:serviceaccount:team-a:bot"))[1]
    assert body["status"]["userInfo"]["groups"] == ["system:serviceaccounts", "system:serviceaccounts:team-a",
                                                    "system:authenticated"]
    code, body = await req(http, "GET", "/api/v1/namespaces", headers=[("Impersonate-Group", "dev")])
    assert code == 400 and "without impersonating a user" in body["message"]
    # alice (authenticated by a token) may not impersonate, until a role lets her impersonate exactly bob
    server.security.authenticator.add_token("alice-token", UserInfo("alice"))
    alice = [("Authorization", "Bearer alice-token")]
    code, body = await req(http, "POST", whoami, {}, headers=[*alice, ("Impersonate-User", "bob")])
    assert code == 403 and body["message"] == ('users "bob" is forbidden: User "alice" cannot impersonate resource '
                                               '"users" in API group "" at the cluster scope')
    imp = role("imp", [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]}])
    assert (await create(http, imp))[0] == 201
    assert (await create(http, binding("alice-imp", "ClusterRole", "imp", [user("alice")])))[0] == 201
    code, body = await req(http, "POST", whoami, {}, headers=[*alice, ("Impersonate-User", "bob")])
    assert code == 201 and body["status"]["userInfo"]["username"] == "bob"
    code, body = await req(http, "POST", whoami, {}, headers=[*alice, ("Impersonate-User", "carol")])
    assert code == 403 and body["message"].startswith('users "carol" is forbidden')
    code, body = await req(http, "POST", whoami, {}, headers=[*alice, ("Impersonate-User", "bob"),
                                                              ("Impersonate-Group", "system:masters")])
    assert code == 403 and body["message"] == ('groups "system:masters" is forbidden: User "alice" cannot '
                                               'impersonate resource "groups" in API group "" at the cluster scope')
    sa = ("Impersonate-User", "system:serviceaccount:a:b")
    code, body = await req(http, "POST", whoami, {}, headers=[*alice, sa])
    assert code == 403 and body["message"].startswith('serviceaccounts "b" is forbidden: User "alice" cannot '
                                                      'impersonate resource "serviceaccounts" in API group "" in '
                                                      'the namespace "a"')


@pytest.mark.skipif(ETCD is None, reason="etcd binary not found (apt-get install etcd-server)")
async def test_rbac_over_etcd_follows_changes_made_through_another_replica() -> None:
    member = start_single()
    try:
        await member.wait_healthy()
        storage = f"etcd://{member.endpoint}/rbac"
        async with APIServer(storage=storage) as one, APIServer(storage=storage) as two:
            async with aiohttp.ClientSession(base_url=one.url) as a, aiohttp.ClientSession(base_url=two.url) as b:
                assert (await create(a, role("cm", [CM_RULE], "default")))[0] == 201
                assert (await create(a, binding("alice", "Role", "cm", [user("alice")], "default")))[0] == 201
                assert (await req(b, "GET", "/api/v1/namespaces/default/configmaps", user="alice"))[0] == 200
                assert (await req(b, "GET", "/api/v1/namespaces/default/secrets", user="alice"))[0] == 403
                assert (await req(a, "DELETE", f"{rules_path('RoleBinding', 'default')}/alice"))[0] == 200

                async def revoked() -> bool:
                    return (await req(b, "GET", "/api/v1/namespaces/default/configmaps", user="alice"))[0] == 403

                await wait_until(revoked, what="replica two to see the binding deleted through replica one")
    finally:
        member.cleanup()
