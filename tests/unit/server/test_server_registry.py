"""The resource registry: built-ins, CRD registration, version ordering."""

from __future__ import annotations

from kinformer.server.registry.resources import Registry, version_priority


def crd(versions: list[tuple[str, bool]]) -> dict:
    return {"metadata": {"name": "foos.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"plural": "foos", "kind": "Foo", "shortNames": ["fo"], "categories": ["all"]},
                     "versions": [{"name": v, "served": served, "storage": i == 0,
                                   "subresources": {"status": {}, "scale": {}},
                                   "selectableFields": [{"jsonPath": ".spec.color"}]}
                                  for i, (v, served) in enumerate(versions)]}}


def test_builtins():
    reg = Registry()
    cm = reg.get("", "v1", "configmaps")
    assert cm is not None and cm.kind == "ConfigMap" and cm.namespaced and cm.short_names == ("cm",)
    assert cm.api_version == "v1" and cm.list_kind == "ConfigMapList"
    assert cm.storage_prefix == "/registry/core/configmaps/"
    deploy = reg.get("apps", "v1", "deployments")
    assert deploy is not None and deploy.api_version == "apps/v1" and "scale" in deploy.subresources
    assert "all" in deploy.categories
    ns = reg.by_kind("", "Namespace")
    assert ns is not None and not ns.namespaced
    gv = reg.group_versions()
    assert next(iter(gv)) == "" and gv["apps"] == ["v1"] and "coordination.k8s.io" in gv


def test_crd_add_and_remove():
    reg = Registry()
    rev = reg.revision
    infos = reg.add_crd(crd([("v1beta1", True), ("v1", True), ("v2alpha1", False)]))
    assert sorted(i.version for i in infos) == ["v1", "v1beta1"]
    assert reg.revision > rev
    foo = reg.get("example.com", "v1", "foos")
    assert foo is not None and not foo.builtin and not foo.namespaced
    assert foo.singular == "foo" and foo.subresources == ("status", "scale")
    assert foo.selectable_fields == (".spec.color",) and foo.crd_name == "foos.example.com"
    assert reg.get("example.com", "v2alpha1", "foos") is None
    assert reg.by_kind("example.com", "Foo").version == "v1"
    assert reg.group_versions()["example.com"] == ["v1", "v1beta1"]
    reg.add_crd(crd([("v1", True)]))
    assert reg.get("example.com", "v1beta1", "foos") is None
    rev = reg.revision
    reg.remove_crd("foos.example.com")
    assert reg.get("example.com", "v1", "foos") is None and reg.revision > rev
    assert "example.com" not in reg.group_versions()


def test_version_priority():
    versions = ["v1alpha1", "v2", "foo", "v1beta2", "v1", "v1beta1", "v10"]
    assert sorted(versions, key=version_priority) == ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]


def test_builtins_are_kube_1_32_defaults():
    reg = Registry()
    gv = reg.group_versions()
    assert set(gv) == {
        "", "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io", "apps",
        "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io",
        "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io", "node.k8s.io", "policy", "rbac.authorization.k8s.io", "scheduling.k8s.io",
        "storage.k8s.io"}
    assert gv["autoscaling"] == ["v2", "v1"] and all(v == ["v1"] for g, v in gv.items() if g != "autoscaling")
    assert len(reg.resources()) == 59
    pvc = reg.get("", "v1", "persistentvolumeclaims")
    assert pvc is not None and pvc.short_names == ("pvc",) and pvc.has_status
    ns = reg.get("", "v1", "namespaces")
    assert ns is not None and "deletecollection" not in ns.verbs and ns.subresource("finalize").verbs == ("update",)
    assert reg.get("authorization.k8s.io", "v1", "selfsubjectaccessreviews").verbs == ("create",)
    token = reg.get("", "v1", "serviceaccounts").subresource("token")
    assert (token.group, token.version, token.kind, token.verbs) == ("authentication.k8s.io", "v1", "TokenRequest",
                                                                    ("create",))
    assert "resize" not in reg.get("", "v1", "pods").subresources  # feature-gated off in 1.32
    assert reg.get("", "v1", "componentstatuses").verbs == ("get", "list")
