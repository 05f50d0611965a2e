"""WebhookServer: admission and conversion reviews over HTTPS, denials, patches, limits, certificates."""

from __future__ import annotations

import asyncio
import base64
import shutil
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from cryptography import x509

from kinformer.clock import FakeClock
from kinformer.errors import Invalid
from kinformer.tls import ensure_certs
from kinformer.webhook import Denied, WebhookServer
from kinformer.webhook.server import MAX_BODY
from testlib import wait_until


def review(obj: dict[str, Any] | None, operation: str = "CREATE", uid: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": operation, "name": "w", "namespace": "default",
                        "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
                        "object": obj, "userInfo": {"username": "alice"}}}


def widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def trust(server: WebhookServer) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=server.ca_bundle.decode())


async def post(server: WebhookServer, path: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    async with aiohttp.ClientSession() as session, session.post(
            server.url + path, data=data, ssl=trust(server), headers={"Content-Type": "application/json"}) as resp:
        raw = await resp.read()
        return resp.status, orjson.loads(raw) if resp.content_type == "application/json" else raw.decode()


@pytest.fixture
async def server():
    def check(req):
        size = req.object["spec"].get("size", 0)
        if size > 10:
            raise Denied(f"size {size} is over 10")
        if size < 0:
            raise Invalid("spec.size: must not be negative")
        if size == 7:
            raise RuntimeError("unlucky")
        if size == 3:
            req.warn("size 3 is deprecated")

    async def default(obj, req):
        obj["spec"].setdefault("color", "blue")
        obj.setdefault("metadata", {}).setdefault("labels", {})["touched-by"] = req.user_info["username"]
        return obj

    def convert(obj, desired):
        obj = dict(obj)
        spec = dict(obj.get("spec") or {})
        if desired == "example.com/v2":
            spec["sizeInches"] = spec.pop("size", 0)
        obj["spec"] = spec
        return obj

    srv = WebhookServer(port=0)
    srv.validating("/validate", check)
    srv.mutating("/mutate", default)
    srv.conversion("/convert", convert)
    async with srv:
        yield srv


async def test_validating_allows_and_denies_with_message_and_code(server):
    status, body = await post(server, "/validate", review(widget(size=5)))
    assert status == 200 and body["response"] == {"uid": "u-1", "allowed": True}
    status, body = await post(server, "/validate", review(widget(size=11), uid="u-2"))
    resp = body["response"]
    assert resp["uid"] == "u-2" and resp["allowed"] is False
    assert resp["status"]["code"] == 403 and resp["status"]["message"] == "size 11 is over 10"
    _, body = await post(server, "/validate", review(widget(size=-1)))
    assert body["response"]["status"]["code"] == 422 and "must not be negative" in body["response"]["status"]["message"]


async def test_handler_exception_is_a_denial_not_a_500(server, caplog):
    status, body = await post(server, "/validate", review(widget(size=7)))
    assert status == 200
    assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 500
    assert "unlucky" in body["response"]["status"]["message"]


async def test_warnings_are_passed_back(server):
    _, body = await post(server, "/validate", review(widget(size=3)))
    assert body["response"]["allowed"] is True and body["response"]["warnings"] == ["size 3 is deprecated"]


async def test_mutating_answers_a_json_patch_of_the_changes(server):
    _, body = await post(server, "/mutate", review(widget(size=1)))
    resp = body["response"]
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(resp["patch"]))
    assert {"op": "add", "path": "/spec/color", "value": "blue"} in ops
    assert {"op": "add", "path": "/metadata/labels", "value": {"touched-by": "alice"}} in ops


async def test_mutating_without_changes_sends_no_patch(server):
    obj = widget(size=1, color="red")
    obj["metadata"]["labels"] = {"touched-by": "alice"}
    _, body = await post(server, "/mutate", review(obj))
    assert body["response"] == {"uid": "u-1", "allowed": True}


async def test_conversion_converts_every_object_to_the_desired_version(server):
    req = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
           "request": {"uid": "c-1", "desiredAPIVersion": "example.com/v2",
                       "objects": [widget(size=2), widget(size=4)]}}
    _, body = await post(server, "/convert", req)
    resp = body["response"]
    assert resp["uid"] == "c-1" and resp["result"] == {"status": "Success"}
    assert [o["spec"] for o in resp["convertedObjects"]] == [{"sizeInches": 2}, {"sizeInches": 4}]
    assert {o["apiVersion"] for o in resp["convertedObjects"]} == {"example.com/v2"}


@pytest.mark.parametrize("body", [b"not json", b"[]", orjson.dumps({"kind": "AdmissionReview"}),
                                  orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                                "request": {"operation": "CREATE"}})])
async def test_a_body_that_is_not_a_review_is_a_400(server, body):
    status, _ = await post(server, "/validate", body)
    assert status == 400


async def test_oversized_body_is_refused_413(server):
    status, _ = await post(server, "/validate", b"{" + b" " * (MAX_BODY + 10) + b"}")
    assert status == 413


async def test_slow_handler_is_cancelled_and_denied():
    release = asyncio.Event()

    async def slow(req):
        await release.wait()

    srv = WebhookServer(port=0, handler_timeout=0.2)
    srv.validating("/slow", slow)
    async with srv:
        _, body = await post(srv, "/slow", review(widget()))
    assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 504


async def test_health_endpoints(server):
    async with aiohttp.ClientSession() as session:
        for path in ("/healthz", "/readyz"):
            async with session.get(server.url + path, ssl=trust(server)) as resp:
                assert resp.status == 200


def test_registration_rules():
    srv = WebhookServer(port=0)
    srv.validating("/v", lambda r: None)
    with pytest.raises(ValueError):
        srv.validating("/v", lambda r: None)
    with pytest.raises(ValueError):
        srv.mutating("no-slash", lambda o, r: o)


async def _peer_cert(server: WebhookServer, ca: bytes) -> x509.Certificate:
    ctx = ssl.create_default_context(cadata=ca.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


def _mount(src: Path, dst: Path) -> None:
    """Lay out ``src``'s generated files as a kubernetes.io/tls Secret volume (tls.crt, tls.key, ca.crt)."""
    dst.mkdir(exist_ok=True)
    shutil.copy(src / "server.crt", dst / "tls.crt.new")
    shutil.copy(src / "server.key", dst / "tls.key.new")
    shutil.copy(src / "ca.crt", dst / "ca.crt")
    (dst / "tls.key.new").replace(dst / "tls.key")
    (dst / "tls.crt.new").replace(dst / "tls.crt")


async def test_mounted_certificate_is_served_and_reloaded_when_it_changes(tmp_path):
    ensure_certs(tmp_path / "one", ["127.0.0.1"])
    ensure_certs(tmp_path / "two", ["127.0.0.1"])
    mounted = tmp_path / "secret"
    _mount(tmp_path / "one", mounted)
    clock = FakeClock()
    srv = WebhookServer(port=0, cert_dir=str(mounted), cert_reload_interval=5.0, clock=clock)
    srv.validating("/v", lambda r: None)
    async with srv:
        first = await _peer_cert(srv, (tmp_path / "one" / "ca.crt").read_bytes())
        assert srv.ca_bundle == (tmp_path / "one" / "ca.crt").read_bytes()
        _mount(tmp_path / "two", mounted)
        second_ca = (tmp_path / "two" / "ca.crt").read_bytes()

        async def rotated() -> bool:
            clock.step(5.0)
            try:
                cert = await _peer_cert(srv, second_ca)
            except ssl.SSLError:
                return False
            return cert.serial_number != first.serial_number

        await wait_until(rotated, timeout=60, what="the rotated certificate served")
        assert not (mounted / "server.crt").exists()  # a mounted secret is never overwritten


async def test_a_mismatched_pair_on_disk_is_never_loaded_and_the_previous_chain_stays_served(tmp_path):
    ensure_certs(tmp_path / "one", ["127.0.0.1"])
    ensure_certs(tmp_path / "two", ["127.0.0.1"])
    mounted = tmp_path / "secret"
    _mount(tmp_path / "one", mounted)
    srv = WebhookServer(port=0, cert_dir=str(mounted), cert_reload_interval=5.0, clock=FakeClock())
    srv.validating("/v", lambda r: None)
    async with srv:
        first_ca = (tmp_path / "one" / "ca.crt").read_bytes()
        first = await _peer_cert(srv, first_ca)
        shutil.copy(tmp_path / "two" / "server.crt", mounted / "tls.crt")  # the new cert, the old key: mid-rotation
        assert srv.certs is not None and srv.certs.refresh() is False
        assert (await _peer_cert(srv, first_ca)).serial_number == first.serial_number


async def test_generated_certificate_names_the_hosts(tmp_path):
    srv = WebhookServer(port=0, hosts=["webhook.example.svc"])
    srv.validating("/v", lambda r: None)
    async with srv:
        cert = await _peer_cert(srv, srv.ca_bundle)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "webhook.example.svc" in sans.get_values_for_type(x509.DNSName)
        config = srv.client_config("/v")
        assert config["url"] == f"https://127.0.0.1:{srv.port}/v"
        assert base64.b64decode(config["caBundle"]) == srv.ca_bundle
