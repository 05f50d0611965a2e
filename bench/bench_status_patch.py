"""The server's cost of the writes a moving cluster makes per pod: a create, a ``pods/status`` patch, an event.

    python3 bench/bench_status_patch.py [--pods 1000] [--rounds 3] [--profile FILE] [--phase status-strategic]

One in-process ``APIServer(storage="memory")`` per round, its collector left as the host's (an embedded server
never tunes it), one minimal blocking HTTP/1.1 client in a thread (one keep-alive socket, one request at a time;
it costs a few µs per request). Each round, in order, on the same server:

* ``create``: ``--pods`` realistic pods (``bench/pod-realistic.json`` without its status, its managedFields and
  its owner) created;
* ``status-strategic``: each pod's ``pods/status`` patched as the simulated kubelet patches it (a strategic merge
  patch of the whole status with the pod's uid; conditions carrying ``reason: null`` and ``message: null``),
  twice: Running and not ready, then ready;
* ``status-small``: each pod's Ready condition turned False, then True, as the kubelet patches a readiness change
  (a strategic merge patch of the changed condition only, with the pod's uid);
* ``status-merge``: each pod's status patched once more with a JSON merge patch of one condition list and the
  container statuses (as a controller's status write);
* ``event``: one ``events.k8s.io/v1`` Event per pod (the scheduler's ``Scheduled``) and one core/v1 Event (the
  ReplicaSet controller's ``SuccessfulCreate``).

It prints each phase's microseconds of process CPU per request (the server and the client thread together: the
client's share is the same for every phase) and its ratio to a create, medians over the rounds. To compare two
trees, run it alternately with each tree's ``src`` first on ``PYTHONPATH``. ``--profile FILE`` writes a cProfile of
one more round's ``--phase`` (pstats format). Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import json
import socket
import statistics
import time
from typing import Any

from bench_server import _read_response
from benchlib import FIXTURE, parse_args

PODS = "/api/v1/namespaces/default/pods"
PHASES = ("create", "status-strategic", "status-small", "status-merge", "event")
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
Request = tuple[str, str, str, bytes]  # method, path, content type, body


def _fixture() -> dict[str, Any]:
    pod = json.loads(FIXTURE.read_text())
    meta = pod["metadata"]
    for field in ("resourceVersion", "uid", "creationTimestamp", "ownerReferences", "generateName",
                  "managedFields"):
        meta.pop(field, None)
    meta["namespace"] = "default"
    pod["spec"]["serviceAccountName"] = pod["spec"]["serviceAccount"] = "default"
    pod["spec"].pop("nodeName", None)
    pod.pop("status", None)
    return pod


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def creates(n: int) -> list[Request]:
    pod = _fixture()
    out = []
    for i in range(n):
        p = copy.deepcopy(pod)
        p["metadata"]["name"] = f"p-{i}"
        out.append(("POST", PODS, "application/json", _dumps(p)))
    return out


def _status(ready: bool, names: list[str]) -> dict[str, Any]:
    """A kubelet's pod status: Running, its containers running and ``ready`` (or not)."""
    flag = "True" if ready else "False"
    reason = None if ready else "ContainersNotReady"
    conditions = [{"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:01Z",
                   "reason": r, "message": None}
                  for t, s, r in (("PodReadyToStartContainers", "True", None), ("Initialized", "True", None),
                                  ("Ready", flag, reason), ("ContainersReady", flag, reason),
                                  ("PodScheduled", "True", None))]
    statuses = [{"name": name, "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}, "lastState": {},
                 "ready": ready, "restartCount": 0, "image": "quay.io/acme/app:v1",
                 "imageID": f"quay.io/acme/app@sha256:{'a' * 64}", "containerID": f"containerd://{'b' * 64}",
                 "started": True} for name in names]
    return {"phase": "Running", "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.244.0.9",
            "podIPs": [{"ip": "10.244.0.9"}], "startTime": "2026-01-01T00:00:00Z", "conditions": conditions,
            "containerStatuses": statuses}


def status_patches(uids: dict[str, str], names: list[str]) -> list[Request]:
    out = []
    for ready in (False, True):
        status = _status(ready, names)
        for pod, uid in uids.items():
            body = _dumps({"metadata": {"uid": uid}, "status": status})
            out.append(("PATCH", f"{PODS}/{pod}/status", STRATEGIC, body))
    return out


def small_patches(uids: dict[str, str]) -> list[Request]:
    out = []
    for flag in ("False", "True"):
        for pod, uid in uids.items():
            body = _dumps({"metadata": {"uid": uid}, "status": {"conditions": [
                {"type": "Ready", "status": flag, "lastTransitionTime": "2026-01-01T00:00:02Z"}]}})
            out.append(("PATCH", f"{PODS}/{pod}/status", STRATEGIC, body))
    return out


def merge_patches(uids: dict[str, str], names: list[str]) -> list[Request]:
    status = _status(False, names)
    body = _dumps({"status": {"conditions": status["conditions"], "containerStatuses": status["containerStatuses"]}})
    return [("PATCH", f"{PODS}/{pod}/status", MERGE, body) for pod in uids]


def events(uids: dict[str, str]) -> list[Request]:
    out = []
    for i, (pod, uid) in enumerate(uids.items()):
        regarding = {"kind": "Pod", "namespace": "default", "name": pod, "uid": uid, "apiVersion": "v1"}
        out.append(("POST", "/apis/events.k8s.io/v1/namespaces/default/events", "application/json", _dumps({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": f"{pod}.s{i}"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-bench", "action": "Binding", "reason": "Scheduled",
            "regarding": regarding, "note": f"Successfully assigned default/{pod} to node-1", "type": "Normal"})))
        out.append(("POST", "/api/v1/namespaces/default/events", "application/json", _dumps({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{pod}.c{i}"}, "involvedObject": regarding,
            "reason": "SuccessfulCreate", "message": f"Created pod: {pod}", "type": "Normal", "count": 1,
            "source": {"component": "replicaset-controller"}, "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z"})))
    return out


def send(url: str, requests: list[Request]) -> list[bytes]:
    """Send ``requests`` one at a time on one keep-alive socket; the response bodies (a POST answered other than
    201 or another request other than 200 raises)."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    bodies = []
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for method, path, ctype, body in requests:
            sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            bodies.append(_read_response(sock, f"{method} {path}", b"201" if method == "POST" else b"200"))
    return bodies


async def _uids(url: str) -> dict[str, str]:
    """Each pod's uid, by name (one list)."""
    listed = json.loads((await asyncio.to_thread(send, url, [("GET", PODS, "application/json", b"")]))[0])
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in listed["items"]}


async def _timed(url: str, requests: list[Request], profile: str | None) -> float:
    """Microseconds of process CPU per request of ``requests`` (a cProfile of them written to ``profile``)."""
    prof = cProfile.Profile()
    if profile:
        prof.enable()
    cpu = time.process_time()
    await asyncio.to_thread(send, url, requests)
    spent = time.process_time() - cpu
    if profile:
        prof.disable()
        prof.dump_stats(profile)
    return spent / len(requests) * 1e6


async def one_round(n: int, profile: str | None = None, phase: str = "") -> dict[str, float]:
    """Microseconds of process CPU per request of each phase, on a fresh server."""
    from kinformer.server import APIServer

    names = [c["name"] for c in _fixture()["spec"]["containers"]]
    async with APIServer("memory", compaction_interval=0) as server:
        url = server.url
        await asyncio.to_thread(send, url, creates(20))  # warm up (and the default ServiceAccount exists)
        await asyncio.to_thread(send, url, [("DELETE", f"{PODS}/p-{i}", "application/json", b"")
                                            for i in range(20)])
        out = {"create": await _timed(url, creates(n), profile if phase == "create" else None)}
        uids = await _uids(url)
        for name, requests in (("status-strategic", status_patches(uids, names)),
                               ("status-small", small_patches(uids)),
                               ("status-merge", merge_patches(uids, names)), ("event", events(uids))):
            out[name] = await _timed(url, requests, profile if phase == name else None)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", metavar="FILE", help="write a cProfile of one more round's --phase to FILE")
    p.add_argument("--phase", choices=PHASES, default="status-strategic")
    args = parse_args(p, pods=50, rounds=1)
    rounds = [asyncio.run(one_round(args.pods)) for _ in range(args.rounds)]
    base = statistics.median(r["create"] for r in rounds)
    print(f"{args.pods} pods, {args.rounds} rounds; µs of process CPU per request (median), and over a create")
    for name in PHASES:
        value = statistics.median(r[name] for r in rounds)
        print(f"  {name:17s} {value:8.0f} µs  {value / base:5.2f}x")
    if args.profile:
        asyncio.run(one_round(args.pods, args.profile, args.phase))
        print(f"cProfile of {args.phase} written to {args.profile}")


if __name__ == "__main__":
    main()
