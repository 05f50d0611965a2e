"""The real kubectl against the embedded API server.

Most tests share one ``kinformer serve`` subprocess (HTTPS with its generated CA, a generated bearer
token and the kubeconfig it writes), so the CLI, TLS and token authentication are exercised exactly
as a user meets them. One test runs an in-process ``APIServer`` over plain HTTP without auth.
Every kubectl call has a timeout; waits poll a condition until a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectllib import CALL_TIMEOUT, KUBECTL, Kubectl, serve
from testlib import wait_until_sync

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH (install Debian's kubectl)"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubectl, Path]]:
    """``kinformer serve --port 0`` with TLS + token; yields kubectl bound to its kubeconfig, and the data dir."""
    data = tmp_path_factory.mktemp("serve")
    home = tmp_path_factory.mktemp("home")
    with serve(data, "--bare", "--storage", "memory") as server:
        yield Kubectl(kubeconfig=server.kubeconfig, home=home), data


@pytest.fixture
def kubectl(served: tuple[Kubectl, Path]) -> Kubectl:
    return served[0]


@pytest.fixture
def ns(kubectl: Kubectl, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test (created with ``kubectl create namespace``)."""
    name = "t-" + request.node.name.removeprefix("test_").replace("_", "-")[:40].rstrip("-")
    kubectl.run("create", "namespace", name)
    return name


# -- the served kubeconfig ------------------------------------------------------------------------


def test_kubeconfig_is_https_with_token(served: tuple[Kubectl, Path]) -> None:
    kubectl, data = served
    cfg = yaml.safe_load(kubectl.kubeconfig.read_text())
    assert cfg["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    assert cfg["users"][0]["user"]["token"] == (data / "token").read_text().strip()


def test_wrong_token_is_unauthorized(served: tuple[Kubectl, Path], tmp_path: Path) -> None:
    kubectl, _ = served
    cfg = yaml.safe_load(kubectl.kubeconfig.read_text())
    cfg["users"][0]["user"]["token"] = "not-the-token"
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(yaml.safe_dump(cfg))
    proc = Kubectl(bad, kubectl.home).run("get", "configmaps", "-n", "default", check=False)
    assert proc.returncode != 0
    assert "Unauthorized" in proc.stderr or "must be logged in" in proc.stderr


# -- discovery and reads ---------------------------------------------------------------------------


def test_version(kubectl: Kubectl) -> None:
    out = kubectl.run("version", "-o", "json").stdout
    server = json.loads(out)["serverVersion"]
    assert server["major"] == "1" and server["minor"] == "32"


def test_get_namespaces(kubectl: Kubectl) -> None:
    out = kubectl.run("get", "ns").stdout
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert name in out


def test_get_apiservices(kubectl: Kubectl) -> None:
    rows = {line.split()[0]: line.split()[1:3] for line in kubectl.run("get", "apiservices", "--no-headers")
            .stdout.splitlines()}
    assert rows["v1."] == ["Local", "True"] and rows["v2.autoscaling"] == ["Local", "True"]
    assert len(rows) == 20  # kube 1.32's built-in group versions


def test_api_resources(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    rows = {tuple(line.split()[:2]) for line in out.splitlines()[1:]}
    assert ("configmaps", "cm") in rows and ("deployments", "deploy") in rows and ("namespaces", "ns") in rows
    assert "customresourcedefinitions" in out and "leases" in out
    wide = kubectl.run("api-resources", "-o", "wide", "--no-headers").stdout
    by_name = {}
    for line in wide.splitlines():
        cells = line.split()
        by_name.setdefault(cells[0], []).append(cells)
    # kube 1.32's defaults: 58 resources in the preferred versions (autoscaling/v1 is not listed).
    assert sum(len(v) for v in by_name.values()) == 58
    for name in ("jobs", "cronjobs", "roles", "rolebindings", "ingresses", "poddisruptionbudgets",
                 "persistentvolumeclaims", "endpointslices", "storageclasses", "selfsubjectaccessreviews"):
        assert name in by_name, name
    assert by_name["persistentvolumeclaims"][0][1] == "pvc"
    assert by_name["selfsubjectaccessreviews"][0][-1] == "create"
    assert kubectl.run("get", "all", "-n", "default").returncode == 0


def test_explain_at_depth(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "deployment.spec.template.spec.containers").stdout
    assert "KIND:       Deployment" in out and "FIELD: containers <[]Container>" in out
    assert "imagePullPolicy\t<string>" in out and "ports\t<[]ContainerPort>" in out
    deep = kubectl.run("explain", "deploy.spec.template.spec.containers.ports.containerPort").stdout
    assert "FIELD: containerPort <integer>" in deep and "Number of port to expose" in deep
    rec = kubectl.run("explain", "cronjobs.spec.jobTemplate.spec.template.spec", "--recursive").stdout
    assert "containers\t<[]Container> -required-" in rec
    v2 = kubectl.run("explain", "pods.spec.containers.ports", "--output=plaintext-openapiv2").stdout
    assert "RESOURCE: ports <[]Object>" in v2 and "containerPort" in v2 and "-required-" in v2


def test_create_file_and_get_json_yaml(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns},
          "data": {"color": "blue"}}
    out = kubectl.run("create", "-f", "-", input=yaml.safe_dump(cm)).stdout
    assert "configmap/settings created" in out
    got = kubectl.json("get", "configmap", "settings", "-n", ns)
    assert got["data"] == {"color": "blue"} and got["metadata"]["uid"] and got["metadata"]["resourceVersion"]
    as_yaml = yaml.safe_load(kubectl.run("get", "cm", "settings", "-n", ns, "-o", "yaml").stdout)
    assert as_yaml["data"] == {"color": "blue"}
    listed = kubectl.json("get", "configmaps", "-n", ns)
    # every namespace also holds kube-root-ca.crt, as on a cluster
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["kube-root-ca.crt",
                                                                                         "settings"]
    dup = kubectl.run("create", "-f", "-", input=yaml.safe_dump(cm), check=False)
    assert dup.returncode != 0 and "AlreadyExists" in dup.stderr


def test_create_with_unknown_field_is_rejected(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "namespace": ns}, "dataa": {}}
    proc = kubectl.run("create", "-f", "-", input=yaml.safe_dump(cm), check=False)
    assert proc.returncode != 0
    assert 'unknown field "dataa"' in proc.stderr


def test_apply_with_misspelled_nested_field_fails(kubectl: Kubectl, ns: str) -> None:
    for field, where in (("containerPrt", "spec.template.spec.containers[0].ports[0]"), ("replica", "spec")):
        port: dict[str, Any] = {"containerPort": 80}
        spec: dict[str, Any] = {
            "selector": {"matchLabels": {"app": "typo"}},
            "template": {"metadata": {"labels": {"app": "typo"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [port]}]}}}
        (port if field == "containerPrt" else spec)[field] = 1
        name = f"typo-{field.lower()}"
        doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
               "spec": spec}
        proc = kubectl.run("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
        assert proc.returncode != 0
        assert f'unknown field "{where}.{field}"' in proc.stderr
        assert not kubectl.exists("deployment", name, "-n", ns)


# -- imperative creates (protobuf bodies) -----------------------------------------------------------


def test_create_configmap_secret_namespace(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "configmap", "lit", "-n", ns, "--from-literal=a=1", "--from-literal=b=two")
    assert kubectl.json("get", "cm", "lit", "-n", ns)["data"] == {"a": "1", "b": "two"}
    kubectl.run("create", "secret", "generic", "pw", "-n", ns, "--from-literal=password=hunter2")
    secret = kubectl.json("get", "secret", "pw", "-n", ns)
    assert secret["type"] == "Opaque" and secret["data"] == {"password": "aHVudGVyMg=="}
    kubectl.run("create", "namespace", f"{ns}-extra")
    assert kubectl.json("get", "namespace", f"{ns}-extra")["status"]["phase"] == "Active"


def test_create_job_cronjob_role_rolebinding_ingress_pdb(kubectl: Kubectl, ns: str) -> None:
    n = ("-n", ns)
    kubectl.run("create", "job", "once", "--image=busybox", *n, "--", "echo", "hi")
    job = kubectl.json("get", "job", "once", *n)
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "busybox" and container["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    kubectl.run("create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", *n)
    cron = kubectl.json("get", "cronjob", "tick", *n)
    assert cron["spec"]["schedule"] == "*/5 * * * *"
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    kubectl.run("create", "role", "reader", "--verb=get,list", "--resource=pods", *n)
    role = kubectl.json("get", "role", "reader", *n)
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    kubectl.run("create", "rolebinding", "reader", "--role=reader", "--user=alice", *n)
    binding = kubectl.json("get", "rolebinding", "reader", *n)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
    kubectl.run("create", "ingress", "web", "--rule=example.com/app*=web:80", "--class=nginx", *n)
    ingress = kubectl.json("get", "ingress", "web", *n)
    [rule] = ingress["spec"]["rules"]
    [path] = rule["http"]["paths"]
    assert rule["host"] == "example.com" and path["path"] == "/app" and path["pathType"] == "Prefix"
    assert path["backend"] == {"service": {"name": "web", "port": {"number": 80}}}
    assert ingress["spec"]["ingressClassName"] == "nginx"
    kubectl.run("create", "pdb", "web", "--selector=app=web", "--min-available=50%", *n)
    pdb = kubectl.json("get", "pdb", "web", *n)
    assert pdb["spec"]["minAvailable"] == "50%" and pdb["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_create_quota_priorityclass_and_autoscale(kubectl: Kubectl, ns: str) -> None:
    n = ("-n", ns)
    kubectl.run("create", "quota", "q", "--hard=pods=10,requests.cpu=2", "--scopes=NotBestEffort", *n)
    quota = kubectl.json("get", "resourcequota", "q", *n)
    assert quota["spec"] == {"hard": {"pods": "10", "requests.cpu": "2"}, "scopes": ["NotBestEffort"]}
    kubectl.run("create", "priorityclass", f"{ns}-high", "--value=1000", "--description=urgent")
    pc = kubectl.json("get", "priorityclass", f"{ns}-high")
    assert (pc["value"], pc["description"], pc["preemptionPolicy"]) == (1000, "urgent", "PreemptLowerPriority")
    kubectl.run("create", "deployment", "web", "--image=nginx", *n)
    kubectl.run("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=80", *n)
    hpa = kubectl.json("get", "hpa", "web", *n)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    # kubectl autoscale writes autoscaling/v1; kubectl get reads the stored v2 object, converted as kube does
    assert hpa["apiVersion"] == "autoscaling/v2" and "targetCPUUtilizationPercentage" not in hpa["spec"]
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    raw = kubectl.run("get", "--raw", f"/apis/autoscaling/v1/namespaces/{ns}/horizontalpodautoscalers/web")
    v1 = json.loads(raw.stdout)
    assert v1["apiVersion"] == "autoscaling/v1" and v1["spec"]["targetCPUUtilizationPercentage"] == 80
    as_yaml = yaml.safe_load(kubectl.run("get", "hpa", "web", "-o", "yaml", *n).stdout)
    assert as_yaml["spec"]["metrics"] == hpa["spec"]["metrics"] and as_yaml["apiVersion"] == "autoscaling/v2"


def test_debug_adds_an_ephemeral_container_and_drain_style_eviction_deletes(kubectl: Kubectl, ns: str) -> None:
    n = ("-n", ns)
    kubectl.run("run", "p", "--image=nginx", *n)
    kubectl.run("debug", "p", "--image=busybox", "--container=dbg", "--profile=general", *n)
    pod = kubectl.json("get", "pod", "p", *n)
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["dbg"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": ns}}
    kubectl.run("create", "--raw", f"/api/v1/namespaces/{ns}/pods/p/eviction", "-f", "-", input=json.dumps(eviction))
    assert not kubectl.exists("pod", "p", *n)


def test_certificate_approve_gets_a_signed_client_certificate(kubectl: Kubectl, ns: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{ns}-user")])).sign(key, hashes.SHA256())
    csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
           "metadata": {"name": f"{ns}-user"},
           "spec": {"request": base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode(),
                    "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}}
    kubectl.apply_yaml(csr)
    kubectl.run("certificate", "approve", f"{ns}-user")
    deadline = time.monotonic() + 30
    while not kubectl.json("get", "csr", f"{ns}-user")["status"].get("certificate"):
        assert time.monotonic() < deadline, "the approved request was not signed"
        time.sleep(0.1)
    got = kubectl.json("get", "csr", f"{ns}-user")
    assert [c["type"] for c in got["status"]["conditions"]] == ["Approved"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(got["status"]["certificate"]))
    assert cert.subject.rfc4514_string() == f"CN={ns}-user"


# -- apply -----------------------------------------------------------------------------------------


def test_apply_client_side_twice_with_change(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "namespace": ns},
          "data": {"a": "1", "b": "2"}}
    assert "created" in kubectl.apply_yaml(cm).stdout
    assert "unchanged" in kubectl.apply_yaml(cm).stdout
    cm["data"] = {"a": "10", "c": "3"}
    assert "configured" in kubectl.apply_yaml(cm).stdout
    got = kubectl.json("get", "cm", "applied", "-n", ns)
    assert got["data"] == {"a": "10", "c": "3"}
    last = json.loads(got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"a": "10", "c": "3"}


def test_apply_prune_with_a_label_selector(kubectl: Kubectl, ns: str) -> None:
    def cm(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns, "labels": {"set": "pruned"}}, "data": {"k": name}}

    docs = [cm("keep"), cm("drop")]
    kubectl.run("apply", "-f", "-", "-l", "set=pruned", "--prune", input=yaml.safe_dump_all(docs))
    assert kubectl.exists("configmap", "drop", "-n", ns)
    # --prune walks kube's default allowlist of kinds (PVCs, Jobs, Ingresses, ...): all must be served.
    proc = kubectl.run("apply", "-f", "-", "-l", "set=pruned", "--prune", input=yaml.safe_dump(cm("keep")))
    assert "configmap/drop pruned" in proc.stdout
    assert not kubectl.exists("configmap", "drop", "-n", ns) and kubectl.exists("configmap", "keep", "-n", ns)


def test_apply_list_file(kubectl: Kubectl, ns: str) -> None:
    """``kind: List`` files (what ``get -o yaml`` prints for many objects) apply, and stay strictly validated."""
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"l{i}", "namespace": ns},
              "data": {"i": str(i)}} for i in range(2)]
    out = kubectl.run("apply", "-f", "-", input=yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert "configmap/l0 created" in out.stdout and "configmap/l1 created" in out.stdout
    exported = kubectl.run("get", "configmaps", "-n", ns, "-o", "yaml").stdout
    assert yaml.safe_load(exported)["kind"] == "List"
    reapplied = kubectl.run("apply", "-f", "-", input=exported).stdout
    assert "configmap/l0" in reapplied and "configmap/l1" in reapplied
    bad = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lbad", "namespace": ns}, "dataa": {}}]}
    rejected = kubectl.run("apply", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert rejected.returncode != 0 and 'unknown field "dataa"' in rejected.stderr


def _deployment(ns: str, image: str, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": image}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [container, {"name": "sidecar", "image": "busybox"}]}}},
    }


def test_apply_deployment_strategic(kubectl: Kubectl, ns: str) -> None:
    kubectl.apply_yaml(_deployment(ns, "nginx:1", [{"name": "A", "value": "1"}]))
    assert "configured" in kubectl.apply_yaml(_deployment(ns, "nginx:2", [{"name": "B", "value": "2"}])).stdout
    got = kubectl.json("get", "deploy", "web", "-n", ns)
    containers = {c["name"]: c for c in got["spec"]["template"]["spec"]["containers"]}
    assert containers["app"]["image"] == "nginx:2"
    assert containers["app"]["env"] == [{"name": "B", "value": "2"}]
    assert containers["sidecar"]["image"] == "busybox"
    assert got["metadata"]["generation"] == 2


def test_apply_server_side(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": ns}, "data": {"k": "v"}}
    assert "serverside-applied" in kubectl.apply_yaml(cm, "--server-side").stdout
    cm["data"] = {"k": "v2"}
    kubectl.apply_yaml(cm, "--server-side")
    got = kubectl.json("get", "cm", "ssa", "-n", ns, "--show-managed-fields")
    assert got["data"] == {"k": "v2"}
    managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    cm["data"] = {"k": "mine"}
    other = kubectl.run("apply", "--server-side", "--field-manager", "other", "-f", "-",
                        input=yaml.safe_dump(cm), check=False)
    assert other.returncode != 0 and "conflict" in other.stderr.lower()
    kubectl.run("apply", "--server-side", "--field-manager", "other", "--force-conflicts", "-f", "-",
                input=yaml.safe_dump(cm))
    assert kubectl.json("get", "cm", "ssa", "-n", ns)["data"] == {"k": "mine"}


# -- patch, label, annotate ------------------------------------------------------------------------


def test_patch_merge_json_strategic(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "configmap", "p", "-n", ns, "--from-literal=a=1")
    kubectl.run("patch", "cm", "p", "-n", ns, "--type", "merge", "-p", '{"data":{"b":"2","a":null}}')
    assert kubectl.json("get", "cm", "p", "-n", ns)["data"] == {"b": "2"}
    kubectl.run("patch", "cm", "p", "-n", ns, "--type", "json",
                "-p", '[{"op":"test","path":"/data/b","value":"2"},{"op":"add","path":"/data/c","value":"3"}]')
    assert kubectl.json("get", "cm", "p", "-n", ns)["data"] == {"b": "2", "c": "3"}
    failed = kubectl.run("patch", "cm", "p", "-n", ns, "--type", "json",
                         "-p", '[{"op":"test","path":"/data/b","value":"nope"}]', check=False)
    assert failed.returncode != 0

    kubectl.apply_yaml(_deployment(ns, "nginx:1"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:3"}]}}}}
    kubectl.run("patch", "deploy", "web", "-n", ns, "--type", "strategic", "-p", json.dumps(patch))
    containers = {c["name"]: c["image"] for c in
                  kubectl.json("get", "deploy", "web", "-n", ns)["spec"]["template"]["spec"]["containers"]}
    assert containers == {"app": "nginx:3", "sidecar": "busybox"}


def test_label_and_annotate(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "configmap", "l", "-n", ns)
    kubectl.run("label", "cm", "l", "-n", ns, "app=web", "tier=front")
    kubectl.run("label", "cm", "l", "-n", ns, "app=api", "--overwrite")
    kubectl.run("label", "cm", "l", "-n", ns, "tier-")
    kubectl.run("annotate", "cm", "l", "-n", ns, "note=hello")
    meta = kubectl.json("get", "cm", "l", "-n", ns)["metadata"]
    assert meta["labels"] == {"app": "api"}
    assert meta["annotations"]["note"] == "hello"
    refused = kubectl.run("label", "cm", "l", "-n", ns, "app=again", check=False)
    assert refused.returncode != 0
    names = kubectl.run("get", "cm", "-n", ns, "-l", "app=api", "-o", "name").stdout.split()
    assert names == ["configmap/l"]


def test_edit_status_subresource_and_dry_run(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\ns = open(p).read().replace('nginx:1', 'nginx:edited')\n"
                      "open(p, 'w').write(s)\n")
    kubectl.apply_yaml(_deployment(ns, "nginx:1"))
    env_editor = f"{sys.executable} {editor}"
    proc = subprocess.run([KUBECTL or "kubectl", "edit", "deploy", "web", "-n", ns], capture_output=True, text=True,
                          env={**kubectl.env(), "KUBE_EDITOR": env_editor}, timeout=CALL_TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr
    images = [c["image"] for c in kubectl.json("get", "deploy", "web", "-n", ns)["spec"]["template"]["spec"]
              ["containers"]]
    assert images == ["nginx:edited", "busybox"]

    kubectl.run("run", "pod1", "-n", ns, "--image=nginx")
    kubectl.run("patch", "pod", "pod1", "-n", ns, "--subresource=status", "--type=merge",
                "-p", '{"status":{"phase":"Running"}}')
    assert kubectl.json("get", "pod", "pod1", "-n", ns)["status"]["phase"] == "Running"

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry", "namespace": ns}}
    assert "server dry run" in kubectl.apply_yaml(cm, "--dry-run=server").stdout
    assert not kubectl.exists("cm", "dry", "-n", ns)
    kubectl.run("delete", "deploy", "web", "-n", ns, "--dry-run=server")
    assert kubectl.exists("deploy", "web", "-n", ns)


# -- delete, cascade, finalizers -------------------------------------------------------------------


def _owner_and_dependent(kubectl: Kubectl, ns: str, owner: str) -> dict[str, Any]:
    kubectl.run("create", "configmap", owner, "-n", ns)
    uid = kubectl.json("get", "cm", owner, "-n", ns)["metadata"]["uid"]
    dep = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": f"{owner}-child", "namespace": ns,
                        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
                                             "blockOwnerDeletion": True}]}}
    kubectl.run("create", "-f", "-", input=yaml.safe_dump(dep))
    return dep


def test_delete_cascade_background(kubectl: Kubectl, ns: str) -> None:
    _owner_and_dependent(kubectl, ns, "bg")
    kubectl.run("delete", "cm", "bg", "-n", ns, "--cascade=background")
    assert not kubectl.exists("cm", "bg", "-n", ns)
    wait_until_sync(lambda: not kubectl.exists("cm", "bg-child", "-n", ns), what="the dependent to be collected")


def test_delete_cascade_foreground(kubectl: Kubectl, ns: str) -> None:
    _owner_and_dependent(kubectl, ns, "fg")
    kubectl.run("delete", "cm", "fg", "-n", ns, "--cascade=foreground", "--timeout=20s")
    wait_until_sync(lambda: not kubectl.exists("cm", "fg", "-n", ns), what="the owner to go")
    assert not kubectl.exists("cm", "fg-child", "-n", ns)


def test_delete_cascade_orphan(kubectl: Kubectl, ns: str) -> None:
    _owner_and_dependent(kubectl, ns, "or")
    kubectl.run("delete", "cm", "or", "-n", ns, "--cascade=orphan", "--timeout=20s")
    wait_until_sync(lambda: not kubectl.exists("cm", "or", "-n", ns), what="the owner to go")
    child = kubectl.json("get", "cm", "or-child", "-n", ns)
    assert not child["metadata"].get("ownerReferences")


def test_finalizers_hold_deletion(kubectl: Kubectl, ns: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "held", "namespace": ns, "finalizers": ["example.com/hold"]}}
    kubectl.run("create", "-f", "-", input=yaml.safe_dump(cm))
    kubectl.run("delete", "cm", "held", "-n", ns, "--wait=false")
    got = kubectl.json("get", "cm", "held", "-n", ns)
    assert got["metadata"]["deletionTimestamp"]
    kubectl.run("patch", "cm", "held", "-n", ns, "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_until_sync(lambda: not kubectl.exists("cm", "held", "-n", ns), what="the finalized object to go")


# -- custom resources ------------------------------------------------------------------------------

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"color": {"type": "string"}, "size": {"type": "integer"}}},
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}},
        }],
    },
}


def test_crd_and_custom_resource_crud(kubectl: Kubectl, ns: str) -> None:
    kubectl.apply_yaml(CRD)
    kubectl.run("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=15s")
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": ns},
              "spec": {"color": "red", "size": 1}}
    kubectl.run("create", "-f", "-", input=yaml.safe_dump(widget))
    assert kubectl.json("get", "widgets", "w1", "-n", ns)["spec"] == {"color": "red", "size": 1}
    assert kubectl.run("get", "wd", "-n", ns, "-o", "name").stdout.split() == ["widget.example.com/w1"]
    widget["spec"]["color"] = "green"
    assert "configured" in kubectl.apply_yaml(widget).stdout
    kubectl.run("patch", "widget", "w1", "-n", ns, "--type", "merge", "-p", '{"spec":{"size":5}}')
    assert kubectl.json("get", "widget", "w1", "-n", ns)["spec"] == {"color": "green", "size": 5}
    bad = dict(widget, spec={"colour": "x"})
    rejected = kubectl.run("apply", "-f", "-", input=yaml.safe_dump(bad), check=False)
    assert rejected.returncode != 0 and "colour" in rejected.stderr
    kubectl.run("delete", "widget", "w1", "-n", ns)
    assert not kubectl.exists("widgets", "-n", ns)


# -- watch -----------------------------------------------------------------------------------------


def test_get_watch(kubectl: Kubectl, ns: str) -> None:
    """``get -w`` lists, then streams changes, and exits cleanly when its request timeout ends the watch."""
    assert KUBECTL is not None
    kubectl.run("create", "configmap", "before", "-n", ns)
    watcher = subprocess.Popen([KUBECTL, "get", "configmaps", "-n", ns, "-w", "-o", "name", "--request-timeout=6s"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env())
    try:
        assert watcher.stdout is not None
        initial = {watcher.stdout.readline().strip() for _ in range(2)}
        assert initial == {"configmap/before", "configmap/kube-root-ca.crt"}
        kubectl.run("create", "configmap", "during", "-n", ns)
        assert watcher.stdout.readline().strip() == "configmap/during"
        rest, err = watcher.communicate(timeout=20)
        assert watcher.returncode == 0, err
        assert rest.strip() == ""
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait(10)


# -- plain HTTP, in-process server -----------------------------------------------------------------


async def test_plain_http_without_auth(tmp_path: Path) -> None:
    from kinformer.server import APIServer
    from kinformer.server.cli import write_kubeconfig

    assert KUBECTL is not None
    async with APIServer(storage="memory", host="127.0.0.1", port=0, namespace_defaults=False) as server:
        assert server.url.startswith("http://127.0.0.1:")
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)

        async def kubectl(*args: str) -> tuple[int, str, str]:
            proc = await asyncio.create_subprocess_exec(
                KUBECTL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)})
            out, err = await asyncio.wait_for(proc.communicate(), CALL_TIMEOUT)
            return proc.returncode or 0, out.decode(), err.decode()

        code, out, err = await kubectl("get", "ns")
        assert code == 0, err
        assert "default" in out
        code, out, err = await kubectl("create", "configmap", "plain", "--from-literal=x=y")
        assert code == 0, err
        code, out, err = await kubectl("get", "cm", "plain", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["data"] == {"x": "y"}


async def test_kubectl_get_and_describe_show_what_the_event_recorder_wrote(tmp_path: Path) -> None:
    """The recorder writes events.k8s.io/v1 Events; kubectl reads core/v1 Events: one storage serves both."""
    from kinformer import Client, EventRecorder
    from kinformer.server import APIServer
    from kinformer.server.cli import write_kubeconfig

    assert KUBECTL is not None
    async with APIServer(storage="memory", namespace_defaults=False) as server, Client(server.url) as client:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server.url, None, None)
        kubectl = Kubectl(kubeconfig, tmp_path)
        cm = await client.create("configmaps", {"metadata": {"name": "settings"}, "data": {"a": "1"}},
                                 namespace="default")
        async with EventRecorder(client, "example.com/copier") as recorder:
            recorder.event(cm, "Warning", "CopyFailed", "the target namespace is gone")
            await recorder.flush()
        listed = (await asyncio.to_thread(kubectl.json, "get", "events", "-n", "default"))["items"]
        assert [(e["reason"], e["message"], e["type"], e["involvedObject"]["name"], e["reportingComponent"])
                for e in listed] == [("CopyFailed", "the target namespace is gone", "Warning", "settings",
                                      "example.com/copier")]
        table = (await asyncio.to_thread(kubectl.run, "get", "events", "-n", "default")).stdout
        assert "CopyFailed" in table and "configmap/settings" in table and "the target namespace is gone" in table
        described = (await asyncio.to_thread(kubectl.run, "describe", "configmap", "settings", "-n", "default")).stdout
        events_section = described.split("Events:", 1)[1]
        assert "CopyFailed" in events_section and "the target namespace is gone" in events_section


async def test_validating_webhook_denies_a_create_through_kubectl(kubectl: Kubectl, ns: str) -> None:
    """kubectl prints the webhook's denial; the object is not stored (the server calls this test's webhook)."""
    from kinformer.webhook import Denied, WebhookServer

    def deny_debug(req: Any) -> None:
        if (req.object or {}).get("data", {}).get("debug") == "true":
            raise Denied("debug mode is not allowed here")

    async with WebhookServer(port=0) as hooks:
        hooks.validating("/validate", deny_debug)
        await asyncio.to_thread(kubectl.run, "label", "namespace", ns, "webhooks=on")
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": f"deny-debug-{ns}"},
                  "webhooks": [{"name": "deny-debug.example.com", "clientConfig": hooks.client_config("/validate"),
                                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                           "resources": ["configmaps"]}],
                                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                                "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}
        await asyncio.to_thread(kubectl.apply_yaml, config)
        try:
            denied = await asyncio.to_thread(kubectl.run, "-n", ns, "create", "configmap", "dbg",
                                             "--from-literal=debug=true", check=False)
            assert denied.returncode != 0
            assert ('admission webhook "deny-debug.example.com" denied the request: debug mode is not allowed here'
                    in denied.stderr)
            assert not await asyncio.to_thread(kubectl.exists, "-n", ns, "configmap", "dbg")
            await asyncio.to_thread(kubectl.run, "-n", ns, "create", "configmap", "ok", "--from-literal=debug=false")
        finally:
            await asyncio.to_thread(kubectl.run, "delete", "validatingwebhookconfiguration", f"deny-debug-{ns}")


# -- identity and RBAC: auth can-i / whoami, create role|clusterrole|rolebinding|token, --as ---------------


def test_auth_whoami_is_the_admin_and_as_impersonates(kubectl: Kubectl) -> None:
    info = kubectl.json("auth", "whoami")["status"]["userInfo"]
    assert info["username"] == "kinformer-admin" and "system:masters" in info["groups"]
    info = kubectl.json("auth", "whoami", "--as", "bob", "--as-group", "dev", "--as-group", "ops")["status"]["userInfo"]
    assert info == {"username": "bob", "groups": ["dev", "ops", "system:authenticated"]}
    assert kubectl.run("auth", "can-i", "delete", "nodes").stdout.strip() == "yes"


def test_roles_bindings_and_can_i_as_a_user(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods", "-n", ns)
    kubectl.run("create", "rolebinding", "alice-pods", "--role=pod-reader", "--user=alice", "-n", ns)
    kubectl.run("create", "clusterrole", "node-reader", "--verb=get,list", "--resource=nodes")
    kubectl.run("create", "clusterrolebinding", f"{ns}-nodes", "--clusterrole=node-reader", "--group=ops")
    can = kubectl.run("auth", "can-i", "list", "pods", "-n", ns, "--as", "alice")
    assert (can.returncode, can.stdout.strip()) == (0, "yes")
    cannot = kubectl.run("auth", "can-i", "delete", "pods", "-n", ns, "--as", "alice", check=False)
    assert (cannot.returncode, cannot.stdout.strip()) == (1, "no")
    assert kubectl.run("auth", "can-i", "list", "pods", "-n", "default", "--as", "alice",
                       check=False).stdout.strip() == "no"
    assert kubectl.run("auth", "can-i", "list", "nodes", "--as", "bob", "--as-group", "ops").stdout.strip() == "yes"
    listed = kubectl.run("auth", "can-i", "--list", "-n", ns, "--as", "alice").stdout
    assert any(line.split()[:1] == ["pods"] and "[get list watch]" in line for line in listed.splitlines()), listed
    assert kubectl.run("get", "pods", "-n", ns, "--as", "alice").returncode == 0
    denied = kubectl.run("get", "secrets", "-n", ns, "--as", "alice", check=False)
    assert denied.returncode != 0
    assert ('Error from server (Forbidden): secrets is forbidden: User "alice" cannot list resource "secrets" in API '
            f'group "" in the namespace "{ns}"') in denied.stderr
    # escalation: alice may not grant what she does not hold
    kubectl.run("create", "role", "rbac-admin", "--verb=create", "--resource=roles.rbac.authorization.k8s.io",
                "-n", ns)
    kubectl.run("create", "rolebinding", "alice-rbac", "--role=rbac-admin", "--user=alice", "-n", ns)
    held = kubectl.run("create", "role", "mine", "--verb=get", "--resource=pods", "-n", ns, "--as", "alice")
    assert held.returncode == 0
    more = kubectl.run("create", "role", "more", "--verb=get", "--resource=secrets", "-n", ns, "--as", "alice",
                       check=False)
    assert more.returncode != 0 and "is attempting to grant RBAC permissions not currently held" in more.stderr


def test_create_token_authenticates_as_the_service_account(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    kubectl.run("create", "serviceaccount", "bot", "-n", ns)
    token = kubectl.run("create", "token", "bot", "-n", ns, "--duration=15m").stdout.strip()
    assert token.count(".") == 2
    cfg = yaml.safe_load(kubectl.kubeconfig.read_text())
    cfg["users"][0]["user"] = {"token": token}
    bot = Kubectl(tmp_path / "bot-kubeconfig", kubectl.home)
    bot.kubeconfig.write_text(yaml.safe_dump(cfg))
    assert bot.json("auth", "whoami")["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:bot"
    assert bot.run("auth", "can-i", "list", "configmaps", "-n", ns, check=False).stdout.strip() == "no"
    kubectl.run("create", "rolebinding", "bot-view", "--clusterrole=view", f"--serviceaccount={ns}:bot", "-n", ns)
    assert bot.run("get", "configmaps", "-n", ns).returncode == 0
    kubectl.run("delete", "serviceaccount", "bot", "-n", ns)

    def refused() -> bool:
        proc = bot.run("get", "configmaps", "-n", ns, check=False)
        return (proc.returncode != 0 and "Unauthorized" in proc.stderr) or "must be logged in" in proc.stderr

    deadline = time.monotonic() + 20
    while not refused():
        assert time.monotonic() < deadline, "the deleted account's token still works"
