"""APIServices: one per served group version, kube's priorities, CRD groups followed, the user's left alone."""

from __future__ import annotations

from typing import Any

from test_server_lifecycle import CRD, crd_body

from kinformer.server.controllers.apiservices import BUILTIN_PRIORITIES
from testlib import call, wait_until

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"


async def _apiservices(http: Any) -> dict[str, dict[str, Any]]:
    code, lst = await call(http, "GET", APISERVICES)
    assert code == 200
    return {item["metadata"]["name"]: item for item in lst["items"]}


def _available(obj: dict[str, Any]) -> bool:
    return any(c["type"] == "Available" and c["status"] == "True" and c["reason"] == "Local"
               for c in (obj.get("status") or {}).get("conditions") or ())


async def _wait_for(http: Any, cond: Any, what: str) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}

    async def check() -> bool:
        seen.clear()
        seen.update(await _apiservices(http))
        return bool(cond(seen))

    await wait_until(check, what=what)
    return seen


async def test_every_served_builtin_group_version_has_a_local_apiservice_with_kubes_priorities(server, http):
    served = {(g, v) for g, versions in server.registry.group_versions().items() for v in versions}
    expected = {f"{v}.{g}": p for (g, v), p in BUILTIN_PRIORITIES.items() if (g, v) in served}
    assert {"v1.", "v1.apps", "v2.autoscaling", "v1.autoscaling", "v1.rbac.authorization.k8s.io"} <= expected.keys()
    items = await _wait_for(http, lambda s: expected.keys() <= s.keys() and all(_available(s[n]) for n in expected),
                            "the built-in APIServices to be registered and available")
    assert items.keys() == expected.keys()  # nothing else: apiregistration.k8s.io registers no APIService of its own
    core = items["v1."]
    assert core["spec"] == {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert items["v2.autoscaling"]["spec"] == {"group": "autoscaling", "version": "v2",
                                               "groupPriorityMinimum": 17500, "versionPriority": 30}
    [cond] = core["status"]["conditions"]
    assert cond["message"] == "Local APIServices are always available"


async def test_a_crd_group_version_is_registered_while_served_and_removed_with_its_crd(server, http):
    assert (await call(http, "POST", CRD, crd_body()))[0] == 201
    items = await _wait_for(http, lambda s: "v1.example.com" in s and _available(s["v1.example.com"]),
                            "the CRD's APIService")
    widget = items["v1.example.com"]
    assert widget["spec"] == {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1000,
                              "versionPriority": 100}
    assert widget["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    assert (await call(http, "DELETE", f"{CRD}/widgets.example.com"))[0] == 200
    await _wait_for(http, lambda s: "v1.example.com" not in s and "v1.apps" in s, "the CRD's APIService to go")


async def test_an_automanaged_apiservice_is_restored_and_a_users_one_is_left_alone(server, http):
    await _wait_for(http, lambda s: "v1.batch" in s, "v1.batch")
    assert (await call(http, "DELETE", f"{APISERVICES}/v1.batch"))[0] == 200
    code, obj = await call(http, "GET", f"{APISERVICES}/v1.apps")
    assert code == 200
    obj["spec"]["versionPriority"] = 1
    assert (await call(http, "PUT", f"{APISERVICES}/v1.apps", obj))[0] == 200
    mine = {"metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100,
                     "versionPriority": 100, "insecureSkipTLSVerify": True,
                     "service": {"namespace": "kube-system", "name": "metrics-server"}}}
    assert (await call(http, "POST", APISERVICES, mine))[0] == 201
    items = await _wait_for(http, lambda s: "v1.batch" in s and s["v1.apps"]["spec"]["versionPriority"] == 15,
                            "v1.batch re-created and v1.apps restored")
    assert _available(items["v1.batch"])
    theirs = items["v1beta1.metrics.k8s.io"]
    assert theirs["spec"]["service"] == {"namespace": "kube-system", "name": "metrics-server", "port": 443}
    assert not theirs.get("status", {}).get("conditions")  # no proxy here: never reported as available
