"""Admission webhooks end to end: the embedded server calls a kinformer WebhookServer on the test's writes."""

from __future__ import annotations

from typing import Any

import pytest

import kinformer as ki
from kinformer.errors import APIError, Forbidden, Invalid

RULES = [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
          "resources": ["configmaps"]}]
VALIDATING = "admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def configuration(kind: str, name: str, client_config: dict[str, Any], **hook: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.example.com", "clientConfig": client_config, "rules": RULES,
                          "sideEffects": "None", "admissionReviewVersions": ["v1"], **hook}]}


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": data}


def no_secrets_in_data(req: ki.AdmissionRequest) -> None:
    obj = req.object or {}
    if any("password" in key for key in (obj.get("data") or {})):
        raise ki.Denied("configmaps must not hold passwords; use a Secret")
    if req.operation == "DELETE" and (req.old_object or {}).get("metadata", {}).get("labels", {}).get("keep"):
        raise ki.Denied("this configmap is kept", code=422)


def stamp(obj: dict[str, Any], req: ki.AdmissionRequest) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["stamped-by"] = req.user_info.get("username", "").replace(":", "-")
    obj.setdefault("data", {}).setdefault("defaulted", "yes")
    req.warn("stamped")
    return obj


async def test_validating_webhook_denies_with_its_message(kube_client, kube_webhook_server):
    kube_webhook_server.validating("/validate", no_secrets_in_data)
    await kube_client.create(VALIDATING, configuration("ValidatingWebhookConfiguration", "policy",
                                                       kube_webhook_server.client_config("/validate")))
    await kube_client.create("configmaps", cm("fine", a="1"), namespace="default")
    with pytest.raises(Forbidden) as err:
        await kube_client.create("configmaps", cm("bad", password="x"), namespace="default")
    assert err.value.message == ('admission webhook "policy.example.com" denied the request: '
                                 "configmaps must not hold passwords; use a Secret")
    with pytest.raises(Forbidden):
        await kube_client.patch("configmaps", "fine", {"data": {"password": "x"}}, namespace="default")
    await kube_client.patch("configmaps", "fine", {"metadata": {"labels": {"keep": "1"}}}, namespace="default")
    with pytest.raises(Invalid):
        await kube_client.delete("configmaps", "fine", namespace="default")
    assert (await kube_client.get("configmaps", "fine", namespace="default"))["data"] == {"a": "1"}
    names = [o["metadata"]["name"] for o in (await kube_client.list("configmaps", namespace="default")).items]
    assert "bad" not in names


async def test_mutating_webhook_patch_is_stored(kube_client, kube_webhook_server):
    kube_webhook_server.mutating("/mutate", stamp)
    await kube_client.create(MUTATING, configuration("MutatingWebhookConfiguration", "stamper",
                                                     kube_webhook_server.client_config("/mutate")))
    created = await kube_client.create("configmaps", cm("one", a="1"), namespace="default")
    assert created["metadata"]["labels"]["stamped-by"] == "kinformer-admin"  # the identity of an auth-less server
    stored = await kube_client.get("configmaps", "one", namespace="default")
    assert stored["data"] == {"a": "1", "defaulted": "yes"}


async def test_webhook_warnings_reach_the_client(kube_server, kube_webhook_server):
    import aiohttp

    kube_webhook_server.mutating("/mutate", stamp)
    async with ki.Client(kube_server.url) as client:
        await client.create(MUTATING, configuration("MutatingWebhookConfiguration", "stamper",
                                                    kube_webhook_server.client_config("/mutate")))
    async with aiohttp.ClientSession() as http, http.post(
            f"{kube_server.url}/api/v1/namespaces/default/configmaps", json=cm("warned")) as resp:
        assert resp.status == 201
        assert resp.headers.get("Warning") == '299 - "stamped"'


async def test_selectors_decide_what_is_sent(kube_client, kube_webhook_server):
    seen: list[str] = []

    def record(req: ki.AdmissionRequest) -> None:
        seen.append(f"{req.namespace}/{req.name}")

    kube_webhook_server.validating("/record", record)
    await kube_client.create("namespaces", {"metadata": {"name": "watched", "labels": {"webhooks": "on"}}})
    await kube_client.create(VALIDATING, configuration(
        "ValidatingWebhookConfiguration", "selective", kube_webhook_server.client_config("/record"),
        namespaceSelector={"matchLabels": {"webhooks": "on"}},
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}))
    await kube_client.create("configmaps", cm("a"), namespace="default")
    await kube_client.create("configmaps", cm("b"), namespace="watched")
    await kube_client.create("configmaps", cm("c", labels={"skip": "1"}), namespace="watched")
    assert seen == ["watched/b"]


@pytest.mark.parametrize(("policy", "allowed"), [("Fail", False), ("Ignore", True)])
async def test_a_down_webhook_follows_the_failure_policy(kube_client, policy, allowed):
    await kube_client.create(VALIDATING, configuration(
        "ValidatingWebhookConfiguration", "down", {"url": "https://127.0.0.1:9/validate"}, failurePolicy=policy,
        timeoutSeconds=2))
    if allowed:
        await kube_client.create("configmaps", cm("passes"), namespace="default")
        return
    with pytest.raises(APIError) as err:
        await kube_client.create("configmaps", cm("refused"), namespace="default")
    assert err.value.code == 500 and 'failed calling webhook "down.example.com"' in err.value.message


async def test_a_service_reference_reaches_the_webhook_through_endpoints(kube_client):
    async with ki.WebhookServer(port=0, hosts=["hooks.default.svc"]) as hooks:
        hooks.validating("/validate", no_secrets_in_data)
        await kube_client.create("services", {"metadata": {"name": "hooks"},
                                              "spec": {"ports": [{"name": "https", "port": 443}]}}, namespace="default")
        await kube_client.create("endpoints", {"metadata": {"name": "hooks"}, "subsets": [{
            "addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": hooks.port}]}]},
            namespace="default")
        ca = hooks.client_config("/")["caBundle"]
        await kube_client.create(VALIDATING, configuration(
            "ValidatingWebhookConfiguration", "by-service",
            {"service": {"namespace": "default", "name": "hooks", "path": "/validate"}, "caBundle": ca}))
        with pytest.raises(Forbidden):
            await kube_client.create("configmaps", cm("bad", password="x"), namespace="default")


async def test_a_certificate_for_another_name_is_refused(kube_client, kube_webhook_server):
    kube_webhook_server.validating("/validate", no_secrets_in_data)
    await kube_client.create("services", {"metadata": {"name": "hooks"},
                                          "spec": {"ports": [{"name": "https", "port": 443}]}}, namespace="default")
    await kube_client.create("endpoints", {"metadata": {"name": "hooks"}, "subsets": [{
        "addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": kube_webhook_server.port}]}]},
        namespace="default")
    await kube_client.create(VALIDATING, configuration(
        "ValidatingWebhookConfiguration", "wrong-name",
        {"service": {"namespace": "default", "name": "hooks", "path": "/validate"},
         "caBundle": kube_webhook_server.client_config("/")["caBundle"]}))
    with pytest.raises(APIError) as err:
        await kube_client.create("configmaps", cm("any"), namespace="default")
    assert err.value.code == 500 and "not valid for 'hooks.default.svc'" in err.value.message


async def test_dry_run_calls_side_effect_free_webhooks_and_stores_nothing(kube_server, kube_webhook_server):
    import aiohttp

    kube_webhook_server.mutating("/mutate", stamp)
    async with ki.Client(kube_server.url) as client:
        await client.create(MUTATING, configuration("MutatingWebhookConfiguration", "stamper",
                                                    kube_webhook_server.client_config("/mutate")))
        async with aiohttp.ClientSession() as http, http.post(
                f"{kube_server.url}/api/v1/namespaces/default/configmaps?dryRun=All", json=cm("dry")) as resp:
            assert resp.status == 201
            assert (await resp.json())["data"]["defaulted"] == "yes"
        assert [o["metadata"]["name"] for o in (await client.list("configmaps", namespace="default")).items
                if o["metadata"]["name"] == "dry"] == []


async def test_patch_ca_bundle_points_configurations_at_the_server(kube_client, kube_webhook_server):
    kube_webhook_server.validating("/validate", no_secrets_in_data)
    config = configuration("ValidatingWebhookConfiguration", "injected", {"url": kube_webhook_server.url + "/validate"})
    await kube_client.create(VALIDATING, config)
    await ki.patch_ca_bundle(kube_client, kube_webhook_server.ca_bundle, validating=["injected"])
    with pytest.raises(Forbidden):
        await kube_client.create("configmaps", cm("bad", password="x"), namespace="default")


async def test_manager_serves_registered_webhooks(kube_client):
    mgr = ki.Manager(kube_client, webhook_server=ki.WebhookServer(port=0))
    mgr.webhook_server.validating("/validate", no_secrets_in_data)
    import asyncio

    async with asyncio.TaskGroup() as tg:
        run = tg.create_task(mgr.run())
        await mgr.webhook_server.started.wait()
        await kube_client.create(VALIDATING, configuration("ValidatingWebhookConfiguration", "mgr",
                                                           mgr.webhook_server.client_config("/validate")))
        with pytest.raises(Forbidden):
            await kube_client.create("configmaps", cm("bad", password="x"), namespace="default")
        mgr.stop()
    assert run.done() and not mgr.webhook_server.started.is_set()
