"""CertificateSigningRequests: who asked, the approval and status subresources, and the client-certificate signer."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import kinformer as ki
from kinformer.errors import Forbidden, Invalid
from kinformer.server import APIServer
from kinformer.tls import CertPaths, ensure_certs, issue_client_cert
from testlib import wait_until

CSRS = "certificatesigningrequests"


def _request(user: str, groups: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """A base64 PEM certificate request for ``user`` in ``groups`` and its private key (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                         x509.NameAttribute(NameOID.COMMON_NAME, user)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(), key_pem


def _csr(name: str, request: str, usages: tuple[str, ...] = ("client auth",), **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": list(usages), **spec}}


def _approved(csr: Any, ctype: str = "Approved") -> dict[str, Any]:
    body = csr.to_dict()
    body["status"] = {"conditions": [{"type": ctype, "status": "True", "reason": "Test", "message": "by test"}]}
    return body


@pytest.fixture
def pki(tmp_path: Path) -> CertPaths:
    return ensure_certs(tmp_path / "pki")


@pytest.fixture
async def admin(pki: CertPaths) -> AsyncIterator[tuple[APIServer, ki.Client]]:
    cert, key = issue_client_cert(pki, "root", ["system:masters"])
    async with APIServer(tls=pki, client_ca=pki.ca_cert, compaction_interval=0) as server, \
            ki.Client(server.url, ca=str(pki.ca_cert), client_cert=cert, client_key=key) as client:
        yield server, client


async def test_an_approved_client_request_is_signed_and_the_certificate_authenticates(admin, pki):
    server, client = admin
    request, key = _request("alice", ("dev",))
    created = await client.create(CSRS, _csr("alice", request, username="mallory", groups=["forged"]))
    spec = created["spec"]
    assert spec["username"] == "root" and "system:masters" in spec["groups"] and "forged" not in spec["groups"]
    assert created["status"] == {}
    approved = await client.replace(CSRS, _approved(created), subresource="approval")
    [condition] = approved["status"]["conditions"]
    assert condition["type"] == "Approved" and condition["lastUpdateTime"] and condition["lastTransitionTime"]

    async def issued() -> bool:
        return "certificate" in (await client.get(CSRS, "alice"))["status"]

    await wait_until(issued, timeout=30, what="the certificate issued")
    pem = base64.b64decode((await client.get(CSRS, "alice"))["status"]["certificate"])
    cert = x509.load_pem_x509_certificate(pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert cert.issuer == x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
    async with ki.Client(server.url, ca=str(pki.ca_cert), client_cert=pem, client_key=key, max_retries=0) as alice:
        with pytest.raises(Forbidden, match='User "alice" cannot list resource "namespaces"'):
            await alice.list("namespaces")


async def test_requests_the_client_signer_cannot_honour_fail_and_denied_ones_are_left_alone(admin):
    _, client = admin
    request, _ = _request("web")
    serving = await client.create(CSRS, _csr("serving", request, ("server auth", "digital signature")))
    await client.replace(CSRS, _approved(serving), subresource="approval")

    async def conditions() -> dict[str, Any]:
        return {c["type"]: c for c in (await client.get(CSRS, "serving"))["status"].get("conditions", [])}

    async def failed() -> bool:
        return "Failed" in await conditions()

    await wait_until(failed, timeout=30, what="the Failed condition")
    condition = (await conditions())["Failed"]
    assert condition["reason"] == "SignerValidationFailure" and "server auth" in condition["message"]
    denied = await client.create(CSRS, _csr("denied", request))
    out = await client.replace(CSRS, _approved(denied, "Denied"), subresource="approval")
    assert [c["type"] for c in out["status"]["conditions"]] == ["Denied"]
    assert "certificate" not in (await client.get(CSRS, "denied"))["status"]


async def test_condition_rules_and_what_each_update_may_change(admin):
    _, client = admin
    request, _ = _request("bob")
    # a signer nothing here runs: the object changes only by this test's writes
    csr = await client.create(CSRS, _csr("bob", request, signerName="example.com/custom"))
    both = _approved(csr)
    both["status"]["conditions"].append({"type": "Denied", "status": "True"})
    with pytest.raises(Invalid, match="mutually exclusive"):
        await client.replace(CSRS, both, subresource="approval")
    approved = await client.replace(CSRS, _approved(csr), subresource="approval")
    cleared = approved.to_dict()
    cleared["status"] = {}
    with pytest.raises(Invalid, match='may not remove a condition of type "Approved"'):
        await client.replace(CSRS, cleared, subresource="approval")
    current = (await client.get(CSRS, "bob")).to_dict()
    current["spec"]["usages"] = ["server auth"]
    current["status"] = {}
    current["metadata"]["labels"] = {"seen": "yes"}
    current["metadata"].pop("resourceVersion")
    out = await client.replace(CSRS, current)
    assert out["metadata"]["labels"] == {"seen": "yes"} and out["spec"]["usages"] == ["client auth"]
    assert [c["type"] for c in out["status"]["conditions"]] == ["Approved"]


async def test_a_request_must_be_a_pem_certificate_request_with_a_signer(admin):
    _, client = admin
    with pytest.raises(Invalid, match="PEM block type must be CERTIFICATE REQUEST"):
        await client.create(CSRS, _csr("junk", base64.b64encode(b"not a csr").decode()))
    request, _ = _request("carol")
    body = _csr("carol", request)
    del body["spec"]["signerName"]
    with pytest.raises(Invalid, match=r"spec\.signerName: Required value"):
        await client.create(CSRS, body)
    with pytest.raises(Invalid, match="may not specify a duration less than 10m0s"):
        await client.create(CSRS, _csr("short", request, expirationSeconds=60))


def _cluster_role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": list(rules)}


def _bind(user: str, role: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{user}-{role}".replace(":", "-")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


@pytest.fixture
async def requester(admin, pki) -> AsyncIterator[ki.Client]:
    """A user who may create requests and update their approval and status, and nothing about signers."""
    server, client = admin
    await client.create("clusterroles", _cluster_role("csr-writer", {
        "apiGroups": ["certificates.k8s.io"], "verbs": ["create", "get", "list", "watch"],
        "resources": ["certificatesigningrequests"]}, {
        "apiGroups": ["certificates.k8s.io"], "verbs": ["update"],
        "resources": ["certificatesigningrequests/approval", "certificatesigningrequests/status"]}))
    await client.create("clusterrolebindings", _bind("mallory", "csr-writer"))
    cert, key = issue_client_cert(pki, "mallory", ["dev"])
    async with ki.Client(server.url, ca=str(pki.ca_cert), client_cert=cert, client_key=key, max_retries=0) as c:
        yield c


async def test_nobody_may_ask_the_client_signer_for_a_system_masters_certificate(admin, requester):
    _, client = admin
    request, _ = _request("mallory", ("system:masters", "dev"))
    message = ('certificatesigningrequests.certificates.k8s.io "masters" is forbidden: use of '
               "kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed")
    for who in (requester, client):  # the admin (system:masters) is refused too
        with pytest.raises(Forbidden) as caught:
            await who.create(CSRS, _csr("masters", request))
        assert caught.value.message == message
    # another signer's request may name the group: only the API server's client signer is restricted
    await requester.create(CSRS, _csr("other", request, signerName="example.com/custom"))


async def test_approving_needs_approve_on_the_signer_and_signing_needs_sign(admin, requester):
    _, client = admin
    request, _ = _request("mallory", ("dev",))
    csr = await requester.create(CSRS, _csr("mallory", request))
    with pytest.raises(Forbidden) as caught:
        await requester.replace(CSRS, _approved(csr), subresource="approval")
    assert caught.value.message == ('certificatesigningrequests.certificates.k8s.io "mallory" is forbidden: user '
                                    'not permitted to approve requests with signerName '
                                    '"kubernetes.io/kube-apiserver-client"')
    forged = csr.to_dict()
    forged["status"] = {"certificate": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()}
    with pytest.raises(Forbidden, match=re.escape('user not permitted to sign requests with signerName '
                                                  '"kubernetes.io/kube-apiserver-client"')):
        await requester.replace(CSRS, forged, subresource="status")
    assert (await client.get(CSRS, "mallory"))["status"] == {}
    # the domain wildcard grants approval for every kubernetes.io signer
    await client.create("clusterroles", _cluster_role("approve-kubernetes-io", {
        "apiGroups": ["certificates.k8s.io"], "verbs": ["approve"], "resources": ["signers"],
        "resourceNames": ["kubernetes.io/*"]}))
    await client.create("clusterrolebindings", _bind("mallory", "approve-kubernetes-io"))
    await requester.replace(CSRS, _approved(csr), subresource="approval")

    async def issued() -> bool:
        return "certificate" in (await client.get(CSRS, "mallory"))["status"]

    await wait_until(issued, timeout=30, what="the certificate issued by the built-in signer")


async def test_the_bootstrap_approver_role_grants_approval_of_its_signer_only(admin, requester):
    _, client = admin
    await client.create("clusterrolebindings",
                        _bind("mallory", "system:certificates.k8s.io:kube-apiserver-client-approver"))
    request, _ = _request("mallory", ("dev",))
    client_csr = await requester.create(CSRS, _csr("client", request))
    await requester.replace(CSRS, _approved(client_csr), subresource="approval")
    serving = await requester.create(CSRS, _csr("serving", request, signerName="kubernetes.io/kubelet-serving"))
    with pytest.raises(Forbidden, match=re.escape('signerName "kubernetes.io/kubelet-serving"')):
        await requester.replace(CSRS, _approved(serving), subresource="approval")


def test_the_built_in_signer_never_issues_a_system_masters_certificate(pki):
    from kinformer.server.controllers.csrsigning import issue

    request, _ = _request("mallory", ("system:masters",))
    certificate, why = issue(pki, _csr("masters", request))
    assert certificate is None
    assert why == "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    certificate, why = issue(pki, _csr("dev", _request("alice", ("dev",))[0]))
    assert certificate is not None and why == ""
