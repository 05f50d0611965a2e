"""Security and limits of the embedded API server: client certificates, authorization, watch and rate limits,
``kinformer serve`` with a client-certificate kubeconfig (kubectl), and secrets kept out of every log."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import logging
import os
import shutil
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.errors import Forbidden, ServerError, TooManyRequests, Unauthorized
from kinformer.server import APIServer
from kinformer.server.auth.authentication import UserInfo, user_from_peercert
from kinformer.server.auth.authorization import RequestAttributes, parse_request
from kinformer.server.auth.bootstrappolicy import load_seed_file
from kinformer.server.cli import DataDirInUse, add_arguments, lock_data_dir, main, write_kubeconfig
from kinformer.server.filters.limits import RateLimiter, WatchLimiter
from kinformer.tls import CertPaths, client_ssl_context, ensure_certs, issue_client_cert
from testlib import wait_until

ADMIN, ALICE, BOB, CAROL, DAVE, ERIN = "t-admin", "t-alice", "t-bob", "t-carol", "t-dave", "t-erin"
TOKENS = {
    ADMIN: UserInfo("admin", groups=("system:masters",)),
    ALICE: UserInfo("alice", groups=("team-a",)),
    BOB: UserInfo("bob"),
    CAROL: UserInfo("carol", groups=("watchers", "monitoring")),
    DAVE: UserInfo("dave"),
    ERIN: UserInfo("erin"),
}
# the same users, all in system:masters (for the tests of limits)
MASTERS = {token: UserInfo(user.name, groups=("system:masters",)) for token, user in TOKENS.items()}
POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmap-editor, namespace: team-a}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-configmaps, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: configmap-watcher}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: watchers, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: configmap-watcher}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: watchers}]
---
apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: pod-status, namespace: team-a}
  rules:
  - {apiGroups: [""], resources: [pods/status], verbs: [get, update, patch]}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: dave-pod-status, namespace: team-a}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-status}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: deployer}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: ["*"]}
- {apiGroups: ["*"], resources: ["*/scale"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: erin-deployer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: deployer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: monitoring-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:monitoring}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: monitoring}]
"""


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _status(session: aiohttp.ClientSession, method: str, url: str, token: str | None = None,
                  body: Any = None) -> tuple[int, Any]:
    headers = _auth(token) if token else {}
    data = orjson.dumps(body) if body is not None else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    async with session.request(method, url, headers=headers, data=data) as resp:
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, raw.decode()


def _grant(subject: str, verb: str, resource: str, *, kind: str = "User", group: str = "") -> list[dict[str, Any]]:
    """A ClusterRole granting ``verb`` on ``resource`` and a ClusterRoleBinding of it to ``subject``."""
    name = f"{subject}-{verb}-{resource}"
    rbac = "rbac.authorization.k8s.io/v1"
    return [{"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": name},
             "rules": [{"apiGroups": [group], "resources": [resource], "verbs": [verb]}]},
            {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": name},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}]}]


def _configmap(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}


# -- request attributes and policies (no server) ------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ns/configmaps", {}, ("list", "", "ns", "configmaps", "", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", {"watch": "true"}, ("watch", "", "ns", "configmaps", "", "")),
    ("GET", "/api/v1/namespaces/ns/configmaps", {"watch": "false"}, ("list", "", "ns", "configmaps", "", "")),
    ("GET", "/api/v1/watch/namespaces/ns/configmaps/x", {}, ("watch", "", "ns", "configmaps", "", "x")),
    ("GET", "/api/v1/namespaces/ns/configmaps", {"watch": "1", "fieldSelector": "metadata.name=x"},
     ("watch", "", "ns", "configmaps", "", "x")),
    ("GET", "/api/v1/namespaces/ns/configmaps/x", {"watch": "true"}, ("get", "", "ns", "configmaps", "", "x")),
    ("HEAD", "/api/v1/namespaces/ns/configmaps/x", {}, ("get", "", "ns", "configmaps", "", "x")),
    ("POST", "/api/v1/namespaces/ns/configmaps", {}, ("create", "", "ns", "configmaps", "", "")),
    ("PUT", "/api/v1/namespaces/ns/pods/p/status", {}, ("update", "", "ns", "pods", "status", "p")),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", {}, ("patch", "apps", "ns", "deployments",
                                                                       "scale", "d")),
    ("DELETE", "/api/v1/namespaces/ns/configmaps", {}, ("deletecollection", "", "ns", "configmaps", "", "")),
    ("DELETE", "/api/v1/namespaces/ns/configmaps/x", {}, ("delete", "", "ns", "configmaps", "", "x")),
    ("GET", "/api/v1/configmaps", {}, ("list", "", "", "configmaps", "", "")),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "", "namespaces", "", "")),
    ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "ns", "namespaces", "", "ns")),
    ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "", "ns", "namespaces", "finalize", "ns")),
    ("GET", "/apis/example.com/v1/widgets", {}, ("list", "example.com", "", "widgets", "", "")),
])
def test_request_attributes_follow_kube(method: str, path: str, query: dict[str, str],
                                        expected: tuple[str, ...]) -> None:
    a = parse_request(method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.namespace, a.resource, a.subresource, a.name) == expected


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version",
                                  "/openapi/v2", "/metrics", "/healthz/ping"])
def test_non_resource_paths(path: str) -> None:
    assert parse_request("GET", path, {}) == RequestAttributes(verb="get", path=path)
    assert parse_request("POST", path, {}).verb == "post"


def test_load_seed_file_yaml_json_and_lists(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICY, encoding="utf-8")
    objects = load_seed_file(tmp_path / "p.yaml")
    assert [o["kind"] for o in objects][:4] == ["Role", "RoleBinding", "ClusterRole", "RoleBinding"]
    assert len(objects) == 9  # the List's two items included
    (tmp_path / "p.json").write_text(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}).decode(),
                                     encoding="utf-8")
    assert load_seed_file(tmp_path / "p.json") == objects
    for text, error in (("[{", "not valid JSON"), ('{"kind": "Pod", "apiVersion": "v1"}', "expected an rbac"),
                        ('{"kind": "Role", "apiVersion": "v1"}', "apiVersion must be"),
                        ('{"kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1"}', "metadata.name")):
        (tmp_path / "bad.json").write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=error):
            load_seed_file(tmp_path / "bad.json")


def test_rate_limiter_token_bucket() -> None:
    clock = FakeClock()
    rl = RateLimiter(qps=2, burst=3, clock=clock, max_clients=2)
    assert [rl.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert rl.acquire("a") == pytest.approx(0.5)
    assert rl.acquire("a") == pytest.approx(0.5)  # a refused request takes no token
    clock.step(0.5)
    assert rl.acquire("a") == 0.0 and rl.acquire("a") > 0
    assert rl.acquire("b") == 0.0
    clock.step(10)
    assert rl.acquire("c") == 0.0 and len(rl) <= 2  # idle, refilled buckets are dropped
    wl = WatchLimiter(1)
    assert wl.try_acquire("a") and not wl.try_acquire("a") and wl.try_acquire("b")
    wl.release("a")
    assert wl.open("a") == 0 and wl.try_acquire("a")


# -- client certificates ------------------------------------------------------------------------------


def _pem_pair(tmp: Path, name: str, pair: tuple[bytes, bytes]) -> tuple[str, str]:
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert.write_bytes(pair[0])
    key.write_bytes(pair[1])
    return str(cert), str(key)


def _tls_session(paths: CertPaths, cert: tuple[str, str] | None = None) -> aiohttp.ClientSession:
    ctx = client_ssl_context(paths)
    if cert is not None:
        ctx.load_cert_chain(*cert)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))


def test_issued_client_certificate_names_user_and_groups(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    paths = ensure_certs(tmp_path / "pki")
    cert_pem, key_pem = issue_client_cert(paths, "alice", ["dev", "ops", "dev"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(paths.ca_cert.read_bytes()))
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["alice"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["dev", "ops"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert b"PRIVATE KEY" in key_pem
    with pytest.raises(ValueError):
        issue_client_cert(paths, "")
    with pytest.raises(ValueError, match="no usable CA"):
        issue_client_cert(CertPaths(tmp_path / "none" / "ca.crt", paths.server_cert, paths.server_key), "x")
    assert user_from_peercert({"subject": ((("organizationName", "g"),), (("commonName", "u"),))}) == \
        UserInfo("u", groups=("g",))
    assert user_from_peercert(None) is None and user_from_peercert({"subject": ()}) is None


async def test_client_certificate_authentication(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "pki")
    policy = [*_grant("alice", "list", "namespaces"), *_grant("ops", "get", "namespaces", kind="Group")]
    alice = _pem_pair(tmp_path, "alice", issue_client_cert(paths, "alice", ["dev"]))
    bob = _pem_pair(tmp_path, "bob", issue_client_cert(paths, "bob", ["ops"]))
    foreign = _pem_pair(tmp_path, "eve", issue_client_cert(ensure_certs(tmp_path / "other"), "alice"))
    async with APIServer(tls=paths, client_ca=paths.ca_cert, tokens={"tok": "token-user"},
                         authorization_policy=policy) as server:
        ns_url = f"{server.url}/api/v1/namespaces"
        async with _tls_session(paths, alice) as session:
            code, body = await _status(session, "GET", ns_url)
            assert code == 200 and body["kind"] == "NamespaceList"
        async with _tls_session(paths, bob) as session:
            assert (await _status(session, "GET", ns_url + "/default"))[0] == 200  # group from O
            code, body = await _status(session, "GET", ns_url)
            assert code == 403 and 'User "bob" cannot list resource "namespaces"' in body["message"]
            code, body = await _status(session, "GET", ns_url, token="tok")  # the certificate wins, as in kube
            assert code == 403 and 'User "bob"' in body["message"]
        async with _tls_session(paths) as session:
            code, body = await _status(session, "GET", ns_url, token="tok")  # bearer tokens keep working
            assert code == 403 and 'User "token-user"' in body["message"]
            code, body = await _status(session, "GET", ns_url)  # anonymous: RBAC's to judge
            assert code == 403 and 'User "system:anonymous"' in body["message"]
            for path in ("/healthz", "/livez", "/readyz", "/version"):
                assert (await _status(session, "GET", server.url + path))[0] == 200, path
        for bad in (foreign, (str(paths.server_cert), str(paths.server_key))):  # other CA; a serving-only cert
            async with _tls_session(paths, bad) as session:
                with pytest.raises((aiohttp.ClientError, ssl.SSLError, OSError)):
                    await _status(session, "GET", ns_url)
        pem = issue_client_cert(paths, "alice", ["dev"])
        async with Client(server.url, ca=str(paths.ca_cert), client_cert=pem[0], client_key=pem[1]) as client:
            names = {ns["metadata"]["name"] for ns in (await client.list("namespaces")).items}
            assert "default" in names
        async with Client(server.url, ca=str(paths.ca_cert), max_retries=0) as client:
            with pytest.raises(Forbidden):  # no credentials: the anonymous user
                await client.get_json("/api/v1/namespaces")
        async with Client(server.url, ca=str(paths.ca_cert), token="not-a-token", max_retries=0) as client:
            with pytest.raises(Unauthorized):
                await client.get_json("/api/v1/namespaces")


def test_client_ca_needs_tls(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tls"):
        APIServer(client_ca=ensure_certs(tmp_path).ca_cert)


# -- authorization over HTTP --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _policy_server(tmp_path: Path, **kwargs: Any) -> AsyncIterator[tuple[APIServer, aiohttp.ClientSession]]:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY, encoding="utf-8")
    async with APIServer(tokens=TOKENS, authorization_policy=str(policy_file), **kwargs) as server:
        async with aiohttp.ClientSession() as session:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}
            assert (await _status(session, "POST", f"{server.url}/api/v1/namespaces", ADMIN, body))[0] == 201
            # team-a was created for the seed file's Roles
            yield server, session


async def test_authorization_allows_and_denies(tmp_path: Path) -> None:
    async with _policy_server(tmp_path) as (server, session):
        core = f"{server.url}/api/v1"
        cms = f"{core}/namespaces/team-a/configmaps"

        async def code(method: str, url: str, token: str, body: Any = None) -> int:
            return (await _status(session, method, url, token, body))[0]

        # alice: configmaps in team-a, but no watch, no other namespace, no deletecollection
        assert await code("POST", cms, ALICE, _configmap("c1", "team-a")) == 201
        assert await code("GET", cms, ALICE) == 200
        assert await code("GET", cms + "/c1", ALICE) == 200
        assert await code("PATCH", cms + "/c1", ALICE, {"data": {"k": "w"}}) == 415  # allowed; wrong patch type
        assert await code("PUT", cms + "/c1", ALICE, _configmap("c1", "team-a")) == 200
        assert await code("GET", cms + "?watch=true&timeoutSeconds=1", ALICE) == 403
        assert await code("GET", f"{core}/watch/namespaces/team-a/configmaps?timeoutSeconds=1", ALICE) == 403
        assert await code("GET", f"{core}/namespaces/team-b/configmaps", ALICE) == 403
        assert await code("POST", f"{core}/namespaces/team-b/configmaps", ALICE, _configmap("c", "team-b")) == 403
        assert await code("GET", f"{core}/configmaps", ALICE) == 403
        assert await code("DELETE", cms, ALICE) == 403
        assert await code("GET", f"{core}/namespaces/team-a/secrets", ALICE) == 403
        assert await code("DELETE", cms + "/c1", ALICE) == 200
        # carol: watch only
        assert await code("GET", cms, CAROL) == 403
        assert await code("GET", cms + "?watch=1&timeoutSeconds=1", CAROL) == 200
        assert await code("GET", f"{core}/watch/namespaces/team-a/configmaps?timeoutSeconds=1", CAROL) == 200
        assert await code("GET", f"{core}/namespaces/team-b/configmaps?watch=1&timeoutSeconds=1", CAROL) == 403
        # dave: pods/status only, never the pod itself
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        pods = f"{core}/namespaces/team-a/pods"
        assert await code("POST", pods, ADMIN, pod) == 201
        assert await code("GET", pods + "/p/status", DAVE) == 200
        assert await code("GET", pods + "/p", DAVE) == 403
        assert await code("GET", pods, DAVE) == 403
        assert await code("DELETE", pods + "/p/status", DAVE) == 403
        # erin: deployments.apps everywhere and any scale subresource; nothing else in apps
        apps = f"{server.url}/apis/apps/v1"
        assert await code("GET", f"{apps}/deployments", ERIN) == 200
        assert await code("GET", f"{apps}/namespaces/team-b/deployments", ERIN) == 200
        assert await code("GET", f"{apps}/namespaces/team-b/replicasets", ERIN) == 403
        assert await code("GET", f"{apps}/namespaces/team-b/deployments/none/scale", ERIN) == 404
        assert await code("GET", f"{apps}/namespaces/team-b/deployments/none/status", ERIN) == 403
        # discovery for everyone authenticated; /metrics only for the monitoring group; bob can do nothing else
        for token in (BOB, DAVE):
            for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/openapi/v2", "/version"):
                assert await code("GET", server.url + path, token) == 200, path
            assert await code("GET", f"{core}/namespaces", token) == 403
        assert await code("GET", f"{server.url}/metrics", BOB) == 403
        assert await code("GET", f"{server.url}/metrics", CAROL) == 200
        assert await code("GET", f"{server.url}/api", "unknown-token") == 401
        # system:masters may do everything
        assert await code("DELETE", f"{core}/namespaces/team-b/configmaps", ADMIN) == 200


async def test_watch_only_user_cannot_write_through_watch_paths(tmp_path: Path) -> None:
    """Authorization sees ``watch`` on ``/watch/`` paths; the routing rule makes that verb true (GET only)."""
    async with _policy_server(tmp_path) as (server, session):
        cms = f"{server.url}/api/v1/namespaces/team-a/configmaps"
        watch_cms = f"{server.url}/api/v1/watch/namespaces/team-a/configmaps"
        assert (await _status(session, "POST", cms, ADMIN, _configmap("kept", "team-a")))[0] == 201
        before = await server.storage.current_revision()
        for method, url, body in (("POST", watch_cms, _configmap("c", "team-a")), ("DELETE", watch_cms, None),
                                  ("PUT", watch_cms + "/kept", _configmap("kept", "team-a")),
                                  ("DELETE", watch_cms + "/kept", None)):
            code, status = await _status(session, method, url, CAROL, body)
            assert (code, status["reason"]) == (405, "MethodNotAllowed"), (method, url)
        assert await server.storage.current_revision() == before
        code, lst = await _status(session, "GET", cms, ADMIN)
        assert [o["metadata"]["name"] for o in lst["items"] if o["metadata"]["name"] != "kube-root-ca.crt"] == ["kept"]


async def test_forbidden_status_shape(tmp_path: Path) -> None:
    async with _policy_server(tmp_path) as (server, session):
        core = f"{server.url}/api/v1"
        code, body = await _status(session, "GET", f"{core}/namespaces/team-a/configmaps/x", BOB)
        assert code == 403
        assert body == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'configmaps "x" is forbidden: User "bob" cannot get resource "configmaps" in API group "" '
                       'in the namespace "team-a"',
            "reason": "Forbidden", "details": {"name": "x", "kind": "configmaps"}, "code": 403}
        _, body = await _status(session, "GET", f"{core}/namespaces/team-a/configmaps?watch=true", BOB)
        assert body["message"] == ('configmaps is forbidden: User "bob" cannot watch resource "configmaps" in API '
                                   'group "" in the namespace "team-a"')
        _, body = await _status(session, "GET", f"{server.url}/apis/apps/v1/deployments", BOB)
        assert body["message"] == ('deployments.apps is forbidden: User "bob" cannot list resource "deployments" in '
                                   'API group "apps" at the cluster scope')
        assert body["details"] == {"group": "apps", "kind": "deployments"}
        _, body = await _status(session, "PUT", f"{core}/namespaces/team-a/pods/p/status", BOB, {})
        assert body["message"] == ('pods "p" is forbidden: User "bob" cannot update resource "pods/status" in API '
                                   'group "" in the namespace "team-a"')
        code, body = await _status(session, "GET", f"{server.url}/metrics", BOB)
        assert (code, body["message"]) == (403, 'forbidden: User "bob" cannot get path "/metrics"')
        async with Client(server.url, token=BOB) as client:
            with pytest.raises(Forbidden, match='User "bob" cannot list resource "configmaps"'):
                await client.list("configmaps", namespace="team-a")


# -- limits -------------------------------------------------------------------------------------------


async def _open_watch(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientResponse:
    return await session.get(f"{url}/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=60",
                             headers=_auth(token))


async def test_watch_limit_per_client(tmp_path: Path) -> None:
    async with APIServer(tokens=MASTERS, max_watches_per_client=2) as server:
        async with aiohttp.ClientSession() as session:
            open_watches = [await _open_watch(session, server.url, ALICE) for _ in range(2)]
            assert [r.status for r in open_watches] == [200, 200]
            refused = await _open_watch(session, server.url, ALICE)
            assert refused.status == 429 and refused.headers["Retry-After"] == "1"
            body = orjson.loads(await refused.read())
            assert (body["kind"], body["reason"], body["code"], body["details"]) == \
                ("Status", "TooManyRequests", 429, {"retryAfterSeconds": 1})
            # other requests of the same client, and other clients' watches, are not affected
            assert (await _status(session, "GET", f"{server.url}/api/v1/namespaces", ALICE))[0] == 200
            other = await _open_watch(session, server.url, BOB)
            assert other.status == 200
            other.close()
            open_watches.pop().close()  # the server notices the closed connection and frees the slot

            async def slot_free() -> bool:
                resp = await _open_watch(session, server.url, ALICE)
                if resp.status == 200:
                    open_watches.append(resp)
                    return True
                assert resp.status == 429
                resp.release()
                return False

            await wait_until(slot_free, timeout=10.0, what="a watch slot to be released")
            for resp in open_watches:
                resp.close()


async def test_rate_limit_retry_after_and_recovery() -> None:
    clock = FakeClock()
    async with APIServer(tokens=MASTERS, clock=clock, rate_limit_qps=0.5, rate_limit_burst=3,
                         compaction_interval=0) as server:
        async with aiohttp.ClientSession() as session:
            url = f"{server.url}/api/v1/namespaces"
            assert [(await _status(session, "GET", url, ALICE))[0] for _ in range(3)] == [200, 200, 200]
            for _ in range(20):  # health checks are never counted nor refused
                assert (await _status(session, "GET", f"{server.url}/healthz", ALICE))[0] == 200
            async with session.get(url, headers=_auth(ALICE)) as resp:
                assert resp.status == 429 and resp.headers["Retry-After"] == "2"
                body = orjson.loads(await resp.read())
            assert (body["kind"], body["status"], body["reason"], body["code"]) == \
                ("Status", "Failure", "TooManyRequests", 429)
            assert body["details"] == {"retryAfterSeconds": 2}
            assert (await _status(session, "GET", url, BOB))[0] == 200  # buckets are per client
            clock.step(1.0)
            assert (await _status(session, "GET", url, ALICE))[0] == 429
            clock.step(1.0)  # the Retry-After the server asked for has passed
            assert (await _status(session, "GET", url, ALICE))[0] == 200
            assert (await _status(session, "GET", url, ALICE))[0] == 429
            clock.step(6.0)  # a full bucket again
            assert [(await _status(session, "GET", url, ALICE))[0] for _ in range(4)] == [200, 200, 200, 429]
        async with Client(server.url, token=ALICE, max_retries=0) as client:
            with pytest.raises(TooManyRequests) as info:
                await client.get_json("/api/v1/namespaces")
            assert info.value.retry_after == 2


async def test_one_user_reading_at_future_resource_versions_starves_nobody() -> None:
    """A flood of reads waiting for a future resourceVersion neither holds the seats nor queues out others."""
    readers = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "readers"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}
                             for name in ("bob", "dave")]}]
    async with APIServer(tokens=TOKENS, authorization_policy=readers, compaction_interval=0,
                         max_inflight=20) as server:
        server.api.rv_wait = 2.0
        url = f"{server.url}/api/v1/namespaces/default/configmaps"
        future = str(await server.storage.current_revision() + 1000)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            flood = [asyncio.create_task(_status(session, "GET", f"{url}?resourceVersion={future}", BOB))
                     for _ in range(300)]
            await wait_until(lambda: len(server.cache._waiters) >= 10, what="the flood waiting")
            others = await asyncio.gather(*(_status(session, "GET", url, token)
                                            for token in (ADMIN, DAVE) for _ in range(20)))
            assert [code for code, _ in others] == [200] * 40
            flooded = await asyncio.gather(*flood)
        codes = [code for code, _ in flooded]
        assert set(codes) <= {429, 504} and codes.count(504) <= 20 and 429 in codes
        refused = next(body for code, body in flooded if code == 429)
        assert refused["reason"] == "TooManyRequests" and refused["details"]["retryAfterSeconds"] == 1


async def test_a_failing_credential_is_401_everywhere_and_none_is_the_anonymous_user() -> None:
    """kube: a bearer token no authenticator accepts fails the request before authorization, even on /version;
    without credentials the request is system:anonymous, which system:public-info-viewer lets read health and
    /version and nothing else (--anonymous-auth=false: a 401)."""
    public = ("/healthz", "/livez", "/readyz", "/version", "/version/")
    async with APIServer(tokens={"tok": UserInfo("alice")}, compaction_interval=0) as server:
        async with aiohttp.ClientSession() as session:
            for path in (*public, "/api", "/api/v1/namespaces"):
                code, body = await _status(session, "GET", server.url + path, "wrong-token")
                assert (code, body["reason"]) == (401, "Unauthorized"), path
            for path in public:
                assert (await _status(session, "GET", server.url + path))[0] == 200, path
            for path, what in (("/api", 'get path "/api"'), ("/api/v1/namespaces", 'list resource "namespaces"')):
                code, body = await _status(session, "GET", server.url + path)
                assert code == 403 and f'User "system:anonymous" cannot {what}' in body["message"], body
            assert (await _status(session, "GET", server.url + "/api", "tok"))[0] == 200  # discovery: authenticated
    async with APIServer(tokens={"tok": UserInfo("alice")}, anonymous_auth=False, compaction_interval=0) as server:
        async with aiohttp.ClientSession() as session:
            for path in (*public, "/api"):
                code, body = await _status(session, "GET", server.url + path)
                assert (code, body["reason"]) == (401, "Unauthorized"), path
            assert (await _status(session, "GET", server.url + "/version", "tok"))[0] == 200


async def test_anonymous_clients_are_limited_by_address() -> None:
    async with APIServer(rate_limit_qps=0.001, rate_limit_burst=2, compaction_interval=0) as server:
        async with aiohttp.ClientSession() as session:
            codes = [(await _status(session, "GET", f"{server.url}/api/v1/namespaces"))[0] for _ in range(3)]
            assert codes == [200, 200, 429]
            assert (await _status(session, "GET", f"{server.url}/readyz"))[0] == 200


# -- kinformer serve + kubectl -----------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_serve_security_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse([])
    assert (args.kubeconfig_auth, args.client_ca_file, args.authorization_policy_file) == ("token", None, None)
    assert args.max_watches_per_client > 0 and args.rate_limit_qps > 0 and args.rate_limit_burst > 0
    assert main(_parse(["--no-tls", "--kubeconfig-auth", "cert", "--data", str(tmp_path / "d")])) == 2
    assert "need --tls" in capsys.readouterr().err
    bad = tmp_path / "policy.yaml"
    bad.write_text("- user: a\n  verbs: [get]\n  resources: [pods]\n", encoding="utf-8")  # the old rule format
    assert main(_parse(["--authorization-policy-file", str(bad), "--data", str(tmp_path / "d")])) == 2
    assert "expected an rbac.authorization.k8s.io/v1 Role" in capsys.readouterr().err
    assert main(_parse(["--rate-limit-qps", "-1", "--data", str(tmp_path / "d")])) == 2
    assert args.anonymous_auth is True and _parse(["--anonymous-auth=false"]).anonymous_auth is False
    with pytest.raises(SystemExit):
        _parse(["--anonymous-auth", "maybe"])


def test_write_kubeconfig_with_client_certificate(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "pki")
    cert, key = issue_client_cert(paths, "admin", ["system:masters"])
    out = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", paths.ca_cert, None, client_cert=cert,
                           client_key=key)
    user = yaml.safe_load(out.read_text())["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == cert
    assert base64.b64decode(user["client-key-data"]) == key and "token" not in user
    assert oct(out.stat().st_mode & 0o777) == "0o600"


SERVE = "import sys; from kinformer.cli import main; sys.exit(main(sys.argv[1:]))"


@contextlib.asynccontextmanager
async def _kinformer_serve(data: Path, *extra: str) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVE, "serve", "--bare", "--port", "0", "--data", str(data), "--storage", "memory",
        *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    err = await proc.stderr.read() if proc.stderr else b""
                    raise RuntimeError(f"kinformer serve exited with {await proc.wait()}: {err.decode()}")
                if "listening on" in line:
                    yield line.split("listening on", 1)[1].split()[0]
                    return
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _kubectl(kubeconfig: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = await asyncio.create_subprocess_exec("kubectl", "--kubeconfig", str(kubeconfig), "--request-timeout=20s",
                                                *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(40):
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_with_client_certificate_kubeconfig(tmp_path: Path) -> None:
    data = tmp_path / "data"
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "cm", "namespace": "default"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "bob-cm", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}]), encoding="utf-8")
    async with _kinformer_serve(data, "--kubeconfig-auth", "cert", "--authorization-policy-file", str(policy)) as url:
        kubeconfig = data / "kubeconfig"
        user = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]
        assert set(user) == {"client-certificate-data", "client-key-data"}
        rc, out, err = await _kubectl(kubeconfig, "get", "namespaces", "-o", "name")
        assert rc == 0, err
        assert "namespace/default" in out.split()
        rc, out, err = await _kubectl(kubeconfig, "create", "configmap", "from-admin", "-n", "default")
        assert rc == 0, err
        # a second user, with a certificate from the same CA, limited by the policy
        paths = ensure_certs(data / "pki")
        cert, key = issue_client_cert(paths, "bob", ["dev"])
        bob = write_kubeconfig(tmp_path / "bob.kubeconfig", url, paths.ca_cert, None, client_cert=cert,
                               client_key=key)
        rc, out, err = await _kubectl(bob, "get", "configmaps", "-n", "default", "-o", "name")
        assert rc == 0, err
        assert "configmap/from-admin" in out.split()
        rc, out, err = await _kubectl(bob, "get", "secrets", "-n", "default")
        assert rc != 0
        assert ('Error from server (Forbidden): secrets is forbidden: User "bob" cannot list resource "secrets" '
                'in API group "" in the namespace "default"') in err
        wrong = write_kubeconfig(tmp_path / "wrong.kubeconfig", url, paths.ca_cert, "not-a-token")
        rc, out, err = await _kubectl(wrong, "get", "configmaps", "-n", "default")
        assert rc != 0 and "Unauthorized" in err


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def test_replicas_on_etcd_share_a_data_directory_that_a_server_of_its_own_excludes(tmp_path: Path) -> None:
    first, second = lock_data_dir(tmp_path, shared=True), lock_data_dir(tmp_path, shared=True)
    with first, second, pytest.raises(DataDirInUse, match=f"data directory {tmp_path} is in use"):
        lock_data_dir(tmp_path)
    with lock_data_dir(tmp_path), pytest.raises(DataDirInUse):
        lock_data_dir(tmp_path, shared=True)
    lock_data_dir(tmp_path).close()  # released: the next one takes it


async def test_a_second_serve_on_one_data_directory_exits_and_touches_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _kinformer_serve(data) as url:
        before = _files(data)
        assert {"kubeconfig", "token", "pki/ca.crt"} <= set(before)
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SERVE, "serve", "--bare", "--port", "0", "--data", str(data),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            async with asyncio.timeout(30):
                out, err = await second.communicate()
        finally:
            if second.returncode is None:  # it started: stop it
                second.kill()
                await second.wait()
        assert second.returncode == 1, out.decode() + err.decode()
        assert f"data directory {data} is in use by another kinformer serve" in err.decode()
        assert _files(data) == before  # no kubeconfig, token or pki rewrite, no database (kinformer.db) opened
        ca = str(data / "pki" / "ca.crt")
        async with Client(url, ca=ca, token=(data / "token").read_text().strip()) as client:
            assert (await client.get("namespaces", "default"))["metadata"]["name"] == "default"


# -- secrets never logged -----------------------------------------------------------------------------


async def test_secrets_and_credentials_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    token = "tok-" + os.urandom(12).hex()
    secret_value = "s3cr3t-" + os.urandom(12).hex()
    string_value = "str-" + os.urandom(12).hex()
    paths = ensure_certs(tmp_path / "pki")
    cert_pem, key_pem = issue_client_cert(paths, "alice", ["system:masters"])
    forbidden = {"token": token, "secret": secret_value, "b64": base64.b64encode(secret_value.encode()).decode(),
                 "string": string_value, "key": key_pem.decode().splitlines()[1]}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"},
              "data": {"password": forbidden["b64"]}, "stringData": {"api-key": string_value}}
    caplog.set_level(logging.DEBUG)
    clock = FakeClock()  # the server's buckets never refill: the client's retry after Retry-After fails again
    tokens = {token: UserInfo("bob", groups=("system:masters",))}
    async with APIServer(tls=paths, client_ca=paths.ca_cert, tokens=tokens, rate_limit_qps=1, rate_limit_burst=30,
                         clock=clock, compaction_interval=0) as server:
        ca = str(paths.ca_cert)
        async with Client(server.url, token=token, ca=ca, max_retries=1) as client:
            logging.getLogger("test").debug("client config: %r", client.config)
            created = await client.create("secrets", secret, namespace="default")
            assert "password" in created["data"]
            await client.get("secrets", "creds", namespace="default")
            await client.list("secrets", namespace="default")
            watch = client.watch("secrets", namespace="default", resource_version="0", timeout_seconds=30)
            event = await anext(watch)
            await watch.aclose()
            assert event.type == "ADDED"
            # a failing request whose error the server logs (a storage failure while updating the secret)
            original = server.storage.update

            async def broken_update(key: str, value: bytes, expected_revision: int) -> Any:
                raise OSError("simulated storage failure")

            server.storage.update = broken_update  # type: ignore[method-assign]
            try:
                with pytest.raises(ServerError):
                    await client.patch("secrets", "creds", {"stringData": {"api-key": string_value + "2"}},
                                       namespace="default")
            finally:
                server.storage.update = original  # type: ignore[method-assign]
            # the rate limit answers 429; the client logs its retry after Retry-After, then gives up
            with pytest.raises(TooManyRequests):
                for _ in range(40):
                    await client.get("secrets", "creds", namespace="default")
        async with Client(server.url, token=token + "x", ca=ca, max_retries=0) as client:
            with pytest.raises(Unauthorized):
                await client.get_json("/api/v1/namespaces/default/secrets/creds")
        async with Client(server.url, ca=ca, client_cert=cert_pem, client_key=key_pem, max_retries=0) as client:
            logging.getLogger("test").debug("client config: %r", client.config)
            assert (await client.get("secrets", "creds", namespace="default"))["data"]["password"] == forbidden["b64"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors, "the failing request should have logged an error"
    assert any("retry" in r.getMessage() for r in caplog.records if r.name.startswith("kinformer.client"))
    text = caplog.text + "\n".join(_record_text(r) for r in caplog.records)
    for what, value in forbidden.items():
        assert value not in text, f"{what} leaked into the logs"
    assert "Bearer" not in text


def test_undecodable_watch_line_error_omits_the_object() -> None:
    from kinformer.client.watch import decode_watch_line

    value = base64.b64encode(b"hunter2-" + os.urandom(8)).decode()
    line = orjson.dumps({"type": "ADDED", "object": {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"},
                                                     "data": {"password": value}}})
    with pytest.raises(ValueError) as info:
        decode_watch_line(line[:-7])  # truncated in transit
    assert value[:8] not in str(info.value) and "bytes" in str(info.value)


def _record_text(record: logging.LogRecord) -> str:
    parts = [record.getMessage(), repr(record.args)]
    if record.exc_info and record.exc_info[1] is not None:
        parts.append(logging.Formatter().formatException(record.exc_info))
    extra: Mapping[str, Any] = {k: v for k, v in record.__dict__.items() if k not in logging.LogRecord(
        "", 0, "", 0, "", (), None).__dict__}
    parts.append(repr(extra))
    return "\n".join(parts)


async def test_connections_that_never_finish_their_request_head_are_closed() -> None:
    async with APIServer(compaction_interval=0, header_timeout=0.5) as server:
        host, port = server.host, server.port
        silent = await asyncio.open_connection(host, port)
        trickle = await asyncio.open_connection(host, port)
        trickle[1].write(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nX-Slow: ")

        async def keep_trickling() -> None:
            while True:
                trickle[1].write(b"x")
                await asyncio.sleep(0.05)

        trickler = asyncio.create_task(keep_trickling())
        try:
            async with asyncio.timeout(10):  # a deadline for the test, far above the 0.5 s being tested
                assert await silent[0].read() == b""
                assert await trickle[0].read() == b""
        finally:
            trickler.cancel()
            for _, writer in (silent, trickle):
                writer.close()
        async with aiohttp.ClientSession() as session, session.get(f"{server.url}/healthz") as resp:
            assert resp.status == 200


async def test_a_request_body_that_never_arrives_is_a_408(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinformer.server.endpoints import bodies

    monkeypatch.setattr(bodies, "BODY_TIMEOUT", 0.3)
    async with APIServer(compaction_interval=0) as server:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"metadata\":")
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            body = await reader.readexactly(length)
        writer.close()
        assert head.startswith(b"HTTP/1.1 408")
        status = orjson.loads(body)
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 408, "Timeout")


async def test_loopback_server_refuses_rebound_hosts_and_cross_site_origins() -> None:
    """DNS rebinding (a foreign Host) and cross-site pages (a foreign Origin) get 403; nothing is written."""
    async with APIServer(compaction_interval=0, allowed_hosts=["kinformer.internal"]) as server:
        url = f"{server.url}/api/v1/namespaces/default/configmaps"
        body = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "csrf"}})
        json_type = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession() as session:
            for headers in ({"Host": f"evil.example:{server.port}"}, {"Origin": "http://evil.example"},
                            {"Origin": "null"}, {"Host": "127.0.0.1.nip.io"}):
                async with session.post(url, data=body, headers={**json_type, **headers}) as resp:
                    status = await resp.json()
                assert (resp.status, status["reason"]) == (403, "Forbidden"), headers
            async with session.post(url, data=body, headers={"Content-Type": "text/plain"}) as resp:
                assert resp.status == 415  # the one body a page may send cross-site without asking
            async with session.get(url) as resp:
                assert "csrf" not in [o["metadata"]["name"] for o in (await resp.json())["items"]]
            for headers in ({"Origin": f"http://localhost:{server.port}"}, {"Host": f"localhost:{server.port}"},
                            {"Host": "kinformer.internal"}):
                async with session.get(url, headers=headers) as resp:
                    assert resp.status == 200, headers
