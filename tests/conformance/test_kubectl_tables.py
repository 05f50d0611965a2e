"""Server-side Table output against the real kubectl (and the raw HTTP contract behind it).

One in-process ``APIServer`` over plain HTTP runs in a background thread for the module; kubectl
talks to it through a private kubeconfig and HOME. kubectl tests skip cleanly without the binary;
the HTTP-level tests always run. Ages depend on the wall clock, so they are matched by shape.
Every kubectl call has a timeout; waits poll a condition until a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testlib import wait_until_sync

KUBECTL = shutil.which("kubectl")


def kubectl_test(fn: Callable[..., None]) -> Callable[..., None]:
    """Mark a test as needing the kubectl binary (skipped cleanly when it is absent)."""
    return pytest.mark.kubectl(pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not found on PATH")(fn))


CALL_TIMEOUT = 30.0
NS = "tables"
TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                "application/json")
AGE = re.compile(r"^\d+(s|m\d*s?)$")

FOO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "foos.tables.example.com"},
    "spec": {"group": "tables.example.com", "scope": "Namespaced",
             "names": {"kind": "Foo", "plural": "foos", "singular": "foo", "listKind": "FooList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}},
                           "subresources": {"status": {}},
                           "additionalPrinterColumns": [
                               {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                               {"name": "Ready", "type": "string",
                                "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
                               {"name": "Message", "type": "string", "jsonPath": ".spec.message", "priority": 1},
                               {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]},
}


class ServerThread:
    """An ``APIServer`` (memory storage, plain HTTP on 127.0.0.1) on an event loop of its own thread."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="tables-apiserver", daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise AssertionError("APIServer did not start in time")
        if self._error is not None:
            raise AssertionError(f"APIServer failed to start: {self._error!r}")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as e:
            self._error = e
            self._ready.set()
        finally:
            self._loop.close()

    async def _main(self) -> None:
        from kinformer.server import APIServer

        self._stop = asyncio.Event()
        async with APIServer(storage="memory", host="127.0.0.1", port=0, namespace_defaults=False) as server:
            self.url = server.url
            self._ready.set()
            await self._stop.wait()

    def stop(self, timeout: float = 30.0) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "APIServer thread did not stop"


def http(server: ServerThread, path: str, *, accept: str = "application/json", method: str = "GET",
         body: Any = None, content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Accept": accept, "Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=CALL_TIMEOUT) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        self.env.update({"HOME": str(home), "KUBECONFIG": str(kubeconfig)})

    def run(self, *args: str, input: str | None = None) -> str:
        assert KUBECTL is not None
        proc = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=self.env,
                              timeout=CALL_TIMEOUT, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
        return proc.stdout

    def apply(self, doc: dict[str, Any]) -> None:
        self.run("apply", "-f", "-", input=yaml.safe_dump(doc))


def parse_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """kubectl's aligned output as (headers, rows keyed by header); cells are cut at the header's offsets."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "kubectl printed nothing"
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"(?<!\S)\S+(?: \S+)*", header)]
    names = [header[s:e].strip() for s, e in zip(starts, [*starts[1:], None], strict=True)]
    rows = []
    for line in lines[1:]:
        values = [line[s:e].strip() if e is not None else line[s:].strip()
                  for s, e in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, values, strict=True)))
    return names, rows


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = ServerThread()
    srv.start()
    try:
        status, _, body = http(srv, "/api/v1/namespaces", method="POST",
                               body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        assert status == 201, body
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def kubectl(server: ServerThread, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    from kinformer.server.cli import write_kubeconfig

    home = tmp_path_factory.mktemp("kubectl-home")
    kubeconfig = write_kubeconfig(home / "kubeconfig", server.url, None, None)
    k = Kubectl(kubeconfig, home)
    k.run("config", "set-context", "--current", f"--namespace={NS}")
    return k


# ------------------------------------------------------------------------------------------ kubectl


@kubectl_test
def test_get_configmaps(kubectl: Kubectl) -> None:
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-two", "labels": {"app": "x"}},
                   "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}})
    names, rows = parse_table(kubectl.run("get", "configmaps", "cm-two"))
    assert names == ["NAME", "DATA", "AGE"]
    assert rows[0]["NAME"] == "cm-two" and rows[0]["DATA"] == "3" and AGE.match(rows[0]["AGE"])
    names, rows = parse_table(kubectl.run("get", "cm", "--show-labels", "-l", "app=x"))
    assert names == ["NAME", "DATA", "AGE", "LABELS"] and rows[0]["LABELS"] == "app=x"
    # --sort-by makes kubectl ask for includeObject=Object; -A adds the namespace from the row objects.
    names, rows = parse_table(kubectl.run("get", "cm", "-A", "--sort-by=.metadata.name", "-l", "app=x"))
    assert names == ["NAMESPACE", "NAME", "DATA", "AGE"] and rows[0]["NAMESPACE"] == NS


@kubectl_test
def test_get_deployments_and_wide(kubectl: Kubectl) -> None:
    kubectl.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"},
                                                                 {"name": "side", "image": "busybox"}]}}}})
    kubectl.run("patch", "deployment", "web", "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3,
                                       "availableReplicas": 1}}))
    names, rows = parse_table(kubectl.run("get", "deploy", "web"))
    assert names == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert [rows[0][k] for k in names[:4]] == ["web", "2/3", "3", "1"]
    names, rows = parse_table(kubectl.run("get", "deploy", "web", "-o", "wide"))
    assert names == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert [rows[0][k] for k in names[5:]] == ["nginx,side", "nginx:1.27,busybox", "app=web"]


@kubectl_test
def test_get_status_and_scale_subresources(kubectl: Kubectl) -> None:
    kubectl.run("create", "deployment", "sub", "--image=nginx:1.27", "--replicas=4")
    names, rows = parse_table(kubectl.run("get", "deploy", "sub", "--subresource=status"))
    assert names == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and rows[0]["READY"] == "0/4"
    names, rows = parse_table(kubectl.run("get", "deploy", "sub", "--subresource=scale"))
    assert names == ["NAME", "DESIRED", "AVAILABLE", "AGE"]
    assert [rows[0][k] for k in names[:3]] == ["sub", "4", "0"]


@kubectl_test
def test_get_pods_and_wide(kubectl: Kubectl) -> None:
    for name, node in (("pod-pending", {}), ("pod-running", {"nodeName": "node-1"})):
        kubectl.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": "pods"}},
                       "spec": {**node, "containers": [{"name": "a", "image": "busybox"},
                                                       {"name": "b", "image": "busybox"}]}})
    status = {"phase": "Running", "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
              "conditions": [{"type": "Ready", "status": "False"}],
              "containerStatuses": [
                  {"name": "a", "ready": True, "restartCount": 0, "image": "busybox", "imageID": "",
                   "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}},
                  {"name": "b", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
                   "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]}
    kubectl.run("patch", "pod", "pod-running", "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": status}))
    names, rows = parse_table(kubectl.run("get", "pods", "-l", "t=pods"))
    assert names == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_name = {r["NAME"]: r for r in rows}
    assert [by_name["pod-pending"][k] for k in ("READY", "STATUS", "RESTARTS")] == ["0/2", "Pending", "0"]
    assert [by_name["pod-running"][k] for k in ("READY", "STATUS", "RESTARTS")] == ["1/2", "Running", "0"]
    names, rows = parse_table(kubectl.run("get", "pods", "-l", "t=pods", "-o", "wide"))
    assert names == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                     "READINESS GATES"]
    by_name = {r["NAME"]: r for r in rows}
    assert (by_name["pod-running"]["IP"], by_name["pod-running"]["NODE"]) == ("10.1.2.3", "node-1")
    assert (by_name["pod-pending"]["IP"], by_name["pod-pending"]["NODE"]) == ("<none>", "<none>")


@kubectl_test
def test_get_namespaces(kubectl: Kubectl) -> None:
    names, rows = parse_table(kubectl.run("get", "ns"))
    assert names == ["NAME", "STATUS", "AGE"]
    by_name = {r["NAME"]: r for r in rows}
    assert {"default", "kube-system", NS} <= set(by_name)
    assert by_name["default"]["STATUS"] == "Active" and AGE.match(by_name[NS]["AGE"])


@kubectl_test
def test_get_services_secrets_and_crds(kubectl: Kubectl) -> None:
    kubectl.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc-np"},
                   "spec": {"type": "NodePort", "selector": {"app": "web"},
                            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080},
                                      {"name": "dns", "port": 53, "protocol": "UDP"}]}})
    names, rows = parse_table(kubectl.run("get", "svc", "svc-np", "-o", "wide"))
    assert names == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    row = rows[0]
    assert (row["TYPE"], row["EXTERNAL-IP"], row["SELECTOR"]) == ("NodePort", "<none>", "app=web")
    assert row["PORT(S)"].startswith("80:30080/TCP,53") and row["PORT(S)"].endswith("/UDP")
    kubectl.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec"}, "type": "kubernetes.io/tls",
                   "data": {"tls.crt": "", "tls.key": ""}})
    names, rows = parse_table(kubectl.run("get", "secret", "sec"))
    assert names == ["NAME", "TYPE", "DATA", "AGE"] and [rows[0][k] for k in names[:3]] == [
        "sec", "kubernetes.io/tls", "2"]
    kubectl.apply(FOO_CRD)
    names, rows = parse_table(kubectl.run("get", "crd", "foos.tables.example.com"))
    assert names == ["NAME", "CREATED AT"]
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", rows[0]["CREATED AT"])


@kubectl_test
def test_get_custom_resources_with_printer_columns(kubectl: Kubectl) -> None:
    kubectl.apply(FOO_CRD)
    wait_until_sync(lambda: "foos" in kubectl.run("api-resources", "--api-group=tables.example.com"),
               what="the foos resource in discovery")
    kubectl.apply({"apiVersion": "tables.example.com/v1", "kind": "Foo", "metadata": {"name": "f1"},
                   "spec": {"replicas": 3, "message": "hello"}})
    kubectl.apply({"apiVersion": "tables.example.com/v1", "kind": "Foo", "metadata": {"name": "f2"},
                   "spec": {"replicas": 1}})
    kubectl.run("patch", "foo", "f1", "--subresource=status", "--type=merge", "-p",
                json.dumps({"status": {"conditions": [{"type": "Synced", "status": "False"},
                                                      {"type": "Ready", "status": "True"}]}}))
    names, rows = parse_table(kubectl.run("get", "foos"))
    assert names == ["NAME", "REPLICAS", "READY", "AGE"]
    by_name = {r["NAME"]: r for r in rows}
    assert (by_name["f1"]["REPLICAS"], by_name["f1"]["READY"]) == ("3", "True")
    assert (by_name["f2"]["REPLICAS"], by_name["f2"]["READY"]) == ("1", "")
    assert AGE.match(by_name["f1"]["AGE"])
    names, rows = parse_table(kubectl.run("get", "foos", "-o", "wide"))
    assert names == ["NAME", "REPLICAS", "READY", "MESSAGE", "AGE"]
    assert {r["NAME"]: r["MESSAGE"] for r in rows} == {"f1": "hello", "f2": ""}


KUBE_HEADERS = [
    ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
    ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"],
    ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
    ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
    ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"],
    ["NAME", "CREATED AT"],
]


@kubectl_test
def test_get_several_kinds_prints_kubes_headers(kubectl: Kubectl) -> None:
    kubectl.run("create", "job", "pi", "--image=perl:5.34.0", "--", "perl", "-e", "print 1")
    kubectl.run("create", "cronjob", "hello", "--image=busybox", "--schedule=*/5 * * * *")
    kubectl.run("create", "pdb", "web-pdb", "--selector=app=web", "--min-available=2")
    kubectl.run("create", "ingress", "web", "--class=nginx", "--rule=foo.example.com/=web:80")
    kubectl.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                            "storageClassName": "standard"}})
    kubectl.run("create", "role", "reader", "--verb=get", "--resource=pods")
    out = kubectl.run("get", "jobs,cronjobs,pdb,ingress,pvc,roles")
    headers = [re.split(r" {2,}", line.strip()) for line in out.splitlines() if line.startswith("NAME")]
    assert headers == KUBE_HEADERS
    rows = {line.split()[0]: re.split(r" {2,}", line.strip()) for line in out.splitlines()
            if line.strip() and not line.startswith("NAME")}
    assert rows["job.batch/pi"][1:3] == ["Running", "0/1"]
    assert rows["cronjob.batch/hello"][1:6] == ["*/5 * * * *", "<none>", "False", "0", "<none>"]
    assert rows["poddisruptionbudget.policy/web-pdb"][1:4] == ["2", "N/A", "0"]
    assert rows["ingress.networking.k8s.io/web"][1:3] == ["nginx", "foo.example.com"]
    assert rows["persistentvolumeclaim/data"][1:2] == ["Pending"]


@kubectl_test
def test_output_json_and_yaml_are_unchanged(kubectl: Kubectl) -> None:
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-json"}, "data": {"k": "v"}})
    listed = json.loads(kubectl.run("get", "configmaps", "-o", "json"))
    assert listed["kind"] == "List" and "rows" not in listed
    item = next(i for i in listed["items"] if i["metadata"]["name"] == "cm-json")
    assert item["kind"] == "ConfigMap" and item["data"] == {"k": "v"}
    one = json.loads(kubectl.run("get", "cm", "cm-json", "-o", "json"))
    assert one["kind"] == "ConfigMap" and one["apiVersion"] == "v1" and one["data"] == {"k": "v"}
    assert yaml.safe_load(kubectl.run("get", "cm", "cm-json", "-o", "yaml"))["data"] == {"k": "v"}
    assert kubectl.run("get", "cm", "cm-json", "-o", "name").strip() == "configmap/cm-json"


@kubectl_test
def test_get_watch_prints_table_rows(kubectl: Kubectl) -> None:
    assert KUBECTL is not None
    kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w-first", "labels": {"w": "1"}}})
    proc = subprocess.Popen([KUBECTL, "get", "cm", "-l", "w=1", "-w", "--output-watch-events"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env)
    lines: list[str] = []
    out = proc.stdout
    assert out is not None

    def read() -> None:
        for line in out:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until_sync(lambda: any("w-first" in line for line in lines), what="the listed row")
        kubectl.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w-second", "labels": {"w": "1"}},
                       "data": {"a": "1"}})
        wait_until_sync(lambda: any("w-second" in line for line in lines), what="the watched row")
    finally:
        proc.terminate()
        proc.wait(10)
    reader.join(10)
    names, rows = parse_table("".join(lines))
    assert names == ["EVENT", "NAME", "DATA", "AGE"]
    assert [(r["EVENT"], r["NAME"], r["DATA"]) for r in rows] == [("ADDED", "w-first", "0"), ("ADDED", "w-second", "1")]


# ------------------------------------------------------------------------------------------ HTTP contract


def _create_cm(server: ServerThread, name: str, data: dict[str, str]) -> None:
    status, _, body = http(server, f"/api/v1/namespaces/{NS}/configmaps", method="POST",
                           body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
    assert status == 201, body


def test_http_table_list_get_and_include_object(server: ServerThread) -> None:
    _create_cm(server, "h-one", {"a": "1"})
    path = f"/api/v1/namespaces/{NS}/configmaps"
    status, headers, body = http(server, path, accept=TABLE_ACCEPT)
    assert status == 200 and headers["Content-Type"].startswith("application/json;as=Table;v=v1;g=meta.k8s.io")
    table = json.loads(body)
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert int(table["metadata"]["resourceVersion"]) > 0
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    row = next(r for r in table["rows"] if r["cells"][0] == "h-one")
    assert row["cells"][1] == 1
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "h-one"

    status, _, body = http(server, f"{path}/h-one?includeObject=Object",
                           accept="application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    table = json.loads(body)
    assert status == 200 and table["apiVersion"] == "meta.k8s.io/v1beta1" and len(table["rows"]) == 1
    assert table["rows"][0]["object"]["kind"] == "ConfigMap" and table["rows"][0]["object"]["data"] == {"a": "1"}
    status, _, body = http(server, f"{path}/h-one?includeObject=None", accept=TABLE_ACCEPT)
    assert status == 200 and json.loads(body)["rows"][0]["object"] is None
    status, _, body = http(server, f"{path}?includeObject=All", accept=TABLE_ACCEPT)
    assert status == 400 and "unrecognized includeObject" in json.loads(body)["message"]


def test_http_table_pagination_errors_and_plain_json(server: ServerThread) -> None:
    for i in range(3):
        _create_cm(server, f"h-page-{i}", {})
    path = f"/api/v1/namespaces/{NS}/configmaps"
    status, _, body = http(server, f"{path}?limit=2", accept=TABLE_ACCEPT)
    table = json.loads(body)
    assert status == 200 and len(table["rows"]) == 2 and table["metadata"]["continue"]
    status, _, body = http(server, f"{path}/missing", accept=TABLE_ACCEPT)
    assert status == 404 and json.loads(body)["kind"] == "Status"
    status, headers, body = http(server, path)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["kind"] == "ConfigMapList"
    status, _, body = http(server, path, accept="application/json, " + TABLE_ACCEPT)
    assert json.loads(body)["kind"] == "ConfigMapList"


def test_http_table_watch_events(server: ServerThread) -> None:
    _create_cm(server, "h-watch", {"x": "1"})
    path = f"/api/v1/namespaces/{NS}/configmaps?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dh-watch"
    status, _, body = http(server, path, accept=TABLE_ACCEPT)
    events = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert status == 200 and [e["type"] for e in events] == ["ADDED"]
    table = events[0]["object"]
    assert table["kind"] == "Table" and [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert len(table["rows"]) == 1 and table["rows"][0]["cells"][:2] == ["h-watch", 1]
