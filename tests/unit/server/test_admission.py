"""Admission webhooks as the embedded server calls them: matching, order, patches, failure policies."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from kinformer.server.admission.webhooks import AdmissionAttributes, WebhookDispatcher, rule_matches
from kinformer.server.machinery.status import StatusError
from kinformer.server.registry.resources import ResourceInfo
from kinformer.tls import ensure_certs, server_ssl_context
from kinformer.webhook import Denied, WebhookServer

CONFIGMAPS = ResourceInfo(group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap",
                          namespaced=True)
NAMESPACES = ResourceInfo(group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace",
                          namespaced=False)
NODES = ResourceInfo(group="", version="v1", kind="Node", plural="nodes", singular="node", namespaced=False)
ALL_CM = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def attrs(op: str = "CREATE", info: ResourceInfo = CONFIGMAPS, sub: str = "", ns: str = "default",
          dry_run: bool = False) -> AdmissionAttributes:
    return AdmissionAttributes(operation=op, info=info, namespace=ns, name="c", subresource=sub, user="alice",
                               groups=("dev",), dry_run=dry_run)


def cm(labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default",
                                                                   "labels": labels or {}}, "data": data}


@pytest.mark.parametrize(("resources", "sub", "expected"), [
    (["configmaps"], "", True), (["configmaps"], "status", False), (["*"], "", True), (["*"], "status", False),
    (["*/*"], "status", True), (["configmaps/*"], "status", True), (["*/status"], "status", True),
    (["*/status"], "", False), (["configmaps/status"], "status", True), (["secrets"], "", False),
])
def test_rule_resources(resources, sub, expected):
    rule = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": resources}
    assert rule_matches(rule, attrs(sub=sub)) is expected


def test_rule_operations_groups_versions_scope():
    base = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["*"]}
    assert rule_matches(base, attrs())
    assert not rule_matches(base, attrs("DELETE"))
    assert not rule_matches({**base, "apiGroups": ["apps"]}, attrs())
    assert not rule_matches({**base, "apiVersions": ["v2"]}, attrs())
    assert not rule_matches({**base, "scope": "Cluster"}, attrs())
    assert rule_matches({**base, "scope": "Cluster"}, attrs(info=NODES, ns=""))
    assert rule_matches({**base, "scope": "Namespaced"}, attrs())


class Cluster:
    """The server-side objects the dispatcher reads: configurations, namespaces, services, endpoints."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {}
        self.namespaces: dict[str, dict[str, str]] = {"default": {"env": "dev"}, "prod": {"env": "prod"}}
        self.named: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add_config(self, kind: str, name: str, *hooks: dict[str, Any]) -> None:
        resource = f"admissionregistration.k8s.io/{kind}webhookconfigurations"
        self.objects.setdefault(resource, []).append({"metadata": {"name": name}, "webhooks": list(hooks)})

    def dispatcher(self) -> WebhookDispatcher:
        return WebhookDispatcher(lambda r: self.objects.get(r, []), self.namespaces.get,
                                 lambda r, ns, n: self.named.get((r, ns, n)))


def hook(name: str, config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": config, "rules": ALL_CM, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], **extra}


@pytest.fixture
async def webhooks() -> AsyncIterator[WebhookServer]:
    calls: list[str] = []

    def deny_big(req):
        calls.append("deny-big")
        if len(req.object.get("data") or {}) > 2:
            raise Denied("too many keys", code=422)
        req.warn("checked by deny-big")

    def add_label(obj, req):
        calls.append("add-label")
        obj["metadata"].setdefault("labels", {})["mutated"] = "yes"

    def add_key(obj, req):
        calls.append("add-key")
        obj.setdefault("data", {})["added"] = "1"

    def label_once(obj, req):
        calls.append("label-once")
        labels = obj["metadata"].setdefault("labels", {})
        labels["seen-key"] = str("added" in (obj.get("data") or {}))

    async def slow(req):
        await asyncio.Event().wait()

    srv = WebhookServer(port=0, hosts=["hooks.default.svc"], shutdown_timeout=0.5)
    srv.validating("/deny-big", deny_big)
    srv.mutating("/add-label", add_label)
    srv.mutating("/add-key", add_key)
    srv.mutating("/label-once", label_once)
    srv.validating("/slow", slow)
    srv.calls = calls  # type: ignore[attr-defined]
    async with srv:
        yield srv


async def test_validating_webhook_denies_with_kube_message_and_code(webhooks):
    cluster = Cluster()
    cluster.add_config("validating", "policy", hook("deny-big.example.com", webhooks.client_config("/deny-big")))
    d = cluster.dispatcher()
    try:
        a = attrs()
        await d.validate(a, cm(a="1"), None)
        assert a.warnings == ["checked by deny-big"]
        with pytest.raises(StatusError) as err:
            await d.validate(attrs(), cm(a="1", b="2", c="3"), None)
        assert err.value.code == 422
        assert err.value.message == 'admission webhook "deny-big.example.com" denied the request: too many keys'
    finally:
        await d.close()


async def test_mutating_webhooks_run_in_order_and_patches_apply(webhooks):
    cluster = Cluster()
    cluster.add_config("mutating", "b-second", hook("add-key.example.com", webhooks.client_config("/add-key")))
    cluster.add_config("mutating", "a-first", hook("add-label.example.com", webhooks.client_config("/add-label")))
    d = cluster.dispatcher()
    try:
        out = await d.mutate(attrs(), cm(x="1"), None)
    finally:
        await d.close()
    assert out["metadata"]["labels"] == {"mutated": "yes"} and out["data"] == {"x": "1", "added": "1"}
    assert webhooks.calls == ["add-label", "add-key"]


async def test_reinvocation_if_needed_runs_an_earlier_webhook_again(webhooks):
    cluster = Cluster()
    cluster.add_config("mutating", "a", hook("label-once.example.com", webhooks.client_config("/label-once"),
                                             reinvocationPolicy="IfNeeded"))
    cluster.add_config("mutating", "b", hook("add-key.example.com", webhooks.client_config("/add-key")))
    d = cluster.dispatcher()
    try:
        out = await d.mutate(attrs(), cm(), None)
    finally:
        await d.close()
    assert webhooks.calls == ["label-once", "add-key", "label-once"]
    assert out["metadata"]["labels"]["seen-key"] == "True"


async def test_namespace_and_object_selectors_decide_what_is_sent(webhooks):
    cluster = Cluster()
    cluster.add_config("mutating", "m", hook("add-label.example.com", webhooks.client_config("/add-label"),
                                             namespaceSelector={"matchLabels": {"env": "prod"}},
                                             objectSelector={"matchExpressions": [
                                                 {"key": "skip", "operator": "DoesNotExist"}]}))
    d = cluster.dispatcher()
    try:
        assert "mutated" not in (await d.mutate(attrs(ns="default"), cm(), None))["metadata"]["labels"]
        assert (await d.mutate(attrs(ns="prod"), cm(), None))["metadata"]["labels"] == {"mutated": "yes"}
        skipped = await d.mutate(attrs(ns="prod"), cm(labels={"skip": "1"}), None)
        assert "mutated" not in skipped["metadata"]["labels"]
    finally:
        await d.close()
    assert webhooks.calls == ["add-label"]


async def test_namespace_selector_on_a_namespace_uses_its_own_labels(webhooks):
    cluster = Cluster()
    rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}]
    cluster.add_config("validating", "v", hook("deny-big.example.com", webhooks.client_config("/deny-big"),
                                               rules=rules, namespaceSelector={"matchLabels": {"env": "prod"}}))
    d = cluster.dispatcher()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "new", "labels": {"env": "prod"}}}
    try:
        await d.validate(attrs(info=NAMESPACES, ns=""), ns, None)
        await d.validate(attrs(info=NAMESPACES, ns=""), {**ns, "metadata": {"name": "other"}}, None)
    finally:
        await d.close()
    assert webhooks.calls == ["deny-big"]


async def test_match_conditions_in_cel_skip_the_webhook(webhooks):
    cluster = Cluster()
    cluster.add_config("mutating", "m", hook(
        "add-label.example.com", webhooks.client_config("/add-label"),
        matchConditions=[{"name": "only-web", "expression": "object.metadata.name.startsWith('web')"}]))
    d = cluster.dispatcher()
    try:
        assert "mutated" not in (await d.mutate(attrs(), cm(), None))["metadata"]["labels"]
        web_cm = cm()
        web_cm["metadata"]["name"] = "web-1"
        assert (await d.mutate(attrs(), web_cm, None))["metadata"]["labels"] == {"mutated": "yes"}
    finally:
        await d.close()


async def test_a_down_webhook_refuses_with_fail_and_lets_through_with_ignore():
    dead = {"url": "https://127.0.0.1:9/none"}
    for policy, refused in (("Fail", True), ("Ignore", False)):
        cluster = Cluster()
        cluster.add_config("validating", "v", hook("down.example.com", dead, failurePolicy=policy))
        d = cluster.dispatcher()
        try:
            if refused:
                with pytest.raises(StatusError) as err:
                    await d.validate(attrs(), cm(), None)
                assert err.value.code == 500
                assert 'failed calling webhook "down.example.com": failed to call webhook' in err.value.message
            else:
                await d.validate(attrs(), cm(), None)
        finally:
            await d.close()


async def test_a_slow_webhook_fails_after_timeout_seconds(webhooks):
    cluster = Cluster()
    cluster.add_config("validating", "v", hook("slow.example.com", webhooks.client_config("/slow"), timeoutSeconds=1))
    d = cluster.dispatcher()
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(StatusError) as err:
            await d.validate(attrs(), cm(), None)
    finally:
        await d.close()
    assert err.value.code == 504 and "context deadline exceeded" in err.value.message
    assert loop.time() - started < 5


async def test_a_wrong_certificate_is_a_call_failure(webhooks, tmp_path):
    other = ensure_certs(tmp_path, ["127.0.0.1"])
    config = {**webhooks.client_config("/deny-big"), "caBundle": base64.b64encode(other.ca_cert.read_bytes()).decode()}
    cluster = Cluster()
    cluster.add_config("validating", "v", hook("pinned.example.com", config))
    d = cluster.dispatcher()
    try:
        with pytest.raises(StatusError) as err:
            await d.validate(attrs(), cm(), None)
    finally:
        await d.close()
    assert err.value.code == 500 and "certificate verify failed" in err.value.message


@pytest.fixture
async def garbage(tmp_path) -> AsyncIterator[tuple[str, str]]:
    """A TLS server answering each path with a different kind of garbage; yields (base URL, caBundle)."""
    paths = ensure_certs(tmp_path, ["127.0.0.1"])

    async def not_json(_):
        return web.Response(text="<html>oops</html>")

    async def wrong_uid(request):
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": "someone-else", "allowed": True}})

    async def bad_patch(request):
        uid = (await request.json())["request"]["uid"]
        patch = base64.b64encode(orjson.dumps([{"op": "remove", "path": "/nope"}])).decode()
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": patch}})

    async def status_500(_):
        return web.Response(status=500, text="boom")

    app = web.Application()
    for path, fn in (("/not-json", not_json), ("/wrong-uid", wrong_uid), ("/bad-patch", bad_patch),
                     ("/500", status_500)):
        app.router.add_post(path, fn)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(paths))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}", base64.b64encode(paths.ca_cert.read_bytes()).decode()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(("path", "kind", "words"), [
    ("/not-json", "validating", "invalid webhook response"), ("/wrong-uid", "validating", "expected response.uid"),
    ("/500", "validating", "status 500"), ("/bad-patch", "mutating", "invalid patch")])
async def test_garbage_answers_follow_the_failure_policy(garbage, path, kind, words):
    base, ca = garbage
    for policy in ("Fail", "Ignore"):
        cluster = Cluster()
        cluster.add_config(kind, "g", hook("garbage.example.com", {"url": base + path, "caBundle": ca},
                                           failurePolicy=policy))
        d = cluster.dispatcher()
        run = d.validate if kind == "validating" else d.mutate
        try:
            if policy == "Fail":
                with pytest.raises(StatusError) as err:
                    await run(attrs(), cm(), None)
                assert err.value.code == 500 and words in err.value.message
            else:
                await run(attrs(), cm(), None)
        finally:
            await d.close()


async def test_dry_run_is_refused_by_a_webhook_with_side_effects(webhooks):
    cluster = Cluster()
    cluster.add_config("validating", "v", hook("side.example.com", webhooks.client_config("/deny-big"),
                                               sideEffects="Some"))
    d = cluster.dispatcher()
    try:
        with pytest.raises(StatusError) as err:
            await d.validate(attrs(dry_run=True), cm(), None)
        assert err.value.code == 400 and "does not support dry run" in err.value.message
        await d.validate(attrs(), cm(), None)
    finally:
        await d.close()


async def test_service_reference_resolves_through_endpoints(webhooks):
    cluster = Cluster()
    cluster.named[("core/services", "default", "hooks")] = {"spec": {"ports": [{"name": "https", "port": 443}]}}
    cluster.named[("core/endpoints", "default", "hooks")] = {
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": webhooks.port}]}]}
    config = {"service": {"namespace": "default", "name": "hooks", "path": "/add-label"},
              "caBundle": webhooks.client_config("/")["caBundle"]}
    cluster.add_config("mutating", "m", hook("svc.example.com", config))
    d = cluster.dispatcher()
    try:
        out = await d.mutate(attrs(), cm(), None)
    finally:
        await d.close()
    assert out["metadata"]["labels"] == {"mutated": "yes"}
    ssl.create_default_context()  # the system trust store stays usable for bundle-less configs
