"""Discovery and OpenAPI document shapes, served by an aiohttp app built from ``routes()`` alone."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kinformer.server.endpoints import discovery
from kinformer.server.registry.resources import Registry
from kinformer.server.schema import openapi

AGG_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGG_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = f"{AGG_V2},{AGG_V2BETA1},application/json"

FOO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "foos.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "shortNames": ["fo"], "categories": ["all"]},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                 "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}},
            {"name": "v1beta1", "served": True, "storage": False},
            {"name": "v1alpha1", "served": False, "storage": False},
        ],
    },
}


@pytest.fixture
def registry() -> Registry:
    return Registry()


@pytest.fixture
async def client(registry: Registry) -> AsyncIterator[TestClient]:
    app = web.Application()
    app.add_routes(discovery.routes(registry))
    app.add_routes(openapi.routes(registry))
    async with TestClient(TestServer(app, host="127.0.0.1")) as c:
        yield c


async def get_json(client: TestClient, path: str, accept: str = "application/json",
                   status: int = 200) -> tuple[Any, str]:
    resp = await client.get(path, headers={"Accept": accept})
    assert resp.status == status, (path, resp.status, await resp.text())
    return orjson.loads(await resp.read()), resp.headers.get("Content-Type", "")


@pytest.mark.parametrize("path", ["/version", "/version/"])
async def test_version(client: TestClient, path: str) -> None:
    body, ctype = await get_json(client, path)
    assert ctype.startswith("application/json")
    assert body["major"] == "1" and body["minor"] == "32"
    assert body["gitVersion"] == "v1.32.0-kinformer"
    assert set(body) == {"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion",
                         "compiler", "platform"}
    assert all(isinstance(v, str) and v for v in body.values())


@pytest.mark.parametrize("path", ["/api", "/api/"])
async def test_api_versions(client: TestClient, path: str) -> None:
    body, _ = await get_json(client, path)
    assert body["kind"] == "APIVersions"
    assert body["versions"] == ["v1"]
    assert body["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"
    assert body["serverAddressByClientCIDRs"][0]["serverAddress"].startswith("127.0.0.1:")


@pytest.mark.parametrize("path", ["/apis", "/apis/"])
async def test_api_group_list(client: TestClient, path: str) -> None:
    body, _ = await get_json(client, path)
    assert body["kind"] == "APIGroupList" and body["apiVersion"] == "v1"
    groups = {g["name"]: g for g in body["groups"]}
    assert "" not in groups
    assert {"apps", "coordination.k8s.io", "apiextensions.k8s.io", "events.k8s.io"} <= set(groups)
    assert groups["apps"]["versions"] == [{"groupVersion": "apps/v1", "version": "v1"}]
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}


async def test_core_resource_list_has_subresources_as_entries(client: TestClient) -> None:
    for path in ("/api/v1", "/api/v1/"):
        body, _ = await get_json(client, path)
        assert body["kind"] == "APIResourceList" and body["groupVersion"] == "v1"
        by_name = {r["name"]: r for r in body["resources"]}
        pods = by_name["pods"]
        assert pods["kind"] == "Pod" and pods["namespaced"] is True and pods["singularName"] == "pod"
        assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
        assert set(pods["verbs"]) == {"create", "delete", "deletecollection", "get", "list", "patch", "update",
                                      "watch"}
        assert by_name["pods/status"] == {"name": "pods/status", "singularName": "", "namespaced": True,
                                          "kind": "Pod", "verbs": ["get", "patch", "update"]}
        assert by_name["namespaces"]["namespaced"] is False
        assert by_name["namespaces/finalize"]["verbs"] == ["update"]
        assert by_name["configmaps"]["shortNames"] == ["cm"]
        assert "shortNames" not in by_name["secrets"]


async def test_group_and_group_version_documents(client: TestClient) -> None:
    body, _ = await get_json(client, "/apis/apps")
    assert body["kind"] == "APIGroup" and body["name"] == "apps"
    assert body["preferredVersion"]["groupVersion"] == "apps/v1"
    body, _ = await get_json(client, "/apis/apps/v1/")
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    scale = by_name["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert by_name["deployments/status"]["kind"] == "Deployment" and "group" not in by_name["deployments/status"]



async def test_both_hpa_versions_report_the_hash_of_their_storage_version(client: TestClient) -> None:
    hashes = []
    for version in ("v1", "v2"):
        body, _ = await get_json(client, f"/apis/autoscaling/{version}")
        hashes.append({r["name"]: r for r in body["resources"]}["horizontalpodautoscalers"]["storageVersionHash"])
    assert hashes == ["qwQve8ut294=", "qwQve8ut294="]  # kube 1.32's, of autoscaling/v2 HorizontalPodAutoscaler


async def test_both_event_apis_report_the_hash_of_the_core_event_they_are_stored_as(client: TestClient) -> None:
    hashes = []
    for path in ("/api/v1", "/apis/events.k8s.io/v1"):
        body, _ = await get_json(client, path)
        hashes.append({r["name"]: r for r in body["resources"]}["events"]["storageVersionHash"])
    assert hashes == ["r2yiGXH7wu8=", "r2yiGXH7wu8="]  # kube 1.32's, of the core/v1 Event


@pytest.mark.parametrize("path", ["/apis/nope", "/apis/nope/v1", "/apis/apps/v9", "/api/v2"])
async def test_unknown_group_or_version_is_not_found(client: TestClient, path: str) -> None:
    body, _ = await get_json(client, path, status=404)
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404


async def test_aggregated_core_group(client: TestClient) -> None:
    body, ctype = await get_json(client, "/api", KUBECTL_ACCEPT)
    assert ctype == AGG_V2
    assert body["kind"] == "APIGroupDiscoveryList" and body["apiVersion"] == "apidiscovery.k8s.io/v2"
    [core] = body["items"]
    assert "name" not in core["metadata"]
    [v1] = core["versions"]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    res = {r["resource"]: r for r in v1["resources"]}
    pods = res["pods"]
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert pods["scope"] == "Namespaced" and pods["singularResource"] == "pod"
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert sorted(subs) == ["attach", "binding", "ephemeralcontainers", "eviction", "exec", "log", "portforward",
                            "proxy", "status"]
    assert subs["status"] == {"subresource": "status", "verbs": ["get", "patch", "update"],
                              "responseKind": {"group": "", "version": "v1", "kind": "Pod"}}
    assert subs["eviction"]["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert subs["exec"]["verbs"] == ["create", "get"] and subs["log"]["verbs"] == ["get"]
    assert res["namespaces"]["scope"] == "Cluster"
    assert "pods/status" not in res


async def test_aggregated_groups_and_v2beta1(client: TestClient) -> None:
    body, ctype = await get_json(client, "/apis/", KUBECTL_ACCEPT)
    assert ctype == AGG_V2
    groups = {g["metadata"]["name"]: g for g in body["items"]}
    assert "" not in groups and "apps" in groups
    deploy = next(r for r in groups["apps"]["versions"][0]["resources"] if r["resource"] == "deployments")
    scale = next(s for s in deploy["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    body, ctype = await get_json(client, "/apis", f"{AGG_V2BETA1},application/json")
    assert ctype == AGG_V2BETA1 and body["apiVersion"] == "apidiscovery.k8s.io/v2beta1"


async def test_aggregated_etag_allows_304(client: TestClient) -> None:
    resp = await client.get("/apis", headers={"Accept": KUBECTL_ACCEPT})
    etag = resp.headers["ETag"]
    resp = await client.get("/apis", headers={"Accept": KUBECTL_ACCEPT, "If-None-Match": etag})
    assert resp.status == 304


async def test_plain_accept_gets_legacy_documents(client: TestClient) -> None:
    for accept in ("application/json", "*/*", f"{AGG_V2};q=0,application/json"):
        body, ctype = await get_json(client, "/apis", accept)
        assert body["kind"] == "APIGroupList" and ctype.startswith("application/json") and "g=" not in ctype


async def test_crd_changes_discovery_at_once(client: TestClient, registry: Registry) -> None:
    await get_json(client, "/apis")  # warm the caches
    await get_json(client, "/apis/example.com/v1", status=404)
    registry.add_crd(FOO_CRD)
    body, _ = await get_json(client, "/apis")
    group = next(g for g in body["groups"] if g["name"] == "example.com")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    body, _ = await get_json(client, "/apis/example.com/v1")
    names = {r["name"]: r for r in body["resources"]}
    assert names["foos"]["kind"] == "Foo" and names["foos"]["shortNames"] == ["fo"]
    assert names["foos/status"]["verbs"] == ["get", "patch", "update"]
    body, _ = await get_json(client, "/apis", KUBECTL_ACCEPT)
    agg = next(g for g in body["items"] if g["metadata"]["name"] == "example.com")
    assert [v["version"] for v in agg["versions"]] == ["v1", "v1beta1"]
    registry.remove_crd("foos.example.com")
    await get_json(client, "/apis/example.com/v1", status=404)
    body, _ = await get_json(client, "/apis", KUBECTL_ACCEPT)
    assert all(g["metadata"]["name"] != "example.com" for g in body["items"])


# -- OpenAPI v3 ------------------------------------------------------------------------------------


async def _gv_doc(client: TestClient, key: str) -> dict[str, Any]:
    index, _ = await get_json(client, "/openapi/v3")
    url = index["paths"][key]["serverRelativeURL"]
    assert url.startswith(f"/openapi/v3/{key}?hash=")
    doc, _ = await get_json(client, url)
    return doc


def _patch_ops(doc: dict[str, Any], group: str, version: str, kind: str) -> list[dict[str, Any]]:
    gvk = {"group": group, "version": version, "kind": kind}
    return [item["patch"] for item in doc["paths"].values()
            if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"] == gvk]


async def test_openapi_index_lists_every_group_version(client: TestClient) -> None:
    index, _ = await get_json(client, "/openapi/v3/")
    assert {"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1", "apis/apiextensions.k8s.io/v1",
            "apis/events.k8s.io/v1"} <= set(index["paths"])


@pytest.mark.parametrize(("key", "group", "kind", "schema_name"), [
    ("api/v1", "", "ConfigMap", "io.k8s.api.core.v1.ConfigMap"),
    ("apis/apps/v1", "apps", "Deployment", "io.k8s.api.apps.v1.Deployment"),
    ("apis/coordination.k8s.io/v1", "coordination.k8s.io", "Lease", "io.k8s.api.coordination.v1.Lease"),
    ("apis/apiextensions.k8s.io/v1", "apiextensions.k8s.io", "CustomResourceDefinition",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
])
async def test_openapi_group_version_document(client: TestClient, key: str, group: str, kind: str,
                                              schema_name: str) -> None:
    doc = await _gv_doc(client, key)
    assert doc["openapi"].startswith("3.")
    patches = _patch_ops(doc, group, "v1", kind)
    assert patches, "kubectl needs a PATCH operation carrying the kind's GVK"
    for op in patches:
        assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"])
        assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]  # built-ins, as kube
        assert "application/merge-patch+json" in op["requestBody"]["content"]
    schema = doc["components"]["schemas"][schema_name]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": group, "kind": kind, "version": "v1"}]
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    meta_ref = schema["properties"]["metadata"]["allOf"][0]["$ref"]
    assert meta_ref.removeprefix("#/components/schemas/") in doc["components"]["schemas"]


async def test_openapi_builtin_schemas_are_kube_1_32s(client: TestClient) -> None:
    doc = await _gv_doc(client, "apis/apps/v1")
    schemas = doc["components"]["schemas"]
    spec = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]
    containers = spec["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["x-kubernetes-list-type"] == "map"
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    ports = schemas["io.k8s.api.core.v1.Container"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert schemas["io.k8s.api.core.v1.ContainerPort"]["required"] == ["containerPort"]
    assert schemas["io.k8s.api.core.v1.Container"]["properties"]["image"]["type"] == "string"
    assert "description" in schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert "enum" not in schemas["io.k8s.api.apps.v1.Deployment"]["properties"]["apiVersion"]
    paths = doc["paths"]
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["get"]
    assert scale["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "kind": "Scale", "version": "v1"}
    core = await _gv_doc(client, "api/v1")
    eviction = core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]
    assert set(eviction) == {"parameters", "post"} and "io.k8s.api.policy.v1.Eviction" in core["components"]["schemas"]
    assert "/api/v1/namespaces/{namespace}/pods/{name}/exec" not in core["paths"]
    reviews = await _gv_doc(client, "apis/authorization.k8s.io/v1")
    assert set(reviews["paths"]) == {"/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews",
                                     "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                     "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                                     "/apis/authorization.k8s.io/v1/subjectaccessreviews"}


async def test_openapi_every_ref_resolves(client: TestClient) -> None:
    index, _ = await get_json(client, "/openapi/v3")
    for entry in index["paths"].values():
        doc, _ = await get_json(client, entry["serverRelativeURL"])
        text = orjson.dumps(doc).decode()
        schemas = doc["components"]["schemas"]
        for ref in set(text.split('"$ref":"#/components/schemas/')[1:]):
            assert ref.split('"', 1)[0] in schemas


async def test_openapi_configmap_paths(client: TestClient) -> None:
    doc = await _gv_doc(client, "api/v1")
    paths = doc["paths"]
    coll = paths["/api/v1/namespaces/{namespace}/configmaps"]
    assert {"get", "post", "delete"} <= set(coll)
    item = paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]
    assert {"get", "put", "patch", "delete"} <= set(item)
    assert "get" in paths["/api/v1/configmaps"]
    assert {"get", "put", "patch"} <= set(paths["/api/v1/namespaces/{namespace}/pods/{name}/status"])
    assert set(paths["/api/v1/namespaces/{name}/finalize"]) == {"parameters", "put"}
    cm = doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]["properties"]
    assert cm["data"]["additionalProperties"]["type"] == "string"


async def test_openapi_crd_document_and_hash_changes(client: TestClient, registry: Registry) -> None:
    index, _ = await get_json(client, "/openapi/v3")
    assert "apis/example.com/v1" not in index["paths"]
    core_url = index["paths"]["api/v1"]["serverRelativeURL"]
    registry.add_crd(FOO_CRD)
    doc = await _gv_doc(client, "apis/example.com/v1")
    schema = doc["components"]["schemas"]["com.example.v1.Foo"]
    assert schema["properties"]["spec"]["properties"]["color"] == {"type": "string"}
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Foo", "version": "v1"}]
    [foo_patch] = _patch_ops(doc, "example.com", "v1", "Foo")[:1]
    assert "application/strategic-merge-patch+json" not in foo_patch["requestBody"]["content"]
    assert "/apis/example.com/v1/namespaces/{namespace}/foos/{name}/status" in doc["paths"]
    beta = await _gv_doc(client, "apis/example.com/v1beta1")
    assert beta["components"]["schemas"]["com.example.v1beta1.Foo"]["x-kubernetes-preserve-unknown-fields"]
    assert FOO_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("x-kubernetes-group-version-kind") is None
    index, _ = await get_json(client, "/openapi/v3")
    assert index["paths"]["api/v1"]["serverRelativeURL"] == core_url  # unchanged document, same hash
    foo_url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
    changed = copy.deepcopy(FOO_CRD)
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {
        "type": "integer"}
    registry.add_crd(changed)
    index, _ = await get_json(client, "/openapi/v3")
    assert index["paths"]["apis/example.com/v1"]["serverRelativeURL"] != foo_url
    doc, _ = await get_json(client, index["paths"]["apis/example.com/v1"]["serverRelativeURL"])
    assert "size" in doc["components"]["schemas"]["com.example.v1.Foo"]["properties"]["spec"]["properties"]
    assert index["paths"]["api/v1"]["serverRelativeURL"] == core_url
    registry.remove_crd("foos.example.com")
    await get_json(client, "/openapi/v3/apis/example.com/v1", status=404)


async def test_openapi_document_cache_headers(client: TestClient) -> None:
    index, _ = await get_json(client, "/openapi/v3")
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    resp = await client.get(url)
    assert "immutable" in resp.headers["Cache-Control"]
    resp2 = await client.get(url, headers={"If-None-Match": resp.headers["ETag"]})
    assert resp2.status == 304


async def test_openapi_v2_is_the_whole_api(client: TestClient, registry: Registry) -> None:
    registry.add_crd(FOO_CRD)
    body, _ = await get_json(client, "/openapi/v2")
    assert body["swagger"] == "2.0"
    definitions = body["definitions"]
    deployment = definitions["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert deployment["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    assert definitions["com.example.v1.Foo"]["properties"]["metadata"]["allOf"][0]["$ref"].startswith(
        "#/definitions/")
    text = orjson.dumps(body).decode()
    assert "#/components/" not in text
    for ref in set(text.split('"$ref":"#/definitions/')[1:]):
        assert ref.split('"', 1)[0] in definitions
    create = body["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"]
    assert create["parameters"][-1] == {"name": "body", "in": "body", "required": True,
                                        "schema": {"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}}
    assert create["responses"]["201"]["schema"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.Deployment"}
    accept = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    resp = await client.get("/openapi/v2", headers={"Accept": accept})
    assert resp.status == 200
    raw = await resp.read()
    # field 1 (swagger) = "2.0", field 2 (info) = {title, version}, 8 paths, 9 definitions
    assert raw.startswith(b"\x0a\x032.0\x12") and b"io.k8s.api.apps.v1.Deployment" in raw


def test_definition_names() -> None:
    assert openapi.definition_name("", "v1", "Pod") == "io.k8s.api.core.v1.Pod"
    assert openapi.definition_name("events.k8s.io", "v1", "Event") == "io.k8s.api.events.v1.Event"
    assert openapi.definition_name("stable.example.com", "v2", "Bar", builtin=False) == "com.example.stable.v2.Bar"
