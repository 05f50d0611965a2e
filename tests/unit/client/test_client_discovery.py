"""Resource resolution through (fake) discovery documents."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.client.discovery import Discovery, Resource, ResourceNotFound, parse_resource_spec
from kinformer.errors import NotFound

CORE = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
     "verbs": ["get", "list", "watch"]},
    {"name": "pods/status", "namespaced": True, "kind": "Pod"},
    {"name": "pods/log", "namespaced": True, "kind": "Pod"},
    {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap", "shortNames": ["cm"]},
    {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
     "shortNames": ["ns"]},
]}
APPS = {"resources": [{"name": "deployments", "singularName": "deployment", "namespaced": True,
                       "kind": "Deployment", "shortNames": ["deploy"]},
                      {"name": "deployments/status", "namespaced": True, "kind": "Deployment"}]}
APPS_V1BETA1 = {"resources": [{"name": "deployments", "namespaced": True, "kind": "Deployment"}]}
FOO = {"resources": [{"name": "foos", "singularName": "foo", "namespaced": False, "kind": "Foo"}]}


class FakeServer:
    def __init__(self) -> None:
        self.docs: dict[str, Any] = {
            "/api": {"versions": ["v1"]},
            "/apis": {"groups": [
                {"name": "apps", "versions": [{"version": "v1"}, {"version": "v1beta1"}],
                 "preferredVersion": {"version": "v1"}},
            ]},
            "/api/v1": CORE, "/apis/apps/v1": APPS, "/apis/apps/v1beta1": APPS_V1BETA1,
        }
        self.calls: list[str] = []

    async def get(self, path: str) -> Any:
        self.calls.append(path)
        if path not in self.docs:
            raise NotFound(path)
        return self.docs[path]


@pytest.mark.parametrize(("spec", "plural", "group", "version"), [
    ("configmaps", "configmaps", "", "v1"), ("cm", "configmaps", "", "v1"), ("ConfigMap", "configmaps", "", "v1"),
    ("configmap", "configmaps", "", "v1"), ("v1/pods", "pods", "", "v1"), ("po", "pods", "", "v1"),
    ("apps/v1/deployments", "deployments", "apps", "v1"), ("deployments.apps", "deployments", "apps", "v1"),
    ("deployments.v1beta1.apps", "deployments", "apps", "v1beta1"), ("deploy", "deployments", "apps", "v1"),
    ("Deployment", "deployments", "apps", "v1"), ("ns", "namespaces", "", "v1"),
])
async def test_resolve(spec: str, plural: str, group: str, version: str) -> None:
    d = Discovery(FakeServer().get)
    res = await d.resolve(spec)
    assert (res.plural, res.group, res.version) == (plural, group, version)


async def test_subresources_scope_and_paths() -> None:
    d = Discovery(FakeServer().get)
    pods = await d.resolve("pods")
    assert pods.subresources == ("status", "log") and pods.namespaced and pods.kind == "Pod"
    assert pods.path() == "/api/v1/pods"
    assert pods.path("ns1") == "/api/v1/namespaces/ns1/pods"
    assert pods.path("ns1", "p", "status") == "/api/v1/namespaces/ns1/pods/p/status"
    ns = await d.resolve("namespaces")
    assert ns.path("ignored", "n1") == "/api/v1/namespaces/n1"
    dep = await d.resolve("deployments")
    assert dep.path("a", "b") == "/apis/apps/v1/namespaces/a/deployments/b" and dep.api_version == "apps/v1"
    with pytest.raises(ValueError):
        pods.path("ns", None, "status")
    with pytest.raises(ValueError):
        pods.path("ns", "")


async def test_cached_and_refreshed_on_miss() -> None:
    server = FakeServer()
    d = Discovery(server.get)
    await d.resolve("pods")
    n = len(server.calls)
    await d.resolve("cm")
    assert len(server.calls) == n  # cached
    with pytest.raises(ResourceNotFound):
        await d.resolve("foos")
    # a CRD appears: the next miss refreshes and finds it
    server.docs["/apis"]["groups"].append({"name": "example.com", "versions": [{"version": "v1"}],
                                           "preferredVersion": {"version": "v1"}})
    server.docs["/apis/example.com/v1"] = FOO
    res = await d.resolve("example.com/v1/foos")
    assert res.kind == "Foo" and not res.namespaced and res.path(None, "x") == "/apis/example.com/v1/foos/x"
    assert (await d.resolve("foos")).group == "example.com"
    assert (await d.resolve("foos.example.com")).plural == "foos"


async def test_a_resolved_spelling_is_not_searched_again_until_invalidated() -> None:
    d = Discovery(FakeServer().get)
    searched: list[str] = []
    find = d._find

    async def counting_find(spec: Any) -> Resource | None:
        searched.append(spec.name)
        return await find(spec)

    d._find = counting_find  # type: ignore[method-assign]
    first = await d.resolve("deploy")
    assert await d.resolve("deploy") is first and searched == ["deploy"]
    d.invalidate()
    assert await d.resolve("deploy") == first and searched == ["deploy", "deploy"]


async def test_explicit_resource_skips_discovery() -> None:
    server = FakeServer()
    res = Resource("x.io", "v1", "things", "Thing")
    assert await Discovery(server.get).resolve(res) is res and server.calls == []
    assert str(res) == "things.x.io"


def test_parse_errors() -> None:
    with pytest.raises(ResourceNotFound):
        parse_resource_spec("a/b/c/d")
    with pytest.raises(ResourceNotFound):
        parse_resource_spec("")
