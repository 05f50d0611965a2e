"""Helpers of the job, cronjob and ttl-after-finished tests: a server running only those controllers on a
fake clock, a bounded wait, and the kubelet's part played by hand (pods patched to Running, Succeeded or
Failed with containerStatuses), as kube's controller unit tests use fake pods."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from cluster_helpers import running_status, wait_for
from kinformer.client import Client
from kinformer.clock import Clock, FakeClock
from kinformer.cluster import ClusterOptions
from kinformer.cluster.controllers.batch import format_time
from kinformer.controller import Controller
from kinformer.server import APIServer

T = TypeVar("T")
NS = "default"
WAIT = 20.0  # real seconds a condition may take on a loaded 2-core machine


@asynccontextmanager
async def batch_cluster(*controllers: str, clock: FakeClock | None = None,
                        options: ClusterOptions | None = None) -> AsyncIterator[tuple[APIServer, Client, FakeClock]]:
    """A server running ``controllers`` on a fake clock, and a client of it."""
    clock = clock or FakeClock(wall_start=1_800_000_000.0)
    async with APIServer(compaction_interval=0, clock=clock, controllers=list(controllers),
                         cluster_options=options) as server:
        client = Client(server.url)
        try:
            yield server, client, clock
        finally:
            await client.close()


def job_body(name: str, **spec: Any) -> dict[str, Any]:
    template = spec.pop("template", None) or {
        "spec": {"restartPolicy": spec.pop("restart_policy", "Never"),
                 "containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


async def job_pods(client: Client, job: str, *, active_only: bool = False) -> list[Any]:
    pods = (await client.list("pods", NS, label_selector=f"batch.kubernetes.io/job-name={job}")).items
    if active_only:
        pods = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not p["metadata"].get("deletionTimestamp")]
    return sorted(pods, key=lambda p: p["metadata"]["name"])


async def wait_pods(client: Client, job: str, count: int) -> list[Any]:
    """Wait until ``job`` has exactly ``count`` active pods; them."""
    async def probe() -> list[Any] | None:
        pods = await job_pods(client, job, active_only=True)
        return pods if len(pods) == count else None

    return await wait_for(probe, what=f"{count} active pods of job {job}") if count else []


async def wait_job(client: Client, name: str, check: Callable[[Mapping[str, Any]], bool], what: str) -> Any:
    async def probe() -> Any:
        job = await client.get("jobs", name, NS)
        return job if check(job) else None

    return await wait_for(probe, what=f"job {name}: {what}")


def has_condition(type_: str, status: str = "True") -> Callable[[Mapping[str, Any]], bool]:
    def check(obj: Mapping[str, Any]) -> bool:
        return any(c.get("type") == type_ and c.get("status") == status
                   for c in (obj.get("status") or {}).get("conditions") or ())
    return check


async def run_pod(client: Client, pod: Mapping[str, Any], clock: Clock, *, ready: bool = True) -> Any:
    """The kubelet's part: the pod runs (and is Ready)."""
    status = running_status(pod, ready=ready, since=format_time(clock.wall()))
    return await client.patch_status("pods", pod["metadata"]["name"], {"status": status}, namespace=NS)


async def finish_pod(client: Client, pod: Mapping[str, Any], clock: Clock, exit_code: int = 0, *,
                     conditions: list[dict[str, Any]] | None = None) -> Any:
    """The kubelet's part: every container terminated with ``exit_code``; the pod Succeeded or Failed."""
    stamp = format_time(clock.wall())
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                  "startedAt": stamp, "finishedAt": stamp}
    status = {"phase": "Succeeded" if exit_code == 0 else "Failed",
              "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp}, *(conditions or [])],
              "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                                     "restartCount": 0, "state": {"terminated": terminated}}
                                    for c in pod["spec"]["containers"]]}
    return await client.patch_status("pods", pod["metadata"]["name"], {"status": status}, namespace=NS)


async def events_of(client: Client, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, note) of the events.k8s.io Events about object ``name``."""
    events = (await client.list("events.events.k8s.io", NS)).items
    return [(str(e.get("type")), str(e.get("reason")), str(e.get("note", ""))) for e in events
            if (e.get("regarding") or {}).get("name") == name]


async def wait_event(client: Client, name: str, reason: str) -> list[tuple[str, str, str]]:
    async def probe() -> list[tuple[str, str, str]] | None:
        found = [e for e in await events_of(client, name) if e[1] == reason]
        return found or None

    return await wait_for(probe, what=f"a {reason} event about {name}")


async def settle(server: APIServer, controller: str) -> None:
    """Wait until ``controller`` is idle with a requeue pending on the clock: stepping the fake clock right
    after this (with no await between) moves time past a deadline the controller has already registered,
    never under a reconcile that is still computing one."""
    async def idle() -> bool:
        ctrl = controller_named(server, controller)
        return ctrl is not None and ctrl.queue.waiting_count >= 1 and len(ctrl.queue) == 0 and ctrl.stats.active == 0

    await wait_for(idle, what=f"the {controller} controller idle with a requeue pending")


def controller_named(server: APIServer, name: str) -> Controller | None:
    """The cluster's running controller ``name`` (None until the Manager has built it)."""
    assert server.cluster is not None
    return next((c for c in server.cluster.manager.controllers if c.name == name), None)
