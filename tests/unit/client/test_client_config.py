"""kubeconfig loading and merging, exec credential plugins, in-cluster config, TLS context building."""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import textwrap
from pathlib import Path

import pytest
import trustme
import yaml

from kinformer.client import Client
from kinformer.client.config import ClientConfig, StaticTokenAuth, TokenFileAuth, build_ssl_context
from kinformer.client.exec import ExecCredentialError, ExecCredentialProvider
from kinformer.client.incluster import in_cluster_config, is_in_cluster
from kinformer.client.kubeconfig import ConfigError, KubeConfig, default_kubeconfig_paths, load_kubeconfig


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def write(path: Path, doc: dict) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def kubeconfig(cluster: str, user: str, ctx: str, current: str | None = None, **cluster_extra: object) -> dict:
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": f"https://{cluster}.example:6443", **cluster_extra}}],
        "users": [{"name": user, "user": {"token": f"token-{user}"}}],
        "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": user, "namespace": f"ns-{ctx}"}}],
    }
    if current:
        doc["current-context"] = current
    return doc


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def test_default_paths() -> None:
    assert default_kubeconfig_paths({"KUBECONFIG": f"/a{os.pathsep}{os.pathsep}/b"}) == ["/a", "/b"]
    assert default_kubeconfig_paths({})[0].endswith(os.path.join(".kube", "config"))


async def test_merge_first_file_wins(tmp_path: Path) -> None:
    a = kubeconfig("c1", "u1", "ctx1", current="ctx1")
    a["users"].append({"name": "shared", "user": {"token": "from-a"}})
    b = kubeconfig("c2", "u2", "ctx2", current="ctx2")
    b["users"].append({"name": "shared", "user": {"token": "from-b"}})
    b["contexts"].append({"name": "ctx3", "context": {"cluster": "c1", "user": "shared"}})
    pa, pb = write(tmp_path / "a", a), write(tmp_path / "b", b)
    kc = KubeConfig.load([pa, str(tmp_path / "missing"), pb])
    assert kc.current_context == "ctx1"
    cfg = kc.client_config()
    assert cfg.server == "https://c1.example:6443" and cfg.default_namespace == "ns-ctx1"
    assert await cfg.auth.headers() == {"Authorization": "Bearer token-u1"}
    cfg2 = kc.client_config("ctx2")
    assert cfg2.server == "https://c2.example:6443" and cfg2.default_namespace == "ns-ctx2"
    cfg3 = kc.client_config("ctx3")
    assert await cfg3.auth.headers() == {"Authorization": "Bearer from-a"}
    assert cfg3.default_namespace == "default"
    with pytest.raises(ConfigError):
        kc.client_config("nope")
    with pytest.raises(ConfigError):
        KubeConfig.load([str(tmp_path / "missing")])


async def test_from_kubeconfig_uses_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pa = write(tmp_path / "a", kubeconfig("c1", "u1", "ctx1"))
    pb = write(tmp_path / "b", kubeconfig("c2", "u2", "ctx2", current="ctx2"))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([pa, pb]))
    client = await Client.from_kubeconfig()
    assert client.url == "https://c2.example:6443" and client.default_namespace == "ns-ctx2"
    client = await Client.from_kubeconfig(context="ctx1")
    assert client.url == "https://c1.example:6443"
    await client.close()


def test_tls_material_data_and_files(tmp_path: Path, ca: trustme.CA) -> None:
    cert = ca.issue_cert("client")
    ca_pem = ca.cert_pem.bytes()
    doc = kubeconfig("c1", "u1", "ctx1", current="ctx1", **{"certificate-authority-data": b64(ca_pem),
                                                            "tls-server-name": "api.internal"})
    doc["users"][0]["user"] = {"client-certificate-data": b64(cert.cert_chain_pems[0].bytes()),
                               "client-key-data": b64(cert.private_key_pem.bytes())}
    cfg = load_kubeconfig(write(tmp_path / "kc", doc))
    assert cfg.ca_data == ca_pem.decode() and cfg.tls_server_name == "api.internal"
    assert cfg.client_cert_data and cfg.client_key_data and cfg.auth is None
    ctx = build_ssl_context(cfg)
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED

    # files, relative to the kubeconfig's directory
    (tmp_path / "certs").mkdir()
    ca.cert_pem.write_to_path(str(tmp_path / "certs" / "ca.crt"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "certs" / "c.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "certs" / "c.key"))
    doc = kubeconfig("c1", "u1", "ctx1", current="ctx1", **{"certificate-authority": "certs/ca.crt"})
    doc["users"][0]["user"] = {"client-certificate": "certs/c.crt", "client-key": "certs/c.key"}
    cfg = load_kubeconfig(write(tmp_path / "kc2", doc))
    assert cfg.ca_file == str(tmp_path / "certs" / "ca.crt")
    assert cfg.client_cert_file == str(tmp_path / "certs" / "c.crt")
    assert isinstance(build_ssl_context(cfg), ssl.SSLContext)


def test_insecure_and_token_file(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("file-token\n")
    doc = kubeconfig("c1", "u1", "ctx1", current="ctx1", **{"insecure-skip-tls-verify": True})
    doc["users"][0]["user"] = {"tokenFile": "tok"}
    cfg = load_kubeconfig(write(tmp_path / "kc", doc))
    assert cfg.verify is False
    assert isinstance(cfg.auth, TokenFileAuth) and cfg.auth.path == str(tmp_path / "tok")
    ctx = build_ssl_context(cfg)
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    assert build_ssl_context(ClientConfig(server="http://127.0.0.1:1")) is True


def test_unsupported_auth_provider(tmp_path: Path) -> None:
    doc = kubeconfig("c1", "u1", "ctx1", current="ctx1")
    doc["users"][0]["user"] = {"auth-provider": {"name": "gcp"}}
    with pytest.raises(ConfigError, match="gcp"):
        load_kubeconfig(write(tmp_path / "kc", doc))


async def test_token_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one")
    now = [0.0]
    auth = TokenFileAuth(str(path), recheck=60.0, clock=lambda: now[0])
    assert await auth.headers() == {"Authorization": "Bearer one"}
    path.write_text("second")  # size changes -> re-read at once
    assert await auth.headers() == {"Authorization": "Bearer second"}
    path.write_text("third!")  # same size; mtime may not move on coarse filesystems
    os.utime(path, (1, 1))
    assert await auth.headers() == {"Authorization": "Bearer third!"}
    path.write_text("fourth")
    os.utime(path, (1, 1))  # same size and mtime: only the periodic recheck sees it
    assert await auth.headers() == {"Authorization": "Bearer third!"}
    now[0] = 61.0
    assert await auth.headers() == {"Authorization": "Bearer fourth"}
    assert await StaticTokenAuth("t").refresh() is False


PLUGIN = textwrap.dedent("""
    import json, os, sys
    state = sys.argv[1]
    n = int(open(state).read()) + 1 if os.path.exists(state) else 1
    open(state, "w").write(str(n))
    open(state + ".info", "w").write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n" + os.environ.get("EXTRA", ""))
    mode = sys.argv[2]
    if mode == "fail":
        print("boom", file=sys.stderr); sys.exit(3)
    if mode == "garbage":
        print("not json"); sys.exit(0)
    status = {"token": f"exec-token-{n}"}
    if mode == "expiring":
        status["expirationTimestamp"] = sys.argv[3]
    print(json.dumps({"apiVersion": sys.argv[4] if len(sys.argv) > 4 else "client.authentication.k8s.io/v1",
                      "kind": "ExecCredential", "status": status}))
""")


def plugin_spec(tmp_path: Path, mode: str, *extra: str, api: str = "client.authentication.k8s.io/v1") -> dict:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return {"apiVersion": api, "command": sys.executable,
            "args": [str(script), str(tmp_path / "state"), mode, *extra, *( [api] if extra else [])],
            "env": [{"name": "EXTRA", "value": "hello"}], "provideClusterInfo": True}


async def test_exec_plugin_token_cached_without_expiry(tmp_path: Path) -> None:
    p = ExecCredentialProvider(plugin_spec(tmp_path, "plain"), cluster={"server": "https://x"})
    assert await p.headers() == {"Authorization": "Bearer exec-token-1"}
    assert await p.headers() == {"Authorization": "Bearer exec-token-1"}
    assert p.runs == 1
    info_text, extra = (tmp_path / "state.info").read_text().split("\n")
    info = json.loads(info_text)
    assert info["kind"] == "ExecCredential" and info["apiVersion"] == "client.authentication.k8s.io/v1"
    assert info["spec"]["cluster"]["server"] == "https://x" and extra == "hello"
    assert await p.refresh() is True  # after a 401
    assert await p.headers() == {"Authorization": "Bearer exec-token-2"} and p.runs == 2


async def test_exec_plugin_reruns_after_expiry(tmp_path: Path) -> None:
    now = [1_000_000_000.0]  # 2001-09-09T01:46:40Z
    spec = plugin_spec(tmp_path, "expiring", "2001-09-09T01:47:40Z", api="client.authentication.k8s.io/v1beta1")
    p = ExecCredentialProvider(spec, clock=lambda: now[0])
    assert await p.headers() == {"Authorization": "Bearer exec-token-1"}
    now[0] += 59
    assert await p.headers() == {"Authorization": "Bearer exec-token-1"}
    now[0] += 2
    assert await p.headers() == {"Authorization": "Bearer exec-token-2"}
    assert p.runs == 2


async def test_exec_plugin_errors(tmp_path: Path) -> None:
    with pytest.raises(ExecCredentialError, match="exited 3: boom"):
        await ExecCredentialProvider(plugin_spec(tmp_path, "fail")).headers()
    with pytest.raises(ExecCredentialError, match="invalid JSON"):
        await ExecCredentialProvider(plugin_spec(tmp_path, "garbage")).headers()
    with pytest.raises(ExecCredentialError, match=r"could not run.*install me"):
        await ExecCredentialProvider({"command": str(tmp_path / "missing"), "installHint": "install me"}).headers()
    with pytest.raises(ExecCredentialError, match="apiVersion"):
        ExecCredentialProvider({"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"})


async def test_exec_plugin_from_kubeconfig(tmp_path: Path) -> None:
    doc = kubeconfig("c1", "u1", "ctx1", current="ctx1")
    doc["users"][0]["user"] = {"exec": plugin_spec(tmp_path, "plain")}
    cfg = load_kubeconfig(write(tmp_path / "kc", doc))
    assert isinstance(cfg.auth, ExecCredentialProvider)
    assert cfg.auth.cluster["server"] == "https://c1.example:6443"
    assert await cfg.auth.headers() == {"Authorization": "Bearer exec-token-1"}


async def test_in_cluster_config(tmp_path: Path, ca: trustme.CA) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert not is_in_cluster(env, str(sa))
    with pytest.raises(ConfigError):
        in_cluster_config(env, str(sa))
    with pytest.raises(ConfigError):
        in_cluster_config({}, str(sa))
    (sa / "token").write_text("sa-token-1")
    ca.cert_pem.write_to_path(str(sa / "ca.crt"))
    (sa / "namespace").write_text("team-a\n")
    assert is_in_cluster(env, str(sa))
    cfg = in_cluster_config(env, str(sa))
    assert cfg.server == "https://10.0.0.1:443" and cfg.ca_file == str(sa / "ca.crt")
    assert cfg.default_namespace == "team-a"
    assert await cfg.auth.headers() == {"Authorization": "Bearer sa-token-1"}
    (sa / "token").write_text("sa-token-rotated")
    assert await cfg.auth.headers() == {"Authorization": "Bearer sa-token-rotated"}
    client = Client.in_cluster(env=env, sa_dir=str(sa))
    assert client.url == "https://10.0.0.1:443" and client.default_namespace == "team-a"
    assert in_cluster_config({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
                             str(sa)).server == "https://[fd00::1]:443"


def test_client_constructor_accepts_pem_or_paths(tmp_path: Path, ca: trustme.CA) -> None:
    pem = ca.cert_pem.bytes().decode()
    c = Client("https://h:1/", ca=pem, token="t")
    assert c.url == "https://h:1" and c.config.ca_data == pem and c.config.ca_file is None
    c = Client("https://h:1", ca=str(tmp_path / "ca.crt"), token_file=str(tmp_path / "t"))
    assert c.config.ca_file == str(tmp_path / "ca.crt") and isinstance(c.config.auth, TokenFileAuth)
    with pytest.raises(ValueError):
        Client()
