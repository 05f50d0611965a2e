"""CRUD, patch, status-subresource, dryRun, fieldValidation and body-handling behaviour of the embedded API server."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp
import pytest

from kinformer.server import APIServer
from testlib import CacheGate, call_raw, settle, wait_until
from testlib import call as call_json

CM = "/api/v1/namespaces/default/configmaps"
DEPLOY = "/apis/apps/v1/namespaces/default/deployments"


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None, *,
               ctype: str | None = "application/json", params: dict[str, str] | None = None,
               raw: bytes | None = None) -> tuple[int, Any, aiohttp.ClientResponse]:
    headers = {"Content-Type": ctype} if ctype else {}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    async with http.request(method, path, data=data, headers=headers, params=params) as r:
        text = await r.read()
        return r.status, (json.loads(text) if text else None), r


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment(name: str, image: str = "nginx:1", replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": image}]}}},
            "status": {"replicas": 99}}


def assert_status(body: dict[str, Any], code: int, reason: str) -> None:
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason, body


async def test_create_get_update_delete(http):
    code, obj, _ = await call(http, "POST", CM, cm("a", k="v"))
    assert code == 201
    meta = obj["metadata"]
    assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"
    assert meta["namespace"] == "default" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert "generation" not in meta and int(meta["resourceVersion"]) > 0  # ConfigMaps carry no generation
    code, got, _ = await call(http, "GET", f"{CM}/a")
    assert code == 200 and got["data"] == {"k": "v"} and got["metadata"]["resourceVersion"] == meta["resourceVersion"]

    code, body, _ = await call(http, "POST", CM, cm("a"))
    assert code == 409
    assert_status(body, 409, "AlreadyExists")
    assert body["details"] == {"name": "a", "kind": "configmaps"}

    got["data"]["k"] = "v2"
    code, upd, _ = await call(http, "PUT", f"{CM}/a", got)
    assert code == 200 and upd["data"]["k"] == "v2"
    assert int(upd["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert upd["metadata"]["uid"] == meta["uid"]

    code, body, _ = await call(http, "PUT", f"{CM}/a", got)  # stale resourceVersion
    assert code == 409
    assert_status(body, 409, "Conflict")
    assert "the object has been modified" in body["message"]

    unconditional = cm("a", k="v3")
    code, upd2, _ = await call(http, "PUT", f"{CM}/a", unconditional)
    assert code == 200 and upd2["data"] == {"k": "v3"}

    code, body, _ = await call(http, "DELETE", f"{CM}/a")
    assert code == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "a" and body["details"]["uid"] == meta["uid"]
    code, body, _ = await call(http, "GET", f"{CM}/a")
    assert code == 404
    assert_status(body, 404, "NotFound")
    assert body["message"] == 'configmaps "a" not found'
    code, body, _ = await call(http, "DELETE", f"{CM}/a")
    assert code == 404


async def test_missing_content_type_yaml_and_generate_name(http):
    code, obj, _ = await call(http, "POST", CM, {"metadata": {"generateName": "gen-"}}, ctype=None)
    assert code == 201
    name = obj["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == 9
    assert all(c in "bcdfghjklmnpqrstvwxz2456789" for c in name[4:])
    yaml_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: b\n"
    code, obj, _ = await call(http, "POST", CM, raw=yaml_body, ctype="application/yaml")
    assert code == 201 and obj["data"] == {"a": "b"}


def scripted_names(server: APIServer, *suffixes: str) -> list[str]:
    """Make ``server`` generate ``prefix + suffix`` for each of ``suffixes`` in turn (the last one repeated);
    returns the list of the names generated so far."""
    made: list[str] = []

    def generate(prefix: str) -> str:
        made.append(prefix + suffixes[min(len(made), len(suffixes) - 1)])
        return made[-1]

    server.store.generate_name = generate
    return made


async def test_generate_name_collision_is_retried_with_a_new_name(server, http):
    code, _, _ = await call(http, "POST", CM, cm("gen-aaaaa"))
    assert code == 201
    made = scripted_names(server, "aaaaa", "bbbbb")
    code, obj, _ = await call(http, "POST", CM, {"metadata": {"generateName": "gen-"}, "data": {"k": "v"}})
    assert code == 201, obj
    assert made == ["gen-aaaaa", "gen-bbbbb"] and obj["metadata"]["name"] == "gen-bbbbb"
    assert obj["data"] == {"k": "v"} and obj["metadata"]["generateName"] == "gen-"
    code, kept, _ = await call(http, "GET", f"{CM}/gen-aaaaa")
    assert code == 200 and kept["data"] == {}  # the object that held the name is untouched


async def test_generate_name_conflict_after_eight_attempts(server, http):
    code, _, _ = await call(http, "POST", CM, cm("gen-aaaaa"))
    assert code == 201
    made = scripted_names(server, "aaaaa")
    for params in (None, {"dryRun": "All"}):
        made.clear()
        code, body, resp = await call(http, "POST", CM, {"metadata": {"generateName": "gen-"}}, params=params)
        assert code == 409 and made == ["gen-aaaaa"] * 8
        assert_status(body, 409, "AlreadyExists")
        assert body["message"] == ('configmaps "gen-aaaaa" already exists, the server was not able to generate '
                                   "a unique name for the object")
        assert body["details"] == {"name": "gen-aaaaa", "kind": "configmaps", "retryAfterSeconds": 1}
        assert resp.headers["Retry-After"] == "1"


async def test_create_naming_its_object_is_not_retried(server, http):
    code, _, _ = await call(http, "POST", CM, cm("gen-aaaaa"))
    assert code == 201
    made = scripted_names(server, "bbbbb")
    code, body, resp = await call(http, "POST", CM, cm("gen-aaaaa"))
    assert code == 409 and body["message"] == 'configmaps "gen-aaaaa" already exists' and made == []
    assert "Retry-After" not in resp.headers
    named = {"metadata": {"name": "gen-aaaaa", "generateName": "gen-"}}  # a name given wins: one attempt
    code, body, _ = await call(http, "POST", CM, named)
    assert code == 409 and made == [] and body["message"].endswith("not able to generate a unique name for the object")


async def test_a_create_over_an_object_being_deleted_says_so(http):
    held = cm("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    assert (await call(http, "POST", CM, held))[0] == 201
    code, body, _ = await call(http, "POST", CM, cm("held"))
    assert code == 409 and body["message"] == 'configmaps "held" already exists'  # not being deleted yet
    assert (await call(http, "DELETE", f"{CM}/held"))[0] == 200  # kept by its finalizer, deletionTimestamp set
    for params in (None, {"dryRun": "All"}):
        code, body, _ = await call(http, "POST", CM, cm("held"), params=params)
        assert_status(body, 409, "AlreadyExists")
        assert body["message"] == 'object is being deleted: configmaps "held" already exists', params
        assert body["details"] == {"name": "held", "kind": "configmaps"}


async def test_validation_and_namespace_errors(http):
    code, body, _ = await call(http, "POST", CM, cm("Bad_Name"))
    assert code == 422
    assert_status(body, 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    code, body, _ = await call(http, "POST", "/api/v1/namespaces/nope/configmaps", cm("a"))
    assert code == 404 and body["message"] == 'namespaces "nope" not found'
    code, body, _ = await call(http, "GET", "/api/v1/namespaces/default/widgets")
    assert code == 404
    assert_status(body, 404, "NotFound")
    code, body, _ = await call(http, "POST", "/api/v1/configmaps", cm("x"))
    assert code == 405
    assert_status(body, 405, "MethodNotAllowed")
    code, body, _ = await call(http, "POST", CM, {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "x"}})
    assert code == 400


async def test_malformed_and_oversized_bodies_leave_data_intact(http):
    code, obj, _ = await call(http, "POST", CM, cm("keep", k="v"))
    assert code == 201
    rv = obj["metadata"]["resourceVersion"]
    for raw in (b"{not json", b"[1, 2]", b"\"str\"", b"", b'{"metadata": 5}'):
        code, body, _ = await call(http, "PUT", f"{CM}/keep", raw=raw)
        assert code == 400, raw
        assert_status(body, 400, "BadRequest")
    big = json.dumps(cm("keep", k="x" * (3 * 1024 * 1024 + 10))).encode()
    code, body, _ = await call(http, "PUT", f"{CM}/keep", raw=big)
    assert code == 413 and body["reason"] == "RequestEntityTooLarge"
    code, body, _ = await call(http, "PATCH", f"{CM}/keep", raw=b"{oops", ctype="application/merge-patch+json")
    assert code == 400
    code, got, _ = await call(http, "GET", f"{CM}/keep")
    assert code == 200 and got["data"] == {"k": "v"} and got["metadata"]["resourceVersion"] == rv


def _pb_len(field: int, payload: bytes) -> bytes:
    out = bytes([(field << 3) | 2])
    n = len(payload)
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b]) + payload


async def test_protobuf_create_configmap(http):
    meta = _pb_len(1, b"from-proto")
    entry = _pb_len(1, b"key") + _pb_len(2, b"value")
    configmap = _pb_len(1, meta) + _pb_len(2, entry)
    type_meta = _pb_len(1, b"v1") + _pb_len(2, b"ConfigMap")
    unknown = _pb_len(1, type_meta) + _pb_len(2, configmap) + _pb_len(3, b"") + _pb_len(4, b"")
    body = b"k8s\x00" + unknown
    code, obj, _ = await call(http, "POST", CM, raw=body, ctype="application/vnd.kubernetes.protobuf")
    assert code == 201, obj
    assert obj["metadata"]["name"] == "from-proto" and obj["data"] == {"key": "value"}


async def test_status_subresource_and_generation(http):
    code, d, _ = await call(http, "POST", DEPLOY, deployment("web"))
    assert code == 201
    assert "status" not in d or d["status"] != {"replicas": 99}
    assert d["metadata"]["generation"] == 1
    d["metadata"]["labels"]["extra"] = "1"
    d["status"] = {"replicas": 5}
    code, d2, _ = await call(http, "PUT", f"{DEPLOY}/web", d)
    assert code == 200
    assert d2["metadata"]["generation"] == 1  # metadata-only change
    assert d2.get("status", {}).get("replicas") != 5  # main endpoint ignores status
    d2["spec"]["replicas"] = 3
    code, d3, _ = await call(http, "PUT", f"{DEPLOY}/web", d2)
    assert code == 200 and d3["metadata"]["generation"] == 2
    d3["status"] = {"replicas": 3, "readyReplicas": 3}
    d3["spec"]["replicas"] = 10
    code, d4, _ = await call(http, "PUT", f"{DEPLOY}/web/status", d3)
    assert code == 200
    assert d4["status"] == {"replicas": 3, "readyReplicas": 3}
    assert d4["spec"]["replicas"] == 3 and d4["metadata"]["generation"] == 2
    code, d5, _ = await call(http, "PATCH", f"{DEPLOY}/web/status", {"status": {"observedGeneration": 2}},
                             ctype="application/merge-patch+json")
    assert code == 200 and d5["status"]["observedGeneration"] == 2 and d5["metadata"]["generation"] == 2


async def test_patch_types(http):
    await call(http, "POST", CM, cm("p", a="1"))
    code, obj, _ = await call(http, "PATCH", f"{CM}/p", {"metadata": {"labels": {"x": "y"}}, "data": {"b": "2"}},
                              ctype="application/merge-patch+json")
    assert code == 200 and obj["data"] == {"a": "1", "b": "2"} and obj["metadata"]["labels"] == {"x": "y"}
    rv = obj["metadata"]["resourceVersion"]
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
           {"op": "replace", "path": "/data/a", "value": "9"}]
    code, obj, _ = await call(http, "PATCH", f"{CM}/p", ops, ctype="application/json-patch+json")
    assert code == 200 and obj["data"]["a"] == "9"
    code, body, _ = await call(http, "PATCH", f"{CM}/p", ops, ctype="application/json-patch+json")
    assert code == 422  # the test op fails: the RV moved on
    assert body["reason"] == "Invalid"
    code, body, _ = await call(http, "PATCH", f"{CM}/p", {"metadata": {"resourceVersion": rv}, "data": {"c": "3"}},
                               ctype="application/merge-patch+json")
    assert code == 409 and body["reason"] == "Conflict"
    code, body, _ = await call(http, "PATCH", f"{CM}/p", {"data": {}}, ctype="application/xml")
    assert code == 415
    code, body, _ = await call(http, "PATCH", f"{CM}/missing", {"data": {}}, ctype="application/merge-patch+json")
    assert code == 404

    await call(http, "POST", DEPLOY, deployment("sm"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox"}]}}}}
    code, d, _ = await call(http, "PATCH", f"{DEPLOY}/sm", patch, ctype="application/strategic-merge-patch+json")
    assert code == 200
    assert sorted(c["name"] for c in d["spec"]["template"]["spec"]["containers"]) == ["main", "side"]
    assert d["metadata"]["generation"] == 2


async def test_server_side_apply(http):
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: '1'\n"
    code, err, _ = await call(http, "PATCH", f"{CM}/ssa", raw=body, ctype="application/apply-patch+yaml")
    assert code in (400, 422)  # fieldManager is required
    code, obj, _ = await call(http, "PATCH", f"{CM}/ssa", raw=body, ctype="application/apply-patch+yaml",
                              params={"fieldManager": "alice"})
    assert code == 201 and obj["data"] == {"a": "1"}
    assert obj["metadata"]["managedFields"][0]["manager"] == "alice"
    body2 = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: '2'\n"
    code, err, _ = await call(http, "PATCH", f"{CM}/ssa", raw=body2, ctype="application/apply-patch+yaml",
                              params={"fieldManager": "bob"})
    assert code == 409 and err["reason"] == "Conflict" and err["details"]["causes"]
    code, obj, _ = await call(http, "PATCH", f"{CM}/ssa", raw=body2, ctype="application/apply-patch+yaml",
                              params={"fieldManager": "bob", "force": "true"})
    assert code == 200 and obj["data"] == {"a": "2"}


async def test_dry_run_persists_nothing(http):
    code, obj, _ = await call(http, "POST", CM, cm("dry"), params={"dryRun": "All"})
    assert code == 201 and obj["metadata"]["name"] == "dry"
    assert (await call(http, "GET", f"{CM}/dry"))[0] == 404
    await call(http, "POST", CM, cm("real", k="v"))
    code, obj, _ = await call(http, "PUT", f"{CM}/real", cm("real", k="changed"), params={"dryRun": "All"})
    assert code == 200 and obj["data"] == {"k": "changed"}
    code, obj, _ = await call(http, "PATCH", f"{CM}/real", {"data": {"k": "p"}}, params={"dryRun": "All"},
                              ctype="application/merge-patch+json")
    assert code == 200 and obj["data"] == {"k": "p"}
    code, _, _ = await call(http, "DELETE", f"{CM}/real", params={"dryRun": "All"})
    assert code == 200
    code, got, _ = await call(http, "GET", f"{CM}/real")
    assert code == 200 and got["data"] == {"k": "v"}
    code, _, _ = await call(http, "POST", CM, cm("x"), params={"dryRun": "Bogus"})
    assert code == 400


async def test_field_validation(http):
    body = cm("fv", k="v")
    body["bogus"] = 1
    code, err, _ = await call(http, "POST", CM, body, params={"fieldValidation": "Strict"})
    assert code == 400 and 'strict decoding error: unknown field "bogus"' in err["message"]
    code, _, resp = await call(http, "POST", CM, body, params={"fieldValidation": "Warn"})
    assert code == 201 and resp.headers["Warning"].startswith("299 - ")
    assert "bogus" in resp.headers["Warning"]
    body["metadata"]["name"] = "fv2"
    code, _obj, resp = await call(http, "POST", CM, body, params={"fieldValidation": "Ignore"})
    assert code == 201 and "Warning" not in resp.headers


async def test_field_validation_of_nested_builtin_fields(http):
    def typo(name: str) -> dict[str, Any]:
        body = deployment(name)
        body.pop("status")
        body["spec"]["replica"] = 2
        body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPrt": 80, "containerPort": 80}]
        return body

    code, err, _ = await call(http, "POST", DEPLOY, typo("strict"), params={"fieldValidation": "Strict"})
    assert code == 400 and err["message"] == (  # in document order ("replica" follows "template")
        'strict decoding error: unknown field "spec.template.spec.containers[0].ports[0].containerPrt", '
        'unknown field "spec.replica"')
    code, obj, resp = await call(http, "POST", DEPLOY, typo("warn"), params={"fieldValidation": "Warn"})
    assert code == 201 and 'unknown field \\"spec.replica\\"' in resp.headers["Warning"]
    assert "replica" not in obj["spec"]  # dropped, as kube's decoder drops what the Go type lacks
    assert obj["spec"]["template"]["spec"]["containers"][0]["ports"][0] == {"containerPort": 80, "protocol": "TCP"}
    code, obj, resp = await call(http, "POST", DEPLOY, typo("ignore"), params={"fieldValidation": "Ignore"})
    assert code == 201 and "Warning" not in resp.headers and "replica" not in obj["spec"]
    code, got, _ = await call(http, "GET", f"{DEPLOY}/ignore")
    assert "replica" not in got["spec"]


async def test_a_status_patch_is_held_to_field_validation_and_types_in_what_it_changes(http):
    # the patched object shares the stored spec (checked when it was written); what the patch brings is checked
    body = deployment("st-patch")
    body.pop("status")
    assert (await call(http, "POST", DEPLOY, body))[0] == 201
    path, smp = f"{DEPLOY}/st-patch/status", "application/strategic-merge-patch+json"
    patch = {"status": {"replicaz": 1, "conditions": [{"type": "Progressing", "status": "True", "reazon": "x"}]}}
    code, err, _ = await call(http, "PATCH", path, patch, ctype=smp, params={"fieldValidation": "Strict"})
    assert code == 400 and err["message"] == (
        'strict decoding error: unknown field "status.replicaz", unknown field "status.conditions[0].reazon"')
    code, obj, resp = await call(http, "PATCH", path, patch, ctype=smp)
    assert code == 200 and 'unknown field \\"status.replicaz\\"' in resp.headers["Warning"]
    assert "replicaz" not in obj["status"] and obj["status"]["conditions"] == [{"type": "Progressing",
                                                                                 "status": "True"}]
    code, err, _ = await call(http, "PATCH", path, {"status": {"replicas": "two"}}, ctype=smp)
    assert code == 400 and "cannot unmarshal string into Go struct field DeploymentStatus.status.replicas" in \
        err["message"]


async def test_builtin_schema_types_and_required_fields(http):
    body = deployment("typed")
    body["spec"]["replicas"] = "three"
    _, err, _ = await call(http, "POST", DEPLOY, body)
    assert_status(err, 400, "BadRequest")  # as kube's decoder answers a value of the wrong JSON type
    assert err["message"] == ('Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal '
                              'string into Go struct field DeploymentSpec.spec.replicas of type int32')
    body["spec"]["replicas"] = 1
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"name": "http"}]
    _, err, _ = await call(http, "POST", DEPLOY, body)
    assert_status(err, 422, "Invalid")
    fields = {(c["field"], c["reason"]) for c in err["details"]["causes"]}
    assert ("spec.template.spec.containers[0].ports[0].containerPort", "FieldValueRequired") in fields


async def test_enum_fields_are_enforced_on_every_write_verb(http):
    pods = "/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "enum"},
           "spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "busybox"}]}}
    _, err, _ = await call(http, "POST", pods, pod)
    assert_status(err, 422, "Invalid")
    assert err["message"] == ('Pod "enum" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": '
                              'supported values: "Always", "OnFailure", "Never"')
    assert err["details"]["causes"] == [{"reason": "FieldValueNotSupported", "field": "spec.restartPolicy", "message":
                                         'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", '
                                         '"Never"'}]
    code, obj, _ = await call(http, "POST", DEPLOY, deployment("enum"))
    assert code == 201 and obj["spec"]["strategy"]["type"] == "RollingUpdate"
    bad = {"spec": {"strategy": {"type": "BlueGreen", "rollingUpdate": None}}}
    obj["spec"]["strategy"] = bad["spec"]["strategy"]
    applied = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "enum"}, **bad}
    for method, body, ctype, params in [
            ("PUT", obj, "application/json", None),
            ("PATCH", bad, "application/merge-patch+json", None),
            ("PATCH", bad, "application/strategic-merge-patch+json", None),
            ("PATCH", applied, "application/apply-patch+yaml", {"fieldManager": "t", "force": "true"})]:
        _, err, _ = await call(http, method, f"{DEPLOY}/enum", body, ctype=ctype, params=params)
        assert_status(err, 422, "Invalid")
        assert {"reason": "FieldValueNotSupported", "field": "spec.strategy.type", "message":
                'Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"'} in \
            err["details"]["causes"], (method, ctype)


async def test_an_enum_value_checked_by_the_schema_and_the_kind_is_reported_once(http):
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "enum"},
               "spec": {"type": "Public", "ports": [{"port": 80, "protocol": "ICMP"}]}}
    _, err, _ = await call(http, "POST", "/api/v1/namespaces/default/services", service)
    assert_status(err, 422, "Invalid")
    assert [(c["field"], c["message"]) for c in err["details"]["causes"]] == [
        ("spec.type", 'Unsupported value: "Public": supported values: "ClusterIP", "ExternalName", "LoadBalancer", '
                      '"NodePort"'),
        ("spec.ports[0].protocol", 'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"')]
    body = deployment("restart")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes"
    _, err, _ = await call(http, "POST", DEPLOY, body)
    assert [c["message"] for c in err["details"]["causes"]] == [  # kube: the pod spec's rule, then the workload's
        'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
        'Unsupported value: "Sometimes": supported values: "Always"']


async def test_delete_pod_returns_object_and_deletecollection(http):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    code, _, _ = await call(http, "POST", "/api/v1/namespaces/default/pods", pod)
    assert code == 201
    code, obj, _ = await call(http, "DELETE", "/api/v1/namespaces/default/pods/p1")
    assert code == 200 and obj["kind"] == "Pod" and obj["metadata"]["name"] == "p1"
    for i in range(4):
        body = cm(f"dc{i}")
        body["metadata"]["labels"] = {"grp": "a" if i < 3 else "b"}
        await call(http, "POST", CM, body)
    code, body, _ = await call(http, "DELETE", CM, params={"labelSelector": "grp=a"})
    assert code == 200 and len(body["items"]) == 3
    code, lst, _ = await call(http, "GET", CM)
    assert [o["metadata"]["name"] for o in lst["items"]] == ["dc3"]


async def test_delete_preconditions(http):
    _, obj, _ = await call(http, "POST", CM, cm("pre"))
    code, err, _ = await call(http, "DELETE", f"{CM}/pre", {"preconditions": {"uid": "other"}})
    assert code == 409 and err["reason"] == "Conflict"
    code, err, _ = await call(http, "DELETE", f"{CM}/pre", {"preconditions": {"resourceVersion": "1"}})
    assert code == 409
    code, _, _ = await call(http, "DELETE", f"{CM}/pre", {"preconditions": {"uid": obj["metadata"]["uid"]}})
    assert code == 200


async def test_system_namespaces_and_health(http):
    _code, lst, _ = await call(http, "GET", "/api/v1/namespaces")
    names = {o["metadata"]["name"] for o in lst["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    for path in ("/healthz", "/livez", "/readyz"):
        async with http.get(path) as r:
            assert r.status == 200 and await r.text() == "ok"


async def test_non_loopback_refused():
    with pytest.raises(ValueError):
        APIServer(host="0.0.0.0")


async def test_system_namespaces_cannot_be_deleted(http):
    code, body, _ = await call(http, "DELETE", "/api/v1/namespaces/default")
    assert code == 403 and body["reason"] == "Forbidden"
    assert (await call(http, "GET", "/api/v1/namespaces/default"))[0] == 200


async def test_overload_gives_429_with_retry_after():
    async with APIServer(compaction_interval=0, max_inflight=0) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        code, body, resp = await call(http, "GET", CM)
        assert code == 429 and resp.headers["Retry-After"] == "1"
        assert_status(body, 429, "TooManyRequests")
        for path in ("/healthz", "/livez/ping", "/readyz"):  # probes are exempt from flow control, as in kube
            async with http.get(path) as resp:
                assert resp.status == 200


async def test_unexpected_exception_is_a_500_status(server, http, monkeypatch):
    await call(http, "POST", CM, cm("safe", k="v"))

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(server.storage, "get", broken)
    code, body, _ = await call(http, "GET", f"{CM}/safe")
    assert code == 500
    assert_status(body, 500, "InternalError")
    monkeypatch.undo()
    code, got, _ = await call(http, "GET", f"{CM}/safe")
    assert code == 200 and got["data"] == {"k": "v"}


async def test_slow_watcher_is_dropped_without_blocking_others(server, http):
    prefix = "/registry/core/configmaps/"
    server.cache.watcher_buffer_events = 3
    slow, _ = server.cache.subscribe(prefix, server.cache.revision)
    server.cache.watcher_buffer_events = 1000
    fast, _ = server.cache.subscribe(prefix, server.cache.revision)
    for i in range(5):
        code, _, _ = await call(http, "POST", CM, cm(f"s{i}"))
        assert code == 201
    await server.cache.sync()
    assert slow.closed and slow.overflowed and not fast.closed
    assert [ev.cur.name for ev in fast.buf] == [f"s{i}" for i in range(5)]
    assert slow not in server.cache.bucket(prefix).watchers


async def test_a_watcher_falling_too_many_bytes_behind_is_dropped_with_its_buffer(server, http):
    prefix = "/registry/core/configmaps/"
    server.cache.watcher_buffer_bytes = 10_000
    slow, _ = server.cache.subscribe(prefix, server.cache.revision)
    for i in range(4):
        code, _, _ = await call(http, "POST", CM, cm(f"b{i}", v="x" * 4000))
        assert code == 201
    await server.cache.sync()
    assert slow.closed and slow.overflowed
    assert not slow.buf and slow.bytes == 0  # nothing pinned once dropped
    assert slow not in server.cache.bucket(prefix).watchers


async def test_a_watch_whose_client_stops_reading_is_ended_and_pins_little():
    async with APIServer(compaction_interval=0, namespace_defaults=False, watcher_buffer_bytes=256 * 1024) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        host, port = server.url.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(f"GET {CM}?watch=true&resourceVersion={server.cache.revision} HTTP/1.1\r\n"
                     f"Host: {host}\r\n\r\n".encode())
        await writer.drain()
        bucket = server.cache.bucket("/registry/core/configmaps/")
        await wait_until(lambda: len(bucket.watchers) == 1, what="the watch registered")
        [watcher] = bucket.watchers
        sent = 0
        while watcher in bucket.watchers:  # the client reads nothing: at most the bound stays buffered
            assert sent < 400, "the watch was never ended"
            assert (await call(http, "POST", CM, cm(f"big{sent}", v=str(sent) * 50_000)))[0] == 201
            assert watcher.bytes <= 256 * 1024
            sent += 1
        assert watcher.overflowed and not watcher.buf
        body = b""
        async with asyncio.timeout(30):  # now read: what was written, then the end of the stream
            while not body.endswith(b"\r\n0\r\n\r\n"):
                chunk = await reader.read(65536)
                assert chunk, "connection closed before the stream ended"
                body += chunk
        writer.close()
        names = [json.loads(line)["object"]["metadata"]["name"] for line in body.split(b"\n")
                 if line.startswith(b'{"type"')]
        assert names == [f"big{i}" for i in range(len(names))] and len(names) < sent  # a prefix, in order


async def test_scale_subresource(http):
    code, _, _ = await call(http, "POST", DEPLOY, deployment("sc", replicas=2))
    assert code == 201
    code, scale, _ = await call(http, "GET", f"{DEPLOY}/sc/scale")
    assert code == 200 and scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2} and scale["status"]["selector"] == "app=sc"
    code, scale, _ = await call(http, "PATCH", f"{DEPLOY}/sc/scale", {"spec": {"replicas": 5}},
                                ctype="application/merge-patch+json")
    assert code == 200 and scale["spec"]["replicas"] == 5
    code, got, _ = await call(http, "GET", f"{DEPLOY}/sc")
    assert got["spec"]["replicas"] == 5 and got["metadata"]["generation"] == 2
    scale["spec"]["replicas"] = -1
    code, _, _ = await call(http, "PUT", f"{DEPLOY}/sc/scale", scale)
    assert code == 422


async def test_tls_and_token_auth(tmp_path):
    import ssl

    async with APIServer(compaction_interval=0, tls=True, tokens=["s3cret"], data_dir=str(tmp_path)) as s:
        assert s.url.startswith("https://") and s.ca_cert
        ctx = ssl.create_default_context(cafile=s.ca_cert)
        async with aiohttp.ClientSession(base_url=s.url, connector=aiohttp.TCPConnector(ssl=ctx)) as http:
            async with http.get(CM) as r:
                assert r.status == 403  # no credentials: the anonymous user, whom RBAC refuses
            async with http.get(CM, headers={"Authorization": "Bearer wrong"}) as r:
                assert r.status == 401
            async with http.get(CM, headers={"Authorization": "Bearer s3cret"}) as r:
                assert r.status == 200 and (await r.json())["kind"] == "ConfigMapList"


async def test_concurrent_patches_lose_no_update(http):
    await call(http, "POST", CM, cm("counter", n="0"))

    async def label(i: int) -> None:
        code, _, _ = await call(http, "PATCH", f"{CM}/counter", {"metadata": {"labels": {f"l{i}": "x"}}},
                                ctype="application/merge-patch+json")
        assert code == 200

    await asyncio.gather(*(label(i) for i in range(20)))

    async def increment() -> None:
        while True:  # kopf-style optimistic lock: test the resourceVersion, then replace
            _, cur, _ = await call(http, "GET", f"{CM}/counter")
            ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": cur["metadata"]["resourceVersion"]},
                   {"op": "replace", "path": "/data/n", "value": str(int(cur["data"]["n"]) + 1)}]
            code, _, _ = await call(http, "PATCH", f"{CM}/counter", ops, ctype="application/json-patch+json")
            if code == 200:
                return
            assert code in (409, 422)

    await asyncio.gather(*(increment() for _ in range(10)))
    _, final, _ = await call(http, "GET", f"{CM}/counter")
    assert len(final["metadata"]["labels"]) == 20 and final["data"]["n"] == "10"


@pytest.mark.parametrize("path, body", [
    (CM, {"metadata": {"name": 5}}),
    (CM, {"metadata": {"name": "l", "labels": "x"}}),
    (CM, {"metadata": {"name": "l", "labels": {"bad key!": "v"}}}),
    (CM, {"metadata": {"name": "o", "ownerReferences": "x"}}),
    (CM, {"metadata": {"name": "o", "ownerReferences": [{"uid": 1}]}}),
    (CM, {"metadata": {"name": "f", "finalizers": "x"}}),
    (CM, {"metadata": {"generateName": 7}}),
    (CM, {"metadata": {"name": "d"}, "data": {"k": 1}}),
    (CM, {"metadata": {"name": "n", "namespace": "other"}}),
    ("/api/v1/namespaces", {"metadata": {"name": "sp"}, "spec": [1]}),
    ("/api/v1/namespaces", {"metadata": {"name": "Not_A_Label"}}),
])
async def test_garbage_objects_are_rejected_not_crashed(http, path, body):
    code, resp, _ = await call(http, "POST", path, body)
    assert 400 <= code < 500, resp
    assert resp["kind"] == "Status"
    code, _, _ = await call(http, "GET", "/api/v1/namespaces/default")
    assert code == 200


async def test_metrics_endpoint(http):
    await call(http, "POST", CM, cm("m"))
    await call(http, "GET", f"{CM}/missing")
    async with http.get("/metrics") as r:
        text = await r.text()
    assert r.status == 200
    assert 'apiserver_request_total{code="201",resource="configmaps",verb="POST"} 1.0' in text
    assert 'apiserver_request_total{code="404",resource="configmaps",verb="GET"} 1.0' in text


async def test_metrics_count_a_path_the_same_way_every_time(http, monkeypatch):
    """Each path's resource is parsed once and remembered (a bounded memo): repeats and a full memo count alike."""
    monkeypatch.setattr("kinformer.server.app.Metrics.PATH_MEMO", 2)
    for name in ("a", "b", "c"):
        await call(http, "POST", CM, cm(name))
        await call(http, "GET", f"{CM}/{name}")
        async with http.get(f"{CM}?watch=1&timeoutSeconds=1&resourceVersion=0") as r:
            await r.read()
    async with http.get("/metrics") as r:
        text = await r.text()
    assert 'apiserver_request_total{code="201",resource="configmaps",verb="POST"} 3.0' in text
    assert 'apiserver_request_total{code="200",resource="configmaps",verb="GET"} 3.0' in text
    assert 'apiserver_request_total{code="200",resource="configmaps",verb="WATCH"} 3.0' in text


async def test_a_bare_watch_path_is_a_404_and_counted(http):
    code, body, _ = await call(http, "GET", "/api/v1/watch")  # no resource after /watch
    assert code == 404 and body["kind"] == "Status"
    await call(http, "GET", "/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=1")
    async with http.get("/metrics") as r:
        text = await r.text()
    assert 'apiserver_request_total{code="404",resource="watch",verb="GET"} 1.0' in text
    assert 'apiserver_request_total{code="200",resource="configmaps",verb="WATCH"} 1.0' in text


@pytest.mark.parametrize("path, body", [
    ("/apis/batch/v1/namespaces/default/jobs",
     {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
      "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
    ("/api/v1/namespaces/default/persistentvolumeclaims",
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
      "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
      "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
])
async def test_catalogue_kinds_are_stored_like_any_kind(http, path, body):
    code, obj, _ = await call(http, "POST", path, body)
    assert code == 201, obj
    assert obj["kind"] == body["kind"] and obj["metadata"]["uid"]
    code, listed, _ = await call(http, "GET", path)
    assert code == 200 and listed["kind"] == body["kind"] + "List"
    assert body["metadata"]["name"] in [o["metadata"]["name"] for o in listed["items"]]  # beside bootstrap objects


@pytest.mark.parametrize("sub", ["log", "exec", "attach", "portforward", "proxy", "proxy/some/path"])
async def test_kubelet_subresources_answer_a_clear_status(http, sub):
    code, _, _ = await call(http, "POST", "/api/v1/namespaces/default/pods",
                              {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert code == 201
    code, body, _ = await call(http, "GET", f"/api/v1/namespaces/default/pods/p/{sub}")
    assert_status(body, 400, "BadRequest")
    assert "kubelet" in body["message"] and body["details"]["name"] == "p"


async def test_verbs_a_resource_does_not_serve_are_405(http):
    for method, path, params in (("GET", "/apis/authentication.k8s.io/v1/tokenreviews", None),
                                 ("DELETE", "/api/v1/namespaces", None),
                                 ("GET", "/api/v1/componentstatuses", {"watch": "true"})):
        _, body, _ = await call(http, method, path, params=params)
        assert_status(body, 405, "MethodNotAllowed")


async def test_hostile_bodies_are_client_errors_and_write_nothing(server, http):
    """An alias bomb, nesting past the depth limit (inside an unknown field) and media types a browser may send
    cross-site are each a 4xx Status; the store does not move."""
    bomb = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 7)]
    bomb.append("data: {k: v}")
    deep = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":' + b"[" * 600 + b"]" * 600 + b"}"
    plain = json.dumps(cm("plain", k="v")).encode()
    before = await server.storage.current_revision()
    for raw, ctype, code, reason in ((("\n".join(bomb)).encode(), "application/yaml", 400, "BadRequest"),
                                     (deep, "application/json", 400, "BadRequest"),
                                     (plain, "text/plain", 415, "UnsupportedMediaType"),
                                     (plain, "application/x-www-form-urlencoded", 415, "UnsupportedMediaType")):
        got, body, _ = await call(http, "POST", CM, raw=raw, ctype=ctype)
        assert got == code, (ctype, body)
        assert_status(body, code, reason)
    assert await server.storage.current_revision() == before
    got, body, _ = await call(http, "POST", CM, cm("target"))
    assert got == 201
    before = await server.storage.current_revision()
    deep_patch = b'{"data":{"k":"v"},"x":' + b"[" * 600 + b"]" * 600 + b"}"
    got, body, _ = await call(http, "PATCH", f"{CM}/target", raw=deep_patch, ctype="application/merge-patch+json")
    assert got == 400, body
    assert await server.storage.current_revision() == before


async def test_json_patch_copy_amplification_is_refused_and_writes_nothing(server, http):
    code, _, _ = await call(http, "POST", CM, cm("amp", k="v" * 1000))
    assert code == 201
    before = await server.storage.current_revision()
    ops = [{"op": "copy", "from": "/data", "path": f"/data/c{i}"} for i in range(28)]
    code, body, _ = await call(http, "PATCH", f"{CM}/amp", ops, ctype="application/json-patch+json")
    assert code == 422, body
    assert_status(body, 422, "Invalid")
    assert "accumulated size increase of copy" in body["details"]["causes"][0]["message"]
    assert len(json.dumps(body)) < 4096
    assert await server.storage.current_revision() == before


async def test_unconditional_update_is_not_lost_when_cache_is_stale(server, http):
    """kube's GuaranteedUpdate re-reads storage before calling an update a no-op when it started from the cache."""
    code, created = await call_json(http, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v1"}})
    assert code == 201
    await settle(server, created["metadata"]["resourceVersion"])
    gate = CacheGate(server)
    gate.close()
    body = {"metadata": {"name": "a"}, "data": {"k": "v2"}}
    code, second = await call_json(http, "PUT", f"{CM}/a", body, params={"fieldManager": "m"})
    assert code == 200 and second["data"] == {"k": "v2"}
    # The cache still holds v1: putting v1 back must still be written.
    body = {"metadata": {"name": "a"}, "data": {"k": "v1"}}
    code, third = await call_json(http, "PUT", f"{CM}/a", body, params={"fieldManager": "m"})
    gate.open()
    assert code == 200
    code, now = await call_json(http, "GET", f"{CM}/a")
    assert now["data"] == {"k": "v1"}, "the acknowledged update was silently dropped"
    assert int(third["metadata"]["resourceVersion"]) > int(second["metadata"]["resourceVersion"])


async def test_malformed_delete_preconditions_is_400(server, http):
    code, _ = await call_json(http, "POST", CM, {"metadata": {"name": "a"}})
    assert code == 201
    code, body = await call_json(http, "DELETE", f"{CM}/a", {"preconditions": "x"})
    assert code == 400, body
    code, body = await call_json(http, "DELETE", CM, {"preconditions": ["x"]})
    assert code == 400, body


async def test_malformed_managed_fields_fall_back_to_live(server, http):
    """kube's field manager ignores undecodable managedFields in a request and keeps the live object's."""
    bad = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": "x"}]
    code, body = await call_json(http, "POST", CM, {"metadata": {"name": "b", "managedFields": bad}})
    assert code == 201, body
    code, _ = await call_json(http, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert code == 201
    code, body = await call_json(http, "PUT", f"{CM}/a", {"metadata": {"name": "a", "managedFields": bad},
                                                     "data": {"k": "w"}})
    assert code == 200, body
    assert all(isinstance(e.get("fieldsV1"), dict) for e in body["metadata"]["managedFields"])


async def test_invalid_finalizer_names_are_rejected(server, http):
    """kube validates each finalizer as a qualified name: null/"" -> 422 Invalid (field metadata.finalizers[i])."""
    code, body = await call_json(http, "POST", CM, {"metadata": {"name": "a", "finalizers": [None]}})
    assert code == 422, body
    code, body = await call_json(http, "POST", CM, {"metadata": {"name": "b", "finalizers": [""]}})
    assert code == 422, body


async def test_yaml_body_with_dates_and_int_keys_is_accepted(server, http):
    """kube converts YAML to JSON first (sigs.k8s.io/yaml): an unquoted date stays a string, a key 2 becomes "2"."""
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\ndata: {day: 2020-01-01, 2: two}\n"
    code, obj = await call_raw(http, "POST", CM, body.encode(), "application/yaml")
    assert code == 201, obj
    assert obj["data"] == {"day": "2020-01-01", "2": "two"}
    apply = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\ndata: {day: 2021-02-03}\n"
    code, obj = await call_raw(http, "PATCH", f"{CM}/y?fieldManager=m&force=true", apply.encode(),
                               "application/apply-patch+yaml")
    assert code == 200, obj


async def test_scale_put_with_non_object_spec_is_400(server, http):
    deployment = {"metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    code, _ = await call_json(http, "POST", "/apis/apps/v1/namespaces/default/deployments", deployment)
    assert code == 201
    code, body = await call_json(http, "PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale",
                            {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "d"}, "spec": 3})
    assert code == 400, body


async def test_at_most_one_controller_owner_reference(server, http):
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": n, "controller": True} for n in ("p", "q")]
    code, body = await call_json(http, "POST", CM, {"metadata": {"name": "two", "ownerReferences": refs}})
    assert code == 422, body


def _crd_without_status_subresource() -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


async def test_custom_resource_without_status_subresource_bumps_generation_on_status(server, http):
    """kube (customResourceStrategy): without the status subresource every non-metadata change bumps generation."""
    code, _ = await call_json(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                         _crd_without_status_subresource())
    assert code == 201
    path = "/apis/example.com/v1/namespaces/default/gadgets"
    code, obj = await call_json(http, "POST", path, {"apiVersion": "example.com/v1", "kind": "Gadget",
                                                "metadata": {"name": "g"}, "spec": {"a": 1}})
    assert code == 201, obj
    assert obj["metadata"]["generation"] == 1
    code, obj = await call_json(http, "PATCH", f"{path}/g", {"status": {"ready": True}},
                           ctype="application/merge-patch+json")
    assert code == 200 and obj["status"] == {"ready": True}
    assert obj["metadata"]["generation"] == 2


async def test_a_custom_resource_path_follows_its_crd_while_the_server_remembers_resolved_paths(server, http):
    """Resolved paths are remembered per registry revision: a CRD's path is served once it is established and
    answers 404 again once the CRD is gone, however often it was resolved meanwhile."""
    path = "/apis/example.com/v1/namespaces/default/gadgets"
    assert (await call_json(http, "GET", path))[0] == 404
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert (await call_json(http, "POST", crd, _crd_without_status_subresource()))[0] == 201
    for _ in range(3):
        assert (await call_json(http, "GET", path))[0] == 200
    assert (await call_json(http, "DELETE", f"{crd}/gadgets.example.com"))[0] == 200

    async def gone() -> bool:
        return (await call_json(http, "GET", path))[0] == 404

    await wait_until(gone, what="the CRD's path answered 404")


async def test_object_paths_resolve_by_their_own_namespace_name_and_subresource(server, http):
    """An object's path resolves through what the server remembers of its resource: each path keeps its own
    namespace, name and subresource; a subresource the resource lacks stays a 404; a converted resource's
    object is served in the version asked for; a custom resource's object paths follow its CRD."""
    assert (await call_json(http, "POST", "/api/v1/namespaces", {"metadata": {"name": "other"}}))[0] == 201
    for ns, name in (("default", "a"), ("other", "b")):
        code, _ = await call_json(http, "POST", f"/api/v1/namespaces/{ns}/configmaps", cm(name, at=ns))
        assert code == 201
    for ns, name in (("default", "a"), ("other", "b"), ("default", "a")):
        code, got = await call_json(http, "GET", f"/api/v1/namespaces/{ns}/configmaps/{name}")
        assert code == 200 and got["metadata"]["name"] == name and got["data"] == {"at": ns}, got
    assert (await call_json(http, "GET", "/api/v1/namespaces/other/configmaps/a"))[0] == 404
    assert (await call_json(http, "GET", "/api/v1/namespaces/default/configmaps/a/status"))[0] == 404
    event = {"metadata": {"name": "e"}, "eventTime": "2026-12-03T16:20:03.496743Z", "reportingController": "x.io/c",
             "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal", "regarding": {"name": "a"}}
    events = "/apis/events.k8s.io/v1/namespaces/default/events"
    assert (await call_json(http, "POST", events, event))[0] == 201
    for path in (f"{events}/e", "/api/v1/namespaces/default/events/e", f"{events}/e"):
        code, got = await call_json(http, "GET", path)
        assert code == 200 and got["metadata"]["name"] == "e", got
        assert got["apiVersion"] == ("v1" if path.startswith("/api/") else "events.k8s.io/v1")
    gadget = "/apis/example.com/v1/namespaces/default/gadgets/g"
    assert (await call_json(http, "GET", gadget))[0] == 404
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert (await call_json(http, "POST", crd, _crd_without_status_subresource()))[0] == 201

    async def created() -> bool:
        return (await call_json(http, "POST", "/apis/example.com/v1/namespaces/default/gadgets", {
            "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}))[0] == 201

    async def gone() -> bool:
        return (await call_json(http, "GET", gadget))[0] == 404

    await wait_until(created, what="a Gadget created")
    assert (await call_json(http, "GET", gadget))[0] == 200
    assert (await call_json(http, "DELETE", f"{crd}/gadgets.example.com"))[0] == 200
    await wait_until(gone, what="the CRD's object paths answered 404")


async def test_put_with_non_string_resource_version_is_400(server, http):
    code, created = await call_json(http, "POST", CM, {"metadata": {"name": "a"}})
    assert code == 201
    rv = int(created["metadata"]["resourceVersion"])
    code, body = await call_json(http, "PUT", f"{CM}/a", {"metadata": {"name": "a", "resourceVersion": rv}})
    assert code == 400, body


async def test_delete_options_with_wrong_types_are_400(server, http):
    code, _ = await call_json(http, "POST", CM, {"metadata": {"name": "a"}})
    assert code == 201
    for opts in ({"orphanDependents": "yes"}, {"propagationPolicy": 1}, {"preconditions": {"uid": 5}}):
        code, body = await call_json(http, "DELETE", f"{CM}/a", opts)
        assert code == 400, (opts, body)


async def test_owner_reference_flags_must_be_booleans(server, http):
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "p", "uid": "p", "controller": "yes"}]
    code, body = await call_json(http, "POST", CM, {"metadata": {"name": "a", "ownerReferences": refs}})
    assert code == 400, body  # kube's decoder refuses it before validation
    assert body["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
                               'string into Go struct field OwnerReference.metadata.ownerReferences.controller of '
                               'type bool')


async def test_yaml_lone_surrogate_is_400_and_pair_is_joined(server, http):
    lone = b'{"metadata": {"name": "a"}, "data": {"k": "\\ud83d"}}'
    code, body = await call_raw(http, "POST", CM, lone, "application/yaml")
    assert code == 400, body
    pair = b'{"metadata": {"name": "b"}, "data": {"k": "\\ud83d\\ude00", true: "t"}}'
    code, body = await call_raw(http, "POST", CM, pair, "application/yaml")
    assert code == 201, body
    assert body["data"] == {"k": "\U0001f600", "true": "t"}


async def test_unknown_field_warning_is_quoted(server, http):
    raw = json.dumps({"metadata": {"name": "a"}, 'x"\ny': 1}).encode()
    async with http.post(CM, data=raw, headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201
        assert r.headers["Warning"] == r'299 - "unknown field \"x\"\ny\""'


async def test_errors_and_warnings_do_not_echo_huge_values(http):
    """A 422 about a 1 MiB label value, and a body with thousands of unknown fields, answer in a few KiB."""
    bad = cm("huge")
    bad["metadata"]["labels"] = {"app": "v" * (1024 * 1024)}
    code, body, resp = await call(http, "POST", CM, bad)
    assert code == 422
    assert_status(body, 422, "Invalid")
    assert len(json.dumps(body)) < 16 * 1024
    assert "metadata.labels" in body["message"] and "characters truncated" in body["message"]
    noisy = cm("noisy")
    noisy.update({f"unknown-field-{i}-" + "z" * 100: i for i in range(3000)})
    code, _, resp = await call(http, "POST", CM, noisy)
    assert code == 201
    assert 0 < len(resp.headers["Warning"]) < 8 * 1024


async def test_json_bodies_end_with_a_newline_as_kube_apiserver_writes_them(http):
    """kube's JSON serializer ends each body with a newline; clients comparing an error body exactly rely on it."""
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    created, _, _ = await call(http, "POST", CM, cm("nl", k="v"))
    assert created == 201
    requests = [("GET", f"{CM}/nl", {}, None), ("GET", CM, {}, None), ("GET", f"{CM}/nl", {"Accept": table}, None),
                ("GET", f"{CM}/nl", {"Accept": partial}, None), ("GET", f"{CM}/missing", {}, None),
                ("PUT", f"{CM}/nl", {"Content-Type": "application/json"},
                 {**cm("nl", k="w"), "metadata": {"name": "nl", "resourceVersion": "1"}}),
                ("PATCH", f"{CM}/nl", {"Content-Type": "application/merge-patch+json"}, {"data": {"k": "x"}}),
                ("GET", "/api", {}, None), ("GET", "/apis", {}, None), ("GET", "/api/v1", {}, None),
                ("GET", "/api/v1/nothing", {}, None), ("DELETE", f"{CM}/nl", {}, None)]
    for method, path, headers, body in requests:
        data = json.dumps(body).encode() if body is not None else None
        async with http.request(method, path, headers=headers, data=data) as r:
            raw = await r.read()
        assert raw.endswith(b"}\n") and not raw.endswith(b"\n\n"), (method, path, r.status, raw[-40:])
    # the official Python client's create_from_yaml tests compare a conflict's body byte for byte
    assert (await call(http, "POST", DEPLOY, deployment("triple-nginx")))[0] == 201
    async with http.post(DEPLOY, json=deployment("triple-nginx")) as r:
        assert await r.read() == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps '
            b'\\"triple-nginx\\" already exists","reason":"AlreadyExists","details":{"name":"triple-nginx",'
            b'"group":"apps","kind":"deployments"},"code":409}\n')


async def test_namespaced_custom_resource_path_across_namespaces_serves_only_list_and_watch(server, http):
    """kube's custom resource handler: other verbs on that path are 404 (a built-in's answer 405, its router's)."""
    code, _ = await call_json(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              _crd_without_status_subresource())
    assert code == 201
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"}}
    across = "/apis/example.com/v1/gadgets"
    for method, body, ctype in (("POST", gadget, "application/json"), ("DELETE", None, "application/json"),
                                ("PUT", gadget, "application/json"), ("PATCH", {}, "application/merge-patch+json")):
        code, status, _ = await call(http, method, across, body, ctype=ctype)
        assert code == 404, (method, status)
        assert_status(status, 404, "NotFound")
    code, lst, _ = await call(http, "GET", across)
    assert code == 200 and lst["items"] == []
    code, _, _ = await call(http, "POST", "/apis/example.com/v1/namespaces/default/gadgets", gadget)
    assert code == 201
    code, status, _ = await call(http, "POST", "/api/v1/configmaps", cm("x"))
    assert code == 405


async def test_fields_the_schema_lists_as_required_but_kube_does_not_validate_are_optional(http):
    """kube 1.32 accepts these without the field (its validation checks the zero value); the schema's ``required``
    list is not its validation (the full list: tests/unit/server/test_schemas.py, NOT_REQUIRED_BY_KUBE)."""
    labels = {"app": "db"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "db", "image": "postgres"}]}}
    creates = [
        ("/apis/apps/v1/namespaces/default/statefulsets",
         {"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": labels}, "template": template}}),
        ("/apis/apps/v1/namespaces/default/controllerrevisions", {"metadata": {"name": "rev"}, "data": {}}),
        ("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "zero"}}),
        ("/api/v1/namespaces/default/pods", {"metadata": {"name": "iscsi"}, "spec": {
            "containers": [{"name": "a", "image": "x"}],
            "volumes": [{"name": "v", "iscsi": {"targetPortal": "10.0.0.1:3260",
                                                "iqn": "iqn.2001-04.com.example:a"}}]}}),
    ]
    for path, body in creates:
        code, created, _ = await call(http, "POST", path, body)
        assert code == 201, (path, created)
    code, sts, _ = await call(http, "GET", "/apis/apps/v1/namespaces/default/statefulsets/db")
    assert code == 200 and "serviceName" not in sts["spec"]
    status_patches = [
        ("/apis/apps/v1/namespaces/default/statefulsets/db/status",
         {"status": {"availableReplicas": 0, "conditions": [{"reason": "Waiting"}]}}),
        ("/api/v1/namespaces/default/pods/iscsi/status", {"status": {"containerStatuses": [
            {"name": "a", "state": {"terminated": {"reason": "Completed"}}}]}}),
    ]
    for path, patch in status_patches:
        code, patched, _ = await call(http, "PATCH", path, patch, ctype="application/merge-patch+json")
        assert code == 200, (path, patched)
    code, err, _ = await call(http, "POST", "/apis/apps/v1/namespaces/default/statefulsets",
                              {"metadata": {"name": "bad"}, "spec": {"template": template}})
    assert code == 422 and ("spec.selector", "FieldValueRequired") in {
        (c["field"], c["reason"]) for c in err["details"]["causes"]}  # what kube requires stays required


@pytest.mark.parametrize("ctype", ["application/strategic-merge-patch+json", "application/apply-patch+yaml"])
async def test_a_large_patch_merges_off_the_loop_so_health_probes_answer_meanwhile(
        http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch, ctype: str) -> None:
    import threading

    from kinformer.server.endpoints.offloop import OFF_LOOP_BYTES
    from kinformer.server.registry import apply, patch

    merging, probed = threading.Event(), threading.Event()
    saw_probe: list[bool] = []

    def blocking(merge: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # the merge ends only after /healthz answered meanwhile
            merging.set()
            saw_probe.append(probed.wait(timeout=10))
            return merge(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(patch, "strategic_merge_patch", blocking(patch.strategic_merge_patch))
    monkeypatch.setattr(apply, "server_side_apply", blocking(apply.server_side_apply))
    code, _, _ = await call(http, "POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}})
    assert code == 201
    finalizers = [f"example.com/f{i}" for i in range(OFF_LOOP_BYTES // 20)]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "finalizers": finalizers}}
    assert len(json.dumps(body)) >= OFF_LOOP_BYTES
    patching = asyncio.create_task(call(http, "PATCH", f"{CM}/big", body, ctype=ctype,
                                        params={"dryRun": "All", "fieldManager": "m"}))
    assert await asyncio.to_thread(merging.wait, 30)
    async with http.get("/healthz") as r:
        assert r.status == 200
    probed.set()
    code, out, _ = await patching
    assert code == 200, out
    assert saw_probe == [True]
    assert out["metadata"]["finalizers"] == finalizers


async def test_get_reads_storage_and_serves_the_cached_version_of_that_revision(server, http, monkeypatch):
    """A GET without resourceVersion is a quorum read (kube reads etcd): the cache's bytes answer only when the
    cache holds the very revision storage has; a lagging cache never answers an older version."""
    from kinformer.server.endpoints import reads

    code, created = await call_json(http, "POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v1"}})
    assert code == 201
    await settle(server, created["metadata"]["resourceVersion"])
    decoded: list[Any] = []
    decode = reads.served
    monkeypatch.setattr(reads, "served", lambda kv: decoded.append(kv) or decode(kv))
    code, got = await call_json(http, "GET", f"{CM}/a")
    assert code == 200 and got == created and not decoded, "the cache held this revision: no decode"
    gate = CacheGate(server)
    gate.close()
    code, updated = await call_json(http, "PUT", f"{CM}/a", {"metadata": {"name": "a"}, "data": {"k": "v2"}})
    assert code == 200
    code, got = await call_json(http, "GET", f"{CM}/a")
    gate.open()
    assert code == 200 and got == updated and len(decoded) == 1, "the cache lagged: storage's version, decoded"


STRATEGIC = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


async def test_status_patches_never_change_a_version_the_watch_cache_holds_or_served(server, http):
    """A status patch shares what it does not touch with the version it read: neither that version, nor any
    the watch cache holds or handed to a watcher, ever changes."""
    pods = "/api/v1/namespaces/default/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "p"}},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    code, created = await call_json(http, "POST", pods, pod)
    assert code == 201
    watched: list[dict[str, Any]] = []

    async def watch() -> None:
        params = {"watch": "1", "resourceVersion": created["metadata"]["resourceVersion"]}
        async with http.get(pods, params=params) as r:
            async for line in r.content:
                watched.append(json.loads(line)["object"])

    watching = asyncio.create_task(watch())
    bucket = server.cache.buckets["/registry/core/pods/"]
    seen = []  # every cached version: the object itself as first handed out, and what it was then
    patches = [(STRATEGIC, {"metadata": {"uid": created["metadata"]["uid"]},
                            "status": {"phase": "Running", "hostIP": "10.0.0.1",
                                       "conditions": [{"type": "Ready", "status": "False", "reason": None}]}}),
               (MERGE_PATCH, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
               (STRATEGIC, {"status": {"podIP": "10.244.0.2", "conditions": [{"type": "Ready", "status": "True"}]}})]
    try:
        for ctype, patch in patches:
            await settle(server, created["metadata"]["resourceVersion"])
            current = bucket.objects["/registry/core/pods/default/p"]
            seen.append((current.obj, json.loads(current.raw)))
            code, created = await call_raw(http, "PATCH", f"{pods}/p/status", json.dumps(patch).encode(), ctype)
            assert code == 200, created
        await wait_until(lambda: len(watched) == len(patches), what="every patch watched")
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
    for obj, as_served in seen:
        assert obj == as_served
    assert [w["status"].get("podIP") for w in watched] == [None, None, "10.244.0.2"]
    assert [w["status"]["conditions"][0]["status"] for w in watched] == ["False", "True", "True"]
    assert all(w["spec"] == watched[0]["spec"] and w["metadata"]["labels"] == {"app": "p"} for w in watched)
    code, live = await call_json(http, "GET", f"{pods}/p")
    assert live == watched[-1] and live["status"]["hostIP"] == "10.0.0.1"
