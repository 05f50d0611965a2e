"""Per-kind rules over HTTP: defaulting, generation, kind validation, immutables and DELETE answers."""

from __future__ import annotations

import asyncio
import base64
import copy

from testlib import call
from unit.server.test_defaults import NGINX, NGINX_AS_RETURNED

NS = "/api/v1/namespaces/default"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
SERVER_SET = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "namespace")


async def test_nginx_deployment_comes_back_defaulted_as_kube_returns_it(http):
    code, created = await call(http, "POST", DEPLOYS, NGINX)
    assert code == 201, created
    for key in SERVER_SET:
        created["metadata"].pop(key)
    assert created == NGINX_AS_RETURNED
    code, got = await call(http, "GET", f"{DEPLOYS}/nginx-deployment")
    assert got["spec"] == NGINX_AS_RETURNED["spec"]


async def test_generation_only_on_kinds_that_have_one(http):
    code, cm = await call(http, "POST", f"{NS}/configmaps", {"metadata": {"name": "c"}, "data": {"k": "1"}})
    assert code == 201 and "generation" not in cm["metadata"]
    code, cm = await call(http, "PATCH", f"{NS}/configmaps/c", {"data": {"k": "2"}},
                          ctype="application/merge-patch+json")
    assert code == 200 and "generation" not in cm["metadata"]
    code, dep = await call(http, "PATCH", f"{DEPLOYS}/nginx", {"spec": {"replicas": 2}},
                           ctype="application/merge-patch+json")
    assert code == 404 and dep["details"] == {"name": "nginx", "group": "apps", "kind": "deployments"}
    nginx = copy.deepcopy(NGINX)
    nginx["metadata"]["name"] = "nginx"
    assert (await call(http, "POST", DEPLOYS, nginx))[0] == 201
    code, dep = await call(http, "PATCH", f"{DEPLOYS}/nginx", {"spec": {"replicas": 2}},
                           ctype="application/merge-patch+json")
    assert code == 200 and dep["metadata"]["generation"] == 2


async def test_deployment_selector_rules(http):
    bad = copy.deepcopy(NGINX)
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    code, err = await call(http, "POST", DEPLOYS, bad)
    assert code == 422 and err["reason"] == "Invalid"
    assert err["details"]["causes"][0]["field"] == "spec.template.metadata.labels"
    assert (await call(http, "POST", DEPLOYS, NGINX))[0] == 201
    code, err = await call(http, "PATCH", f"{DEPLOYS}/nginx-deployment",
                           {"spec": {"selector": {"matchLabels": {"tier": "x"}},
                                     "template": {"metadata": {"labels": {"tier": "x"}}}}},
                           ctype="application/merge-patch+json")
    assert code == 422 and "spec.selector: Invalid value" in err["message"] and "field is immutable" in err["message"]


async def test_delete_answers_the_object_for_pods_services_and_service_accounts(http):
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    code, created = await call(http, "POST", f"{NS}/pods", pod)
    assert code == 201 and created["spec"]["tolerations"][0]["tolerationSeconds"] == 300
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    code, body = await call(http, "DELETE", f"{NS}/pods/p")
    assert code == 200 and body["kind"] == "Pod"
    assert (await call(http, "POST", f"{NS}/serviceaccounts", {"metadata": {"name": "sa"}}))[0] == 201
    code, body = await call(http, "DELETE", f"{NS}/serviceaccounts/sa")
    assert code == 200 and body["kind"] == "ServiceAccount"
    assert (await call(http, "POST", f"{NS}/configmaps", {"metadata": {"name": "gone"}}))[0] == 201
    code, body = await call(http, "DELETE", f"{NS}/configmaps/gone")
    assert code == 200 and body["kind"] == "Status" and body["status"] == "Success"
    code, body = await call(http, "DELETE", f"{NS}/configmaps/gone")
    assert code == 404 and body["details"] == {"name": "gone", "kind": "configmaps"}


async def test_secret_data_wrapped_across_lines_is_accepted(http):
    wrapped = base64.encodebytes(b"y" * 90).decode()
    secret = {"metadata": {"name": "s"}, "data": {"big": wrapped}, "stringData": {"extra": "text"}}
    code, created = await call(http, "POST", f"{NS}/secrets", secret)
    assert code == 201, created
    assert created["data"] == {"big": base64.b64encode(b"y" * 90).decode(),
                               "extra": base64.b64encode(b"text").decode()}
    assert "stringData" not in created and created["type"] == "Opaque"


async def test_create_with_a_non_numeric_resource_version_is_accepted(http):
    code, _ = await call(http, "POST", f"{NS}/configmaps", {"metadata": {"name": "a", "resourceVersion": "abc"}})
    assert code == 201
    code, err = await call(http, "POST", f"{NS}/configmaps", {"metadata": {"name": "b", "resourceVersion": "5"}})
    assert code == 422 and err["details"]["causes"][0]["field"] == "metadata.resourceVersion"


async def test_immutable_configmap(http):
    body = {"metadata": {"name": "frozen"}, "data": {"k": "1"}, "immutable": True}
    assert (await call(http, "POST", f"{NS}/configmaps", body))[0] == 201
    code, err = await call(http, "PATCH", f"{NS}/configmaps/frozen", {"data": {"k": "2"}},
                           ctype="application/merge-patch+json")
    assert code == 422 and "field is immutable when `immutable` is set" in err["message"]


async def test_custom_resource_scale_uses_the_crd_paths(http):
    from unit.server.test_scale import CRD

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", **CRD}
    assert (await call(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd))[0] == 201
    dbs = "/apis/example.com/v1/namespaces/default/dbs"
    for _ in range(200):  # the CRD is served once the registry has seen it
        code, _ = await call(http, "GET", dbs)
        if code == 200:
            break
        await asyncio.sleep(0.02)
    body = {"apiVersion": "example.com/v1", "kind": "DB", "metadata": {"name": "a"}, "spec": {"size": 3}}
    assert (await call(http, "POST", dbs, body))[0] == 201
    code, scale = await call(http, "GET", f"{dbs}/a/scale")
    assert code == 200 and scale["spec"] == {"replicas": 3} and scale["status"] == {"replicas": 0}
    code, scale = await call(http, "PATCH", f"{dbs}/a/scale", {"spec": {"replicas": 7}},
                             ctype="application/merge-patch+json")
    assert code == 200 and scale["spec"] == {"replicas": 7}
    code, obj = await call(http, "GET", f"{dbs}/a")
    assert obj["spec"] == {"size": 7}


async def test_not_found_answers_always_carry_details(http):
    """kubectl debug reads ``details`` of a 404 and crashes when it is missing."""
    code, body = await call(http, "GET", "/api/v1/nosuchresources")
    assert code == 404 and body["details"] == {}
    code, body = await call(http, "GET", "/apis/apps/v1/namespaces/default/deployments/none")
    assert code == 404 and body["details"] == {"name": "none", "group": "apps", "kind": "deployments"}


async def test_jobs_orphan_their_pods_by_default_and_say_so(http):
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    job = {"metadata": {"name": "pi"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}}
    code, created = await call(http, "POST", jobs, job)
    assert code == 201 and created["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"]
    async with http.delete(f"{jobs}/pi") as r:
        body = await r.json()
        assert r.status == 200 and "child pods are preserved by default" in r.headers["Warning"]
    assert body["metadata"]["finalizers"] == ["orphan"]  # the GC orphans the pods, then the Job goes
    assert (await call(http, "POST", jobs, {**job, "metadata": {"name": "bg"}}))[0] == 201
    async with http.delete(f"{jobs}/bg", params={"propagationPolicy": "Background"}) as r:
        assert r.status == 200 and "Warning" not in r.headers


async def test_the_creator_owns_defaults_but_not_what_create_preparation_and_admission_add(http):
    """kube-apiserver records the creating manager's entry after decoding (defaults applied), before
    PrepareForCreate and the admission plugins run."""
    pod = {"metadata": {"name": "owned"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    code, created = await call(http, "POST", f"{NS}/pods?fieldManager=kubectl-run", pod)
    assert code == 201, created
    assert created["spec"]["volumes"][0]["name"].startswith("kube-api-access-")
    assert created["spec"]["serviceAccountName"] == "default" and created["spec"]["tolerations"]
    [entry] = created["metadata"]["managedFields"]
    assert entry["manager"] == "kubectl-run"
    spec = entry["fieldsV1"]["f:spec"]
    assert sorted(spec) == ["f:containers", "f:dnsPolicy", "f:enableServiceLinks", "f:restartPolicy",
                            "f:schedulerName", "f:securityContext", "f:terminationGracePeriodSeconds"]
    assert sorted(spec["f:containers"]['k:{"name":"c"}']) == [
        ".", "f:image", "f:imagePullPolicy", "f:name", "f:resources", "f:terminationMessagePath",
        "f:terminationMessagePolicy"]
    svc = {"metadata": {"name": "owned"}, "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]}}
    code, created = await call(http, "POST", f"{NS}/services?fieldManager=kubectl-create", svc)
    assert code == 201 and created["spec"]["clusterIP"]
    owned = created["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
    assert sorted(owned) == ["f:internalTrafficPolicy", "f:ports", "f:selector", "f:sessionAffinity", "f:type"]


async def test_an_updater_does_not_own_what_the_update_preparation_changes(http):
    """kube-apiserver records the writer's managedFields before PrepareForUpdate: a DaemonSet's template
    generation annotation, bumped by the strategy when the template changes, is owned by nobody."""
    path = "/apis/apps/v1/namespaces/default/daemonsets"
    ds = {"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}}}}
    code, created = await call(http, "POST", f"{path}?fieldManager=creator", ds)
    assert code == 201 and created["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "1"}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}}}
    code, patched = await call(http, "PATCH", f"{path}/d?fieldManager=editor", patch,
                               ctype="application/strategic-merge-patch+json")
    assert code == 200 and patched["metadata"]["annotations"] == {"deprecated.daemonset.template.generation": "2"}
    entries = {e["manager"]: e["fieldsV1"] for e in patched["metadata"]["managedFields"]}
    assert sorted(entries) == ["creator", "editor"]
    assert all("f:annotations" not in fields.get("f:metadata", {}) for fields in entries.values())
    assert "f:image" in entries["editor"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']


async def test_a_cronjob_name_leaves_room_for_its_jobs_suffix_and_csrs_take_any_name(http):
    cj = {"metadata": {"name": "c" * 53}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {
        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    code, err = await call(http, "POST", "/apis/batch/v1/namespaces/default/cronjobs", cj)
    assert code == 422 and err["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "metadata.name",
         "message": f'Invalid value: "{"c" * 53}": must be no more than 52 characters'}]
    cj["metadata"]["name"] = "c" * 52
    assert (await call(http, "POST", "/apis/batch/v1/namespaces/default/cronjobs", cj))[0] == 201
    csr = {"metadata": {"name": "node-csr-AbC_dEf"}, "spec": {
        "request": base64.b64encode(b"not parsed before the name").decode(), "signerName": "example.com/custom",
        "usages": ["client auth"]}}
    code, err = await call(http, "POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", csr)
    assert not any(c["field"] == "metadata.name" for c in (err.get("details") or {}).get("causes") or ()), err


async def test_a_claim_without_a_class_gets_the_default_storage_class(http):
    default = {"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "example.com/disk"}
    assert (await call(http, "POST", "/apis/storage.k8s.io/v1/storageclasses", default))[0] == 201
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                    "resources": {"requests": {"storage": "1Gi"}}}}
    code, created = await call(http, "POST", f"{NS}/persistentvolumeclaims", claim)
    assert code == 201 and created["spec"]["storageClassName"] == "std"
    claim["metadata"]["name"], claim["spec"]["storageClassName"] = "none", ""
    code, created = await call(http, "POST", f"{NS}/persistentvolumeclaims", claim)
    assert code == 201 and created["spec"]["storageClassName"] == ""
