"""Done-when of authoring operators, against an embedded server: the CRD operator example's CRD (Python types
only) is served, a bad Website is refused with its constraint's message, ``kubectl explain`` shows the fields and
constraints, and ``kinformer rbac``'s output is enough for the operator to run as a ServiceAccount, and no more."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml

import kinformer as ki
from kinformer.server.cli import write_kubeconfig
from testlib import running, wait_until

EXAMPLE = Path(__file__).parents[2] / "examples" / "crd_operator"
SA = "default/website-operator"
CALL_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def website() -> Any:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import website
    finally:
        sys.path.remove(str(EXAMPLE))
    return website


async def kinformer_cli(*args: str) -> str:
    """``kinformer ARGS`` run in the example's directory; its stdout (stderr with it on failure)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kinformer.cli", *args, cwd=EXAMPLE, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    async with asyncio.timeout(CALL_TIMEOUT):
        out, err = await proc.communicate()
    assert proc.returncode == 0, f"kinformer {' '.join(args)} exited {proc.returncode}: {err.decode()}"
    return out.decode()


async def test_the_generated_crd_is_served_and_refuses_a_bad_object_with_the_constraint(
        website: Any, kube_client: ki.Client) -> None:
    crd = yaml.safe_load(await kinformer_cli("crd", "website:CRD"))
    assert crd == website.CRD
    await website.install_crd(kube_client)
    good = {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "ok"},
            "spec": {"title": "Hi", "hostname": "example.org"}}
    created = await kube_client.create(website.WEBSITES, good, namespace="default")
    assert created["spec"]["replicas"] == 1 and created["spec"]["theme"] == "light"  # the schema's defaults
    bad = [({"title": "Hi", "replicas": 9}, "spec.replicas: Invalid value: 9: spec.replicas in body should be less "
                                            "than or equal to 5"),
           ({"title": ""}, "spec.title: Invalid value: \"\": spec.title in body should be at least 1 chars long"),
           ({"title": "x", "hostname": "Not_A_Host"}, "spec.hostname in body should match"),
           ({"title": "x", "theme": "blue"}, 'spec.theme: Unsupported value: "blue"'),
           ({"replicas": 1}, "spec.title: Required value")]
    for i, (spec, message) in enumerate(bad):
        body = {**good, "metadata": {"name": f"bad-{i}"}, "spec": spec}
        with pytest.raises(ki.Invalid) as refused:
            await kube_client.create(website.WEBSITES, body, namespace="default")
        assert message in str(refused.value), str(refused.value)


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl binary not found on PATH")
async def test_kubectl_explain_shows_fields_and_constraints(website: Any, kube_server: Any, kube_client: ki.Client,
                                                          tmp_path: Path) -> None:
    await website.install_crd(kube_client)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_server.url, None, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env.update(KUBECONFIG=str(kubeconfig), HOME=str(tmp_path))
    proc = await asyncio.create_subprocess_exec("kubectl", "explain", "websites.spec", env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    async with asyncio.timeout(CALL_TIMEOUT):
        out = (await proc.communicate())[0].decode()
    assert proc.returncode == 0, out
    assert "KIND:       Website" in out and "The desired state of a Website." in out
    assert "title\t<string> -required-" in out and "The page's title." in out
    assert "Constraints: minimum 0; maximum 5; default 1." in out
    assert "enum: light, dark" in out


async def test_rbac_output_is_enough_for_the_operator_as_a_service_account_and_nothing_broader(
        website: Any, kube_client: ki.Client, kube_client_as: Any) -> None:
    await website.install_crd(kube_client)
    for doc in yaml.safe_load_all(await kinformer_cli("rbac", "website:manager", "--service-account", SA)):
        plural = doc["kind"].lower() + "s"
        await kube_client.create(f"rbac.authorization.k8s.io/v1/{plural}", doc, namespace="default")
    operator = await kube_client_as(serviceaccount=SA)
    site = {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "blog"},
            "spec": {"title": "Blog"}}
    await kube_client.create(website.WEBSITES, site, namespace="default")
    mgr = website.manager(operator)
    async with running(mgr):
        async def ready() -> bool:
            got = await kube_client.get(website.WEBSITES, "blog", namespace="default")
            return any(c["type"] == "Ready" and c["status"] == "True"
                       for c in (got.get("status") or {}).get("conditions", []))
        await wait_until(ready, timeout=30, what="the Website reported Ready by the operator running as its SA")
    page = await kube_client.get("configmaps", "blog-page", namespace="default")
    assert page["metadata"]["ownerReferences"][0]["name"] == "blog"
    for write in (operator.create("secrets", {"metadata": {"name": "x"}}, namespace="default"),
                  operator.delete(website.WEBSITES, "blog", namespace="default"),
                  operator.patch(website.WEBSITES, "blog", {"spec": {"title": "changed"}}, namespace="default"),
                  operator.create("customresourcedefinitions", {**website.CRD, "metadata": {"name": "x.example.com"}})):
        with pytest.raises(ki.Forbidden):
            await write


@dataclass
class WidgetSpec:
    """A widget."""

    replicas: Annotated[int, ki.Minimum(0)] = 1
    color: Literal["red", "blue"] = "red"


@dataclass
class WidgetStatus:
    replicas: int = 0
    selector: str = ""


async def test_several_versions_scale_and_printer_columns_are_served(kube_client: ki.Client) -> None:
    crd = ki.crd(WidgetSpec, group="example.com", version="v1", kind="Widget", status=WidgetStatus,
                 scale=ki.Scale(label_selector_path=".status.selector"), short_names=["wd"],
                 printer_columns=[ki.PrinterColumn("Color", ".spec.color")],
                 versions=[ki.Version("v1beta1", WidgetSpec, WidgetStatus, deprecated="use example.com/v1")])
    await kube_client.create("customresourcedefinitions", crd)
    await ki.wait_for(kube_client, "customresourcedefinitions", "widgets.example.com",
                      lambda c: any(x["type"] == "Established" and x["status"] == "True"
                                    for x in ((c or {}).get("status") or {}).get("conditions", [])), timeout=30)
    kube_client.invalidate_discovery()
    old = await kube_client.create("example.com/v1beta1/widgets", {"apiVersion": "example.com/v1beta1",
                                                                     "kind": "Widget", "metadata": {"name": "w"},
                                                                     "spec": {}}, namespace="default")
    assert old["spec"] == {"replicas": 1, "color": "red"}
    current = await kube_client.get("example.com/v1/widgets", "w", namespace="default")
    assert current["apiVersion"] == "example.com/v1"
    scale = await kube_client.get("example.com/v1/widgets", "w", namespace="default", subresource="scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    raw = await kube_client.request_bytes("GET", "/apis/example.com/v1/namespaces/default/widgets",
                                          headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    table = json.loads(raw)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Color"]  # Age only when none are given
    assert table["rows"][0]["cells"][:2] == ["w", "red"]


async def test_a_class_reads_its_resource_through_client_informer_lister_and_manager_cache(
        kube_client: ki.Client) -> None:
    from kinformer.kinds.core_v1 import ConfigMap

    await kube_client.create(ConfigMap, {"metadata": {"name": "typed"}, "data": {"k": "v"}}, namespace="default")
    assert (await kube_client.get(ConfigMap, "typed", "default"))["data"] == {"k": "v"}
    async with ki.SharedInformerFactory(kube_client) as factory:
        informer = factory.informer(ConfigMap, namespace="default")
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=30)
        assert informer.lister().get("typed", "default")["data"] == {"k": "v"}
    mgr = ki.Manager(kube_client, metrics_secure=False)
    assert (await mgr.client.get(ConfigMap, "typed", "default"))["data"] == {"k": "v"}
    await mgr.factory.shutdown()
