"""Serving certificates, bearer-token authentication and the ``kinformer serve`` helpers."""

from __future__ import annotations

import argparse
import base64
import ipaddress
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest
import yaml
from aiohttp import web
from cryptography import x509

from kinformer.server.auth.authentication import USER_KEY, UserInfo, is_public, load_token_file, token_auth_middleware
from kinformer.server.cli import add_arguments, ensure_admin_token, is_loopback, main, write_kubeconfig
from kinformer.server.endpoints import discovery
from kinformer.server.registry.resources import Registry
from kinformer.tls import client_ssl_context, ensure_certs, server_ssl_context

# -- certificates ----------------------------------------------------------------------------------


def _sans(path: Path) -> list[object]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


def test_ensure_certs_generates_then_reuses(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "pki")
    for p in (paths.ca_cert, paths.ca_key, paths.server_cert, paths.server_key):
        assert p.is_file()
    assert stat.S_IMODE(paths.server_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.ca_key.stat().st_mode) == 0o600
    sans = _sans(paths.server_cert)
    assert x509.IPAddress(ipaddress.ip_address("127.0.0.1")) in sans and x509.DNSName("localhost") in sans
    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    server = x509.load_pem_x509_certificate(paths.server_cert.read_bytes())
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True

    before = {p: p.read_bytes() for p in (paths.ca_cert, paths.server_cert, paths.server_key)}
    again = ensure_certs(tmp_path / "pki")
    assert again == paths
    assert {p: p.read_bytes() for p in before} == before


def test_new_host_reissues_server_cert_with_same_ca(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path)
    ca_before, server_before = paths.ca_cert.read_bytes(), paths.server_cert.read_bytes()
    ensure_certs(tmp_path, hosts=("127.0.0.1", "localhost", "10.1.2.3", "example.test"))
    assert paths.ca_cert.read_bytes() == ca_before
    assert paths.server_cert.read_bytes() != server_before
    sans = _sans(paths.server_cert)
    assert x509.DNSName("example.test") in sans and x509.IPAddress(ipaddress.ip_address("10.1.2.3")) in sans


def test_corrupt_ca_is_regenerated(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path)
    paths.ca_key.write_bytes(b"garbage")
    ensure_certs(tmp_path)
    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    x509.load_pem_x509_certificate(paths.server_cert.read_bytes()).verify_directly_issued_by(ca)


# -- authentication --------------------------------------------------------------------------------


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    paths = ensure_certs(tmp_path / "pki")
    app = web.Application(middlewares=[token_auth_middleware({"s3cret": "alice", "other": UserInfo("bob")})])
    app.add_routes(discovery.routes(Registry()))

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def whoami(request: web.Request) -> web.Response:
        return web.json_response({"user": request[USER_KEY].name})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez/ping", healthz)
    app.router.add_get("/whoami", whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(paths))
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"https://127.0.0.1:{port}", paths.ca_cert
    finally:
        await runner.cleanup()


async def test_https_with_bearer_token(tls_server: tuple[str, Path]) -> None:
    url, ca = tls_server
    ctx = client_ssl_context(ensure_certs(ca.parent))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        async with session.get(f"{url}/api", headers={"Authorization": "Bearer s3cret"}) as resp:
            assert resp.status == 200 and (await resp.json())["kind"] == "APIVersions"
        async with session.get(f"{url}/whoami", headers={"Authorization": "bearer other"}) as resp:
            assert (await resp.json()) == {"user": "bob"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic czNjcmV0"},
                        {"Authorization": "Bearer "}, {"Authorization": "Bearer s3cret2"}):
            async with session.get(f"{url}/api/v1", headers=headers) as resp:
                assert resp.status == 401
                body = orjson.loads(await resp.read())
                assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
        for path in ("/version", "/version/", "/healthz", "/livez/ping"):
            async with session.get(url + path) as resp:
                assert resp.status == 200, path


async def test_untrusted_client_is_rejected(tls_server: tuple[str, Path]) -> None:
    url, _ = tls_server
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(f"{url}/version")


def test_public_paths() -> None:
    assert is_public("/healthz") and is_public("/readyz/etcd") and is_public("/version/")
    assert not is_public("/api") and not is_public("/healthzx") and not is_public("/versions")


def test_load_token_file(tmp_path: Path) -> None:
    f = tmp_path / "tokens.csv"
    f.write_text('# comment\n\nt1,alice,uid-1,"dev,ops"\nt2,bob,uid-2\n', encoding="utf-8")
    tokens = load_token_file(f)
    assert tokens == {"t1": UserInfo("alice", "uid-1", ("dev", "ops")), "t2": UserInfo("bob", "uid-2")}
    f.write_text("t1,alice\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokens\.csv:1"):
        load_token_file(f)
    f.write_text("t1,a,1\nt1,b,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate"):
        load_token_file(f)


def test_empty_token_is_refused() -> None:
    with pytest.raises(ValueError):
        token_auth_middleware({"": "nobody"})


# -- kinformer serve helpers -----------------------------------------------------------------------


def test_write_kubeconfig(tmp_path: Path) -> None:
    paths = ensure_certs(tmp_path / "pki")
    out = write_kubeconfig(tmp_path / "kc" / "config", "https://127.0.0.1:6443", paths.ca_cert, "tok")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    cfg = yaml.safe_load(out.read_text())
    assert cfg["current-context"] == "kinformer"
    cluster = cfg["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == paths.ca_cert.read_bytes()
    assert cfg["users"][0]["user"] == {"token": "tok"}
    plain = yaml.safe_load(write_kubeconfig(tmp_path / "plain", "http://127.0.0.1:1", None, None, "dev").read_text())
    assert plain["clusters"][0] == {"name": "dev", "cluster": {"server": "http://127.0.0.1:1"}}
    assert plain["users"][0] == {"name": "dev", "user": {}}


def test_admin_token_is_stable(tmp_path: Path) -> None:
    token = ensure_admin_token(tmp_path)
    assert len(token) >= 32 and ensure_admin_token(tmp_path) == token
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_serve_defaults() -> None:
    args = _parse([])
    assert (args.host, args.port, args.data, args.tls, args.storage) == ("127.0.0.1", 6443, ".kinformer", True, None)
    assert _parse(["--no-tls"]).tls is False


def test_serve_refuses_a_bad_storage_url_before_writing_anything(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert main(_parse(["--storage", "postgres://db", "--data", str(data), "--port", "0"])) == 2
    err = capsys.readouterr().err
    assert "--storage" in err and "etcd://HOST:PORT" in err and "sqlite://" in err, err
    assert not data.exists()  # no pki/, no token


def test_serve_refuses_public_address_without_tls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_parse(["--host", "0.0.0.0", "--no-tls", "--data", str(tmp_path)])) == 2
    assert "refusing" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
