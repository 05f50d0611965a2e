"""Admission webhooks end to end: the embedded server calls a kinformer WebhookServer on the test's writes."""

from __future__ import annotations

from typing import Any

import pytest

import kinformer as ki
from kinformer.errors import APIError, Forbidden, Invalid
from testlib import served, wait_until

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


async def test_a_create_retried_for_its_generated_name_answers_one_attempts_warnings(kube_server,
                                                                                       kube_webhook_server):
    import aiohttp

    kube_webhook_server.mutating("/mutate", stamp)
    async with ki.Client(kube_server.url) as client:
        await client.create(MUTATING, configuration("MutatingWebhookConfiguration", "stamper",
                                                    kube_webhook_server.client_config("/mutate")))
    url = f"{kube_server.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=cm("gen-taken")) as resp:
            assert resp.status == 201
        names = iter(["gen-taken", "gen-taken", "gen-free"])  # two collisions, then a free name
        kube_server.store.generate_name = lambda prefix: next(names)
        async with http.post(url, json={"metadata": {"generateName": "gen-"}}) as resp:
            assert resp.status == 201 and (await resp.json())["metadata"]["name"] == "gen-free"
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


# -- CRD conversion webhooks ------------------------------------------------------------------------

CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def two_version_crd(client_config: dict[str, Any]) -> dict[str, Any]:
    """Widgets: v1 (storage) has spec.size in centimetres, v2 spec.sizeInches."""
    def version(name: str, storage: bool, field: str) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}}}

    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [version("v1", True, "size"), version("v2", False, "sizeInches")],
                     "conversion": {"strategy": "Webhook", "webhook": {
                         "clientConfig": client_config, "conversionReviewVersions": ["v1"]}}}}


def convert_widget(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    if desired == "example.com/v2" and "size" in spec:
        spec["sizeInches"] = round(spec.pop("size") / 2.54)
    elif desired == "example.com/v1" and "sizeInches" in spec:
        spec["size"] = round(spec.pop("sizeInches") * 2.54)
    return {**obj, "spec": spec}


@pytest.fixture
async def widgets(kube_client, kube_webhook_server):
    kube_webhook_server.conversion("/convert", convert_widget)
    await kube_client.create(CRDS, two_version_crd(kube_webhook_server.client_config("/convert")))

    await wait_until(lambda: served(kube_client, "example.com/v2/widgets"), what="the CRD served")
    return kube_client


def widget(name: str, api_version: str, **spec: int) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Widget", "metadata": {"name": name}, "spec": spec}


async def test_a_two_version_crd_reads_back_in_either_version(widgets):
    client = widgets
    await client.create("example.com/v1/widgets", widget("a", "example.com/v1", size=254), namespace="default")
    await client.create("example.com/v2/widgets", widget("b", "example.com/v2", sizeInches=10), namespace="default")
    a2 = await client.get("example.com/v2/widgets", "a", namespace="default")
    assert a2["apiVersion"] == "example.com/v2" and a2["spec"] == {"sizeInches": 100}
    b1 = await client.get("example.com/v1/widgets", "b", namespace="default")
    assert b1["apiVersion"] == "example.com/v1" and b1["spec"] == {"size": 25}  # stored in the storage version
    listed = await client.list("example.com/v2/widgets", namespace="default")
    assert sorted((o["metadata"]["name"], o["spec"]["sizeInches"]) for o in listed.items) == [("a", 100), ("b", 10)]
    assert {o["apiVersion"] for o in listed.items} == {"example.com/v2"}


async def test_patch_and_replace_in_the_converted_version(widgets):
    client = widgets
    await client.create("example.com/v1/widgets", widget("a", "example.com/v1", size=254), namespace="default")
    patched = await client.patch("example.com/v2/widgets", "a", {"spec": {"sizeInches": 20}}, namespace="default")
    assert patched["apiVersion"] == "example.com/v2" and patched["spec"] == {"sizeInches": 20}
    assert (await client.get("example.com/v1/widgets", "a", namespace="default"))["spec"] == {"size": 51}
    current = await client.get("example.com/v2/widgets", "a", namespace="default")
    replaced = await client.replace("example.com/v2/widgets", {**current.to_dict(), "spec": {"sizeInches": 1}})
    assert replaced["spec"] == {"sizeInches": 1}
    assert (await client.get("example.com/v1/widgets", "a", namespace="default"))["spec"] == {"size": 3}


async def test_watch_in_the_converted_version_converts_every_event(widgets):
    client = widgets
    await client.create("example.com/v1/widgets", widget("a", "example.com/v1", size=254), namespace="default")
    seen: list[tuple[str, str, dict[str, Any]]] = []
    stream = client.watch("example.com/v2/widgets", "default", resource_version="0")
    try:
        async for event in stream:
            seen.append((event.type, event.object["apiVersion"], dict(event.object.get("spec") or {})))
            if len(seen) == 1:
                await client.patch("example.com/v1/widgets", "a", {"spec": {"size": 508}}, namespace="default")
            if len(seen) == 2:
                break
    finally:
        await stream.aclose()
    assert seen == [("ADDED", "example.com/v2", {"sizeInches": 100}),
                    ("MODIFIED", "example.com/v2", {"sizeInches": 200})]


async def test_a_failing_conversion_webhook_is_a_500_and_the_storage_version_still_serves(kube_client):
    await kube_client.create(CRDS, two_version_crd({"url": "https://127.0.0.1:9/convert"}))

    await wait_until(lambda: served(kube_client, "example.com/v2/widgets"), what="the CRD served")
    await kube_client.create("example.com/v1/widgets", widget("a", "example.com/v1", size=1), namespace="default")
    with pytest.raises(APIError) as err:
        await kube_client.get("example.com/v2/widgets", "a", namespace="default")
    assert err.value.code == 500 and "conversion webhook for example.com/v2, Kind=Widget failed" in err.value.message
    assert (await kube_client.get("example.com/v1/widgets", "a", namespace="default"))["spec"] == {"size": 1}


HPA_V1 = "autoscaling/v1/horizontalpodautoscalers"
HPA_V2 = "autoscaling/v2/horizontalpodautoscalers"


def hpa_rules(version: str) -> list[dict[str, Any]]:
    return [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": [version],
             "resources": ["horizontalpodautoscalers"]}]


@pytest.mark.parametrize("policy", ["Equivalent", "Exact"])
async def test_a_webhook_sees_an_hpa_in_the_version_its_rules_name(kube_client, kube_webhook_server, policy):
    """kube's matchPolicy: Equivalent converts the object to the version a rule names; Exact only matches that."""
    seen: list[tuple[str, str, str]] = []

    def cap(obj: dict[str, Any], req: ki.AdmissionRequest) -> dict[str, Any]:
        seen.append((req.kind["version"], req.raw["requestKind"]["version"], obj["apiVersion"]))
        obj["spec"]["targetCPUUtilizationPercentage"] = 33  # a v1 field: the patch applies to the v1 object
        return obj

    kube_webhook_server.mutating("/cap", cap)
    await kube_client.create(MUTATING, configuration("MutatingWebhookConfiguration", "cap",
                                                     kube_webhook_server.client_config("/cap"),
                                                     rules=hpa_rules("v1"), matchPolicy=policy))
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    await kube_client.create(HPA_V1, {"metadata": {"name": "one"}, "spec": {"scaleTargetRef": ref, "maxReplicas": 3}},
                             namespace="default")
    await kube_client.create(HPA_V2, {"metadata": {"name": "two"}, "spec": {"scaleTargetRef": ref, "maxReplicas": 3}},
                             namespace="default")
    want = [("v1", "v1", "autoscaling/v1")] + ([("v1", "v2", "autoscaling/v1")] if policy == "Equivalent" else [])
    assert seen == want
    cpu = [(await kube_client.get(HPA_V2, name, namespace="default"))["spec"]["metrics"][0]["resource"]["target"][
        "averageUtilization"] for name in ("one", "two")]
    assert cpu == [33, 33 if policy == "Equivalent" else 80]


# -- what the server accepts from a webhook, and how it reaches one --------------------------------------


class RawWebhook:
    """An HTTPS server on 127.0.0.1 whose answers a test writes byte by byte (what a WebhookServer never sends)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer  # async (request, review) -> web.StreamResponse
        self.calls: list[str] = []

    async def __aenter__(self) -> RawWebhook:
        import base64

        from aiohttp import web

        from kinformer.webhook.certs import ServingCerts

        async def handle(request: web.Request) -> web.StreamResponse:
            self.calls.append(request.path)
            return await self.answer(request, await request.json())

        self.certs = ServingCerts(None, ["127.0.0.1"])
        app = web.Application()
        app.router.add_post("/{path:.*}", handle)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.certs.context)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"
        self.ca_bundle = base64.b64encode(self.certs.ca_bundle).decode()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()
        self.certs.close()

    def client_config(self, path: str) -> dict[str, str]:
        return {"url": self.url + path, "caBundle": self.ca_bundle}

    async def validating(self, client: ki.Client, name: str) -> None:
        """Register this server as the validating webhook ``name`` (at ``/validate``) for configmaps."""
        await client.create(VALIDATING, configuration("ValidatingWebhookConfiguration", name,
                                                      self.client_config("/validate")))


def allowed(review: dict[str, Any], **response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


async def test_an_answer_sent_in_pieces_is_read_to_its_end(kube_client):
    import asyncio
    import json

    from aiohttp import web

    async def in_pieces(request: web.Request, review: dict[str, Any]) -> web.StreamResponse:
        body = json.dumps(allowed(review, warnings=["w" * 200] * 1500)).encode()  # 300 KB
        assert len(body) > 300_000
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for start in range(0, len(body), 64 * 1024):
            await resp.write(body[start:start + 64 * 1024])
            await asyncio.sleep(0.01)  # each piece its own segments on the wire
        await resp.write_eof()
        return resp

    async with RawWebhook(in_pieces) as hook:
        await hook.validating(kube_client, "pieces")
        await kube_client.create("configmaps", cm("read-whole"), namespace="default")
    assert (await kube_client.get("configmaps", "read-whole", namespace="default"))["metadata"]["name"] == "read-whole"


async def test_an_answer_over_the_bound_is_a_failed_call(kube_client, monkeypatch):
    from aiohttp import web

    from kinformer.server.admission import webhook_client

    monkeypatch.setattr(webhook_client, "MAX_RESPONSE", 1000)

    async def chunked(request: web.Request, review: dict[str, Any]) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})  # no Content-Length
        await resp.prepare(request)
        await resp.write(encoded(allowed(review, warnings=["w" * 100] * 20)))
        await resp.write_eof()
        return resp

    async with RawWebhook(chunked) as hook:
        await hook.validating(kube_client, "big")
        with pytest.raises(APIError) as err:
            await kube_client.create("configmaps", cm("too-big"), namespace="default")
    assert err.value.code == 500 and "over 1000 bytes" in err.value.message


def encoded(doc: Any) -> bytes:
    import json

    return json.dumps(doc).encode()


@pytest.mark.parametrize("kind", ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:8080/hook", "'https' is the only allowed URL scheme"),
    ("https://user:pw@127.0.0.1/hook", "user information is not permitted in the URL"),
    ("https://127.0.0.1/hook?x=1", "query parameters are not permitted in the URL"),
    ("https:///hook", "host must be specified")])
async def test_a_webhook_url_must_be_plain_https(kube_client, kind, url, problem):
    resource = MUTATING if kind.startswith("Mutating") else VALIDATING
    with pytest.raises(Invalid) as err:
        await kube_client.create(resource, configuration(kind, "insecure", {"url": url}))
    causes = err.value.status["details"]["causes"]
    assert [(c["field"], problem in c["message"]) for c in causes] == [("webhooks[0].clientConfig.url", True)]


async def test_a_conversion_webhook_url_must_be_https(kube_client):
    with pytest.raises(Invalid) as err:
        await kube_client.create(CRDS, two_version_crd({"url": "http://127.0.0.1:8080/convert"}))
    assert [c["field"] for c in err.value.status["details"]["causes"]] == \
        ["spec.conversion.webhook.clientConfig.url"]


async def test_a_redirect_is_a_failed_call_and_is_not_followed(kube_client):
    from aiohttp import web

    async def redirect(request: web.Request, review: dict[str, Any]) -> web.StreamResponse:
        if request.path == "/elsewhere":
            return web.json_response(allowed(review))
        return web.Response(status=307, headers={"Location": "/elsewhere"})

    async with RawWebhook(redirect) as hook:
        await hook.validating(kube_client, "moved")
        with pytest.raises(APIError) as err:
            await kube_client.create("configmaps", cm("redirected"), namespace="default")
        assert err.value.code == 500 and "redirect (307)" in err.value.message
        assert hook.calls == ["/validate"]


@pytest.mark.parametrize("details", ["a string", ["a", "list"], 7, {"causes": "not a list", "name": "x"},
                                     {"causes": ["not an object", {"field": "data", "message": "no"}]}])
async def test_a_denial_with_malformed_details_is_still_a_denial(kube_client, details):
    from aiohttp import web

    async def deny(request: web.Request, review: dict[str, Any]) -> web.StreamResponse:
        answer = allowed(review)
        answer["response"].update(allowed=False, status={"code": 403, "message": "not today", "details": details})
        return web.json_response(answer)

    async with RawWebhook(deny) as hook:
        await hook.validating(kube_client, "odd")
        with pytest.raises(Forbidden) as err:
            await kube_client.create("configmaps", cm("denied"), namespace="default")
    assert err.value.message == 'admission webhook "odd.example.com" denied the request: not today'
    sent = err.value.status.get("details")
    assert sent is None or (isinstance(sent, dict) and all(isinstance(c, dict) for c in sent.get("causes", [])))


@pytest.mark.parametrize("change", [{"name": "other"}, {"namespace": "kube-system"}, {"uid": "forged"}])
async def test_a_conversion_webhook_may_not_change_who_an_object_is(kube_client, kube_webhook_server, change):
    def rename(obj: dict[str, Any], desired: str) -> dict[str, Any]:
        out = convert_widget(obj, desired)
        return {**out, "metadata": {**out["metadata"], **change}}

    kube_webhook_server.conversion("/convert", rename)
    await kube_client.create(CRDS, two_version_crd(kube_webhook_server.client_config("/convert")))
    await wait_until(lambda: served(kube_client, "example.com/v2/widgets"), what="the CRD served")
    await kube_client.create("example.com/v1/widgets", widget("a", "example.com/v1", size=254), namespace="default")
    with pytest.raises(APIError) as err:
        await kube_client.get("example.com/v2/widgets", "a", namespace="default")
    assert err.value.code == 500 and "changed the kind, name, namespace or uid" in err.value.message


IDENTITY_CHANGES = {"metadata.namespace": lambda o: o["metadata"].update(namespace="kube-system"),
                    "metadata.name": lambda o: o["metadata"].update(name="other"),
                    "metadata.uid": lambda o: o["metadata"].pop("uid"),
                    "kind": lambda o: o.update(kind="Secret"),
                    "apiVersion": lambda o: o.update(apiVersion="v2")}


@pytest.mark.parametrize("field", IDENTITY_CHANGES)
@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_a_mutating_webhook_may_not_change_who_the_object_is(kube_client, kube_webhook_server, field, policy):
    def change(obj: dict[str, Any], req: ki.AdmissionRequest) -> dict[str, Any]:
        IDENTITY_CHANGES[field](obj)
        obj.setdefault("data", {})["mutated"] = "yes"
        return obj

    kube_webhook_server.mutating("/mutate", change)
    await kube_client.create(MUTATING, configuration("MutatingWebhookConfiguration", "identity",
                                                     kube_webhook_server.client_config("/mutate"),
                                                     failurePolicy=policy))
    if policy == "Fail":
        with pytest.raises(APIError) as err:
            await kube_client.create("configmaps", cm("mine", a="1"), namespace="default")
        assert err.value.code == 500 and f"a webhook may not change {field}" in err.value.message
        names = [(o["metadata"]["namespace"], o["metadata"]["name"]) for ns in ("default", "kube-system")
                 for o in (await kube_client.list("configmaps", namespace=ns)).items]
        assert ("default", "mine") not in names and ("kube-system", "mine") not in names and \
            ("default", "other") not in names
        return
    created = await kube_client.create("configmaps", cm("mine", a="1"), namespace="default")  # the patch is ignored
    assert (created["kind"], created["metadata"]["namespace"], created["data"]) == ("ConfigMap", "default", {"a": "1"})
    assert created["metadata"]["uid"]


async def test_what_the_server_sets_is_put_back_after_mutation(kube_client, kube_webhook_server):
    def forge(obj: dict[str, Any], req: ki.AdmissionRequest) -> dict[str, Any]:
        if req.operation == "DELETE":
            return obj
        obj["metadata"].update(deletionTimestamp="2020-01-01T00:00:00Z", deletionGracePeriodSeconds=0,
                               creationTimestamp="2000-01-01T00:00:00Z", generation=42, resourceVersion="1")
        if obj["kind"] == "Deployment":
            obj["status"] = {"replicas": 99}
            obj["spec"]["replicas"] = 5 if req.operation == "UPDATE" else obj["spec"]["replicas"]
        return obj

    kube_webhook_server.mutating("/mutate", forge)
    rules = [*RULES, {"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                      "resources": ["deployments"]}]
    await kube_client.create(MUTATING, configuration("MutatingWebhookConfiguration", "forger",
                                                     kube_webhook_server.client_config("/mutate"), rules=rules))
    created = await kube_client.create("configmaps", cm("plain"), namespace="default")
    meta = created["metadata"]
    assert "deletionTimestamp" not in meta and "deletionGracePeriodSeconds" not in meta and "generation" not in meta
    assert meta["creationTimestamp"] != "2000-01-01T00:00:00Z" and meta["resourceVersion"] != "1"
    await kube_client.delete("configmaps", "plain", namespace="default")  # not held as if being deleted

    labels = {"app": "web"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                      "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    created = await kube_client.create("deployments", deployment, namespace="default")
    assert created["metadata"]["generation"] == 1 and created["status"].get("replicas") != 99
    updated = await kube_client.patch("deployments", "web", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
    assert updated["spec"]["replicas"] == 5  # the webhook changed the desired state: a new generation
    assert updated["metadata"]["generation"] == 2 and updated["status"].get("replicas") != 99


@pytest.mark.parametrize("client_config", [{}, {"url": "https://127.0.0.1/hook",
                                                "service": {"namespace": "default", "name": "hooks"}}])
async def test_a_webhook_names_exactly_one_of_url_and_service(kube_client, client_config):
    with pytest.raises(Invalid) as err:
        await kube_client.create(VALIDATING, configuration("ValidatingWebhookConfiguration", "which", client_config))
    assert "exactly one of url or service is required" in err.value.message


def test_a_stored_plain_http_url_is_never_called():
    from kinformer.server.admission.webhook_client import CallFailed, WebhookClient

    with pytest.raises(CallFailed, match="'https' is the only allowed URL scheme"):
        WebhookClient(lambda *args: None).target({"url": "http://127.0.0.1:8080/hook"})
