"""The Scale view: built-in workloads' spec.replicas, custom resources' declared paths."""

from __future__ import annotations

from kinformer.server.endpoints.scale import scale_of, set_replicas
from kinformer.server.registry.resources import Registry, crd_resources

CRD = {"metadata": {"name": "dbs.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "dbs", "kind": "DB"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                         "statusReplicasPath": ".status.ready",
                                                         "labelSelectorPath": ".status.selector"}},
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_custom_resources_scale_along_their_declared_paths():
    info = crd_resources(CRD)[0]
    obj = {"metadata": {"name": "a"}, "spec": {"size": 3}, "status": {"ready": 2, "selector": "app=db"}}
    scale = scale_of(info, obj)
    assert scale["spec"] == {"replicas": 3} and scale["status"] == {"replicas": 2, "selector": "app=db"}
    set_replicas(info, obj, 5)
    assert obj["spec"] == {"size": 5} and "replicas" not in obj["spec"]
    empty = {"metadata": {"name": "b"}}
    assert scale_of(info, empty)["spec"] == {"replicas": 0} and scale_of(info, empty)["status"] == {"replicas": 0}
    set_replicas(info, empty, 1)
    assert empty["spec"] == {"size": 1}


def test_builtin_workloads_scale_spec_replicas():
    info = Registry().get("apps", "v1", "deployments")
    obj = {"metadata": {"name": "d"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
           "status": {"replicas": 1}}
    assert scale_of(info, obj)["status"] == {"replicas": 1, "selector": "app=web"}
    set_replicas(info, obj, 4)
    assert obj["spec"]["replicas"] == 4
