"""ServiceAccount tokens: TokenRequest, authentication by them, revocation with the account or bound object,
audiences and expiry, JWKS/OIDC discovery, keys kept across restarts, TokenReview, and the in-cluster config."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from kinformer.client import Client
from kinformer.clock import FakeClock
from kinformer.errors import Forbidden
from kinformer.server import APIServer
from kinformer.tls import client_ssl_context, ensure_certs
from testlib import call, wait_until

SA = "/api/v1/namespaces/default/serviceaccounts"


async def token_request(http: aiohttp.ClientSession, name: str, **spec: Any) -> tuple[int, Any]:
    return await call(http, "POST", f"{SA}/{name}/token", {"apiVersion": "authentication.k8s.io/v1",
                                                          "kind": "TokenRequest", "spec": spec})


async def as_token(http: aiohttp.ClientSession, token: str, method: str, path: str, body: Any = None
                   ) -> tuple[int, Any]:
    data = orjson.dumps(body) if body is not None else None
    async with http.request(method, path, data=data, headers={"Authorization": f"Bearer {token}",
                                                              "Content-Type": "application/json"}) as r:
        return r.status, orjson.loads(await r.read())


def claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


async def new_token(http: aiohttp.ClientSession, name: str = "bot", **spec: Any) -> str:
    await call(http, "POST", SA, {"metadata": {"name": name}})
    code, body = await token_request(http, name, **spec)
    assert code == 201, body
    return body["status"]["token"]


@pytest.fixture
async def server() -> AsyncIterator[APIServer]:
    async with APIServer(clock=FakeClock(wall_start=1_800_000_000.0), compaction_interval=0) as s:
        yield s


@pytest.fixture
async def http(server: APIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        yield session


async def test_token_request_issues_kube_claims_and_authenticates(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", SA, {"metadata": {"name": "bot"}})
    uid = (await call(http, "GET", f"{SA}/bot"))[1]["metadata"]["uid"]
    code, body = await token_request(http, "bot")
    assert code == 201 and body["kind"] == "TokenRequest" and body["apiVersion"] == "authentication.k8s.io/v1"
    assert body["spec"]["expirationSeconds"] == 3600
    assert body["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"  # FakeClock wall + 1h
    c = claims(body["status"]["token"])
    assert c["sub"] == "system:serviceaccount:default:bot" and c["iss"] == "https://kubernetes.default.svc.cluster.local"
    assert c["aud"] == ["https://kubernetes.default.svc.cluster.local"] and c["exp"] - c["iat"] == 3600
    assert c["kubernetes.io"] == {"namespace": "default", "serviceaccount": {"name": "bot", "uid": uid}}
    token = body["status"]["token"]
    code, body = await as_token(http, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    info = body["status"]["userInfo"]
    assert (info["username"], info["uid"]) == ("system:serviceaccount:default:bot", uid)
    assert info["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert info["extra"]["authentication.kubernetes.io/credential-id"] == [f"JTI={c['jti']}"]
    code, body = await as_token(http, token, "GET", "/api/v1/namespaces/default/configmaps")
    assert code == 403 and 'User "system:serviceaccount:default:bot" cannot list' in body["message"]
    rb = {"metadata": {"name": "bot-view"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                         "kind": "ClusterRole", "name": "view"},
          "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}
    assert (await call(http, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", rb))[0] \
        == 201
    assert (await as_token(http, token, "GET", "/api/v1/namespaces/default/configmaps"))[0] == 200


async def test_token_stops_working_when_the_account_is_deleted(http: aiohttp.ClientSession) -> None:
    token = await new_token(http)
    assert (await as_token(http, token, "GET", "/api"))[0] == 200
    assert (await call(http, "DELETE", f"{SA}/bot"))[0] == 200

    async def refused() -> bool:
        return (await as_token(http, token, "GET", "/api"))[0] == 401

    await wait_until(refused, what="the deleted account's token to be refused")
    await call(http, "POST", SA, {"metadata": {"name": "bot"}})  # same name, new uid
    await wait_until(lambda: _exists(http, "bot"), what="the new account")
    assert (await as_token(http, token, "GET", "/api"))[0] == 401
    code, body = await token_request(http, "missing")
    assert code == 404 and body["message"] == 'serviceaccounts "missing" not found'


async def _exists(http: aiohttp.ClientSession, name: str) -> bool:
    return (await call(http, "GET", f"{SA}/{name}"))[0] == 200


async def test_token_bound_to_a_pod_ends_with_the_pod(http: aiohttp.ClientSession) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    _, created = await call(http, "POST", "/api/v1/namespaces/default/pods", pod)
    token = await new_token(http, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"})
    assert claims(token)["kubernetes.io"]["pod"] == {"name": "p", "uid": created["metadata"]["uid"]}
    _, body = await as_token(http, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {})
    assert body["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]
    await call(http, "DELETE", "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0")

    async def refused() -> bool:
        return (await as_token(http, token, "GET", "/api"))[0] == 401

    await wait_until(refused, what="the pod-bound token to be refused")
    code, _ = await token_request(http, "bot", boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "gone"})
    assert code == 404
    code, body = await token_request(http, "bot", boundObjectRef={"kind": ["Pod"], "name": "p"})
    assert code == 422 and "spec.boundObjectRef.kind" in body["message"]


async def test_audiences_expiry_and_validation(server: APIServer, http: aiohttp.ClientSession) -> None:
    other = await new_token(http, audiences=["https://vault.example"])
    assert (await as_token(http, other, "GET", "/api"))[0] == 401  # not for this API server
    review = "/apis/authentication.k8s.io/v1/tokenreviews"
    code, body = await call(http, "POST", review, {"spec": {"token": other, "audiences": ["https://vault.example"]}})
    assert code == 201 and body["status"]["authenticated"] is True
    assert body["status"]["audiences"] == ["https://vault.example"]
    assert body["status"]["user"]["username"] == "system:serviceaccount:default:bot"
    body = (await call(http, "POST", review, {"spec": {"token": other}}))[1]
    assert body["status"]["authenticated"] is False and body["status"]["error"]
    assert (await call(http, "POST", review, {"spec": {}}))[0] == 400
    short = await new_token(http, expirationSeconds=600)
    assert (await as_token(http, short, "GET", "/api"))[0] == 200
    assert isinstance(server.clock, FakeClock)
    server.clock.step(601)
    assert (await as_token(http, short, "GET", "/api"))[0] == 401
    code, body = await token_request(http, "bot", expirationSeconds=599)
    assert code == 422 and body["message"] == ('TokenRequest.authentication.k8s.io "bot" is invalid: '
                                               'spec.expirationSeconds: Invalid value: 599: may not specify a '
                                               'duration less than 10 minutes')
    forged = ".".join([*short.split(".")[:2], base64.urlsafe_b64encode(b"x" * 256).decode().rstrip("=")])
    assert (await as_token(http, forged, "GET", "/api"))[0] == 401
    # a token that is not a ServiceAccount JWT of this server: ignored by a server without authentication
    assert (await as_token(http, "not-a-jwt", "GET", "/api/v1/namespaces"))[0] == 200


async def test_jwks_verifies_tokens_and_discovery_names_it(server: APIServer, http: aiohttp.ClientSession) -> None:
    token = await new_token(http)
    _, doc = await call(http, "GET", "/.well-known/openid-configuration")
    assert doc["issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert doc["jwks_uri"] == f"{server.url}/openid/v1/jwks" and doc["id_token_signing_alg_values_supported"] == \
        ["RS256"]
    async with http.get("/openid/v1/jwks") as r:
        assert r.content_type == "application/jwk-set+json"
        keys = KeySet.import_key_set(orjson.loads(await r.read()))
    decoded = jwt.decode(token, keys, algorithms=["RS256"])
    assert decoded.claims["sub"] == "system:serviceaccount:default:bot" and decoded.header["kid"]


async def test_signing_key_survives_restarts_of_a_data_directory(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    async with APIServer(storage=storage, data_dir=str(tmp_path)) as s, \
            aiohttp.ClientSession(base_url=s.url) as http:
        token = await new_token(http)
    key = tmp_path / "pki" / "sa.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    async with APIServer(storage=storage, data_dir=str(tmp_path)) as s, \
            aiohttp.ClientSession(base_url=s.url) as http:
        assert (await as_token(http, token, "GET", "/api"))[0] == 200
    async with APIServer(storage=storage) as s, aiohttp.ClientSession(base_url=s.url) as http:
        assert (await as_token(http, token, "GET", "/api"))[0] == 401  # another key: an in-memory one


async def test_in_cluster_config_uses_the_token_file_and_follows_rotation(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "pki")
    async with APIServer(tls=paths, tokens=["admin-token"]) as server:  # a plain token list: the admin
        ctx = client_ssl_context(paths)
        headers = {"Authorization": "Bearer admin-token"}
        async with aiohttp.ClientSession(base_url=server.url, connector=aiohttp.TCPConnector(ssl=ctx),
                                         headers=headers) as http:
            one, two = await new_token(http, "one"), await new_token(http, "two")
            rb = {"metadata": {"name": "one"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                           "kind": "ClusterRole", "name": "view"},
                  "subjects": [{"kind": "ServiceAccount", "name": "one", "namespace": "default"}]}
            assert (await call(http, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                               rb))[0] == 201
        sa_dir = tmp_path / "sa"
        sa_dir.mkdir()
        (sa_dir / "token").write_text(one)
        (sa_dir / "ca.crt").write_bytes(paths.ca_cert.read_bytes())
        (sa_dir / "namespace").write_text("default")
        port = server.url.rsplit(":", 1)[1]
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port}
        async with Client.in_cluster(env=env, sa_dir=str(sa_dir), max_retries=0) as client:
            await client.list("configmaps", namespace="default")
            (sa_dir / "token").write_text(two + "\n")  # rotated: another account, without the binding
            with pytest.raises(Forbidden, match="system:serviceaccount:default:two"):
                await client.list("configmaps", namespace="default")

