"""The pod subresources served without a kubelet: binding, eviction (with disruption budgets), ephemeral containers."""

from __future__ import annotations

from typing import Any

from testlib import call

PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


async def _pod(http: Any, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    code, pod = await call(http, "POST", PODS, body)
    assert code == 201, pod
    return pod


async def _running(http: Any, name: str, ready: bool = True) -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    code, out = await call(http, "PATCH", f"{PODS}/{name}/status", {"status": status},
                           ctype="application/merge-patch+json")
    assert code == 200, out


async def _budget(http: Any, name: str, allowed: int, *, processed: bool = True, current: int = 2,
                  desired: int = 2) -> None:
    code, pdb = await call(http, "POST", PDBS, {"metadata": {"name": name},
                                                "spec": {"minAvailable": 1,
                                                         "selector": {"matchLabels": {"app": "web"}}}})
    assert code == 201, pdb
    status = {"disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired,
              "expectedPods": 2, "observedGeneration": pdb["metadata"]["generation"] if processed else 0}
    code, out = await call(http, "PUT", f"{PDBS}/{name}/status", {**pdb, "status": status})
    assert code == 200, out


def _eviction(name: str, **delete_options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


async def test_binding_assigns_a_node_once_and_marks_the_pod_scheduled(http):
    await _pod(http, "p")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"by": "sched"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    code, out = await call(http, "POST", f"{PODS}/p/binding", binding)
    assert (code, out["status"], out["code"]) == (201, "Success", 201)
    code, pod = await call(http, "GET", f"{PODS}/p")
    assert pod["spec"]["nodeName"] == "node-1" and pod["metadata"]["annotations"] == {"by": "sched"}
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1 and scheduled[0]["status"] == "True" and scheduled[0]["lastTransitionTime"]
    code, err = await call(http, "POST", f"{PODS}/p/binding", {**binding, "target": {"name": "node-2"}})
    assert code == 409 and err["message"] == ('Operation cannot be fulfilled on pods "p": pod p is already '
                                              'assigned to node "node-1"')


async def test_binding_turns_an_unschedulable_condition_true_in_place(http):
    """The PodScheduled condition a scheduler left False (with its reason and message) turns True in place, the
    other conditions and fields kept in their order."""
    await _pod(http, "p")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes",
                     "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ready = {"type": "Ready", "status": "False"}
    code, out = await call(http, "PATCH", f"{PODS}/p/status", {"status": {"conditions": [ready, unschedulable]}},
                           ctype="application/merge-patch+json")
    assert code == 200, out
    code, _ = await call(http, "POST", f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {"name": "n1"}})
    assert code == 201
    code, pod = await call(http, "GET", f"{PODS}/p")
    conditions = pod["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Ready", "PodScheduled"] and conditions[0] == ready
    assert conditions[1]["status"] == "True" and "reason" not in conditions[1] and "message" not in conditions[1]
    assert conditions[1]["lastTransitionTime"] != "2026-01-01T00:00:00Z"
    assert list(pod["spec"])[-1] == "nodeName" and pod["spec"]["nodeName"] == "n1"


async def test_binding_refuses_a_mismatched_name_and_a_missing_target(http):
    await _pod(http, "p")
    code, err = await call(http, "POST", f"{PODS}/p/binding", {"metadata": {"name": "q"}, "target": {"name": "n"}})
    assert code == 400 and err["message"] == "name in URL does not match name in Binding object"
    code, err = await call(http, "POST", f"{PODS}/p/binding", {"metadata": {"name": "p"}, "target": {}})
    assert code == 422 and err["details"]["causes"][0]["field"] == "target.name"
    code, err = await call(http, "GET", f"{PODS}/p/binding")
    assert code == 405
    code, err = await call(http, "POST", f"{PODS}/nope/binding", {"metadata": {"name": "nope"},
                                                                   "target": {"name": "n"}})
    assert code == 404


async def test_a_pending_pod_is_evicted_without_asking_its_budget(http):
    await _pod(http, "p")
    await _budget(http, "web", allowed=0)
    code, out = await call(http, "POST", f"{PODS}/p/eviction", _eviction("p"))
    assert (code, out["status"]) == (201, "Success")
    assert (await call(http, "GET", f"{PODS}/p"))[0] == 404


async def test_a_running_pod_is_evicted_only_while_its_budget_allows_a_disruption(http):
    for name in ("a", "b"):
        await _pod(http, name)
        await _running(http, name)
    await _budget(http, "web", allowed=1)
    code, out = await call(http, "POST", f"{PODS}/a/eviction", _eviction("a"))
    assert code == 201, out
    assert (await call(http, "GET", f"{PODS}/a"))[0] == 404
    code, pdb = await call(http, "GET", f"{PDBS}/web")
    assert pdb["status"]["disruptionsAllowed"] == 0 and list(pdb["status"]["disruptedPods"]) == ["a"]
    condition = next(c for c in pdb["status"]["conditions"] if c["type"] == "DisruptionAllowed")
    assert (condition["status"], condition["reason"]) == ("False", "InsufficientPods")
    code, err = await call(http, "POST", f"{PODS}/b/eviction", _eviction("b"))
    assert code == 429 and err["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert err["details"]["causes"] == [{"reason": "DisruptionBudget",
                                         "message": "The disruption budget web needs 2 healthy pods and has 2 "
                                                    "currently"}]
    assert (await call(http, "GET", f"{PODS}/b"))[0] == 200


async def test_a_budget_not_yet_processed_refuses_with_a_retry_hint(http):
    await _pod(http, "a")
    await _running(http, "a")
    await _budget(http, "web", allowed=1, processed=False)
    code, err = await call(http, "POST", f"{PODS}/a/eviction", _eviction("a"))
    assert code == 429 and err["details"]["retryAfterSeconds"] == 10
    assert err["details"]["causes"][0]["message"] == "The disruption budget web is still being processed by the server."


async def test_an_unready_pod_of_a_healthy_budget_is_evicted_without_taking_a_disruption(http):
    await _pod(http, "a")
    await _running(http, "a", ready=False)
    await _budget(http, "web", allowed=0, current=2, desired=2)
    code, out = await call(http, "POST", f"{PODS}/a/eviction", _eviction("a"))
    assert code == 201, out
    code, pdb = await call(http, "GET", f"{PDBS}/web")
    assert pdb["status"]["disruptionsAllowed"] == 0 and "disruptedPods" not in pdb["status"]


async def test_two_budgets_on_one_pod_are_refused_as_kube_does(http):
    await _pod(http, "a")
    await _running(http, "a")
    await _budget(http, "one", allowed=1)
    await _budget(http, "two", allowed=1)
    code, err = await call(http, "POST", f"{PODS}/a/eviction", _eviction("a"))
    assert code == 500 and "more than one PodDisruptionBudget" in err["message"]
    assert (await call(http, "GET", f"{PODS}/a"))[0] == 200


async def test_eviction_dry_run_and_name_rules(http):
    await _pod(http, "a")
    await _running(http, "a")
    await _budget(http, "web", allowed=1)
    code, _ = await call(http, "POST", f"{PODS}/a/eviction", _eviction("a", dryRun=["All"]))
    assert code == 201
    assert (await call(http, "GET", f"{PODS}/a"))[0] == 200
    code, pdb = await call(http, "GET", f"{PDBS}/web")
    assert pdb["status"]["disruptionsAllowed"] == 1
    code, err = await call(http, "POST", f"{PODS}/a/eviction", _eviction("b"))
    assert code == 400 and err["message"] == "name in URL does not match name in Eviction object"
    code, err = await call(http, "POST", f"{PODS}/zz/eviction", _eviction("zz"))
    assert code == 404 and err["details"]["name"] == "zz"


async def test_ephemeral_containers_are_added_through_their_subresource_and_never_changed(http):
    pod = await _pod(http, "p")
    debugger = {"name": "debugger", "image": "busybox", "stdin": True, "tty": True}
    pod["spec"]["ephemeralContainers"] = [debugger]
    pod["spec"]["containers"][0]["image"] = "changed"  # ignored: only the ephemeral containers are taken
    code, out = await call(http, "PUT", f"{PODS}/p/ephemeralcontainers", pod)
    assert code == 200, out
    assert out["spec"]["containers"][0]["image"] == "nginx"
    added = out["spec"]["ephemeralContainers"]
    assert [c["name"] for c in added] == ["debugger"] and added[0]["terminationMessagePolicy"] == "File"
    code, got = await call(http, "GET", f"{PODS}/p/ephemeralcontainers")
    assert code == 200 and got["kind"] == "Pod" and got["spec"]["ephemeralContainers"] == added
    code, err = await call(http, "PATCH", f"{PODS}/p/ephemeralcontainers",
                           {"spec": {"ephemeralContainers": [{**added[0], "image": "other"}]}},
                           ctype="application/strategic-merge-patch+json")
    assert code == 422 and "may not be changed" in err["details"]["causes"][0]["message"]
    code, err = await call(http, "PATCH", f"{PODS}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": None}},
                           ctype="application/merge-patch+json")
    assert code == 422 and "may not be removed" in err["details"]["causes"][0]["message"]


async def test_a_status_write_may_not_restart_a_container_the_pod_would_not_restart(http):
    body = {"metadata": {"name": "once"}, "spec": {"restartPolicy": "Never",
                                                     "containers": [{"name": "c", "image": "busybox"}]}}
    assert (await call(http, "POST", PODS, body))[0] == 201
    done = {"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    code, out = await call(http, "PATCH", f"{PODS}/once/status", {"status": {"phase": "Succeeded",
                                                                              "containerStatuses": [done]}},
                           ctype="application/merge-patch+json")
    assert code == 200, out
    again = {**done, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
    code, out = await call(http, "PATCH", f"{PODS}/once/status", {"status": {"containerStatuses": [again]}},
                           ctype="application/merge-patch+json")
    assert code == 422 and out["reason"] == "Invalid", out
    assert out["message"] == ('Pod "once" is invalid: status.containerStatuses[0].state: Forbidden: may not be '
                              "transitioned to non-terminated state")
    code, pod = await call(http, "GET", f"{PODS}/once")
    assert pod["status"]["containerStatuses"][0]["state"] == done["state"]  # nothing written
