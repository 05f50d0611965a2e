"""The moving cluster's cost: a Deployment of N replicas rolled out vs N pods created directly, in one run.

    python3 bench/bench_deployment.py [--replicas 300] [--nodes 3] [--rounds 3] [--concurrency 16]

Each round runs three measurements, each on a fresh in-process ``APIServer(storage="memory")`` (the server, what
runs beside it and this load generator share one event loop, as a test using the ``kube_cluster`` fixture does):

* ``deployment``: on ``APIServer(controllers=True, nodes=...)``, create a Deployment of ``--replicas`` replicas;
  seconds until its status says Available with that many available replicas (the deployment and replicaset
  controllers create the ReplicaSet and the pods, the scheduler binds them, the kubelets run them);
* ``pods``: on the same kind of server, create ``--replicas`` pods from the same template directly
  (``--concurrency`` creates in flight); seconds until all are Running and Ready (the scheduler binds them
  and the kubelets run them, as in the other measurement);
* ``creates``: on a bare server (nothing runs beside it), the same creates; seconds until every one returned:
  what "creating the pods directly" costs by itself.

The first two watch what they wait for (one watch opened before the first create). Each measurement runs in
its own event loop and must leave no task behind (checked), and each timed section starts after a full
collection (``gc.collect()``): a rollout leaves ~50,000 objects of cyclic garbage (its server, informers and
caches), and whether the collector's full pass over them fell inside the next timed section made the 300 bare
creates cost ~0.1 s or ~0.3 s of CPU from round to round. Rounds rotate the order of
the measurements; figures are medians over the rounds and ratios are computed within a round, then their
median taken. The first line printed is the ratio the issue sets a target for, the Deployment over the bare
creates (<= 6x: each pod costs at least a create, a binding and a status write or two, so ~4x is the floor);
the next is the Deployment over the pods created directly and run (what the controllers add); the third
divides the fastest Deployment by the fastest bare creates of the run: on a shared machine the short bare
creates are the figure other processes disturb most, and this ratio moves least with them. The process's CPU
seconds are measured beside the wall seconds (the measurements are CPU-bound: one process, one event loop)
and their ratio printed too: the figure a loaded machine moves least. Not a pass/fail test.
``--profile FILE`` writes a cProfile of one more Deployment rollout (pstats format). ``--census`` runs one more
rollout and counts what it cost: wall and CPU seconds (and how long the loop waited in ``select``), the requests
the server answered by verb and resource (with the events the recorders write once the Deployment is Available; the
metric has no group label: ``events`` counts both events APIs), the watch events each cluster informer received,
each controller's reconciles, the cyclic collector's collections by generation and the objects it tracks before and
after (``gc.get_objects()`` after a full collection); then, with the collector off, the cyclic garbage (objects
only the collector can free, by type) of one more rollout (the first one's first-use work, such as compiling
decoders, done) and what its server's teardown left. ``--rollouts N`` runs N Deployment
rollouts one after another and nothing else, for instruction counts: under ``valgrind --tool=callgrind``, a run
of ``--rollouts 2`` minus a run of ``--rollouts 1`` is one warm rollout (its server's start and stop included);
these clusters' nodes renew their leases and post their status, and the node monitor and pod GC run, every 10
minutes instead of every second or two (``QUIET_NODES``), so that the count does not grow with the minutes a
rollout takes under valgrind. ``--creates N`` likewise runs N measurements of the bare creates and nothing else:
a run with ``--replicas 300`` minus one with ``--replicas 0`` (the same servers started, settled and stopped)
is N times the creates themselves; with ``--rollouts`` at ``--replicas 300`` and ``--replicas 1`` the same way,
the two compare in instructions, which no other process on the machine moves.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import gc
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from benchlib import parse_args

T = TypeVar("T")

NAMESPACE = "default"
LABELS = {"app": "web"}
TEMPLATE: dict[str, Any] = {"metadata": {"labels": LABELS},
                            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}


#: Timers that run every second or two of real time (node leases and status, the node monitor, pod GC) made
#: rare: under valgrind a rollout takes minutes, and they would add work that grows with the wall time.
QUIET_NODES: dict[str, Any] = {"node_lease_duration_seconds": 3600, "node_lease_renew_interval": 600.0,
                                 "node_status_update_frequency": 600.0, "node_monitor_period": 600.0,
                                 "node_monitor_grace_period": 3600.0, "node_startup_grace_period": 3600.0,
                                 "pod_gc_period": 600.0}


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": LABELS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": LABELS}, "template": copy.deepcopy(TEMPLATE)}}


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-{i:05d}", **copy.deepcopy(TEMPLATE["metadata"])},
            "spec": copy.deepcopy(TEMPLATE["spec"])}


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def available(replicas: int) -> Callable[[Mapping[str, Any]], bool]:
    """A Deployment whose Available condition is True with ``replicas`` available replicas."""
    return lambda d: _condition(d, "Available") and (d.get("status") or {}).get("availableReplicas") == replicas


def running_and_ready(p: Mapping[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and _condition(p, "Ready")


class Watcher:
    """One watch of ``resource`` (label ``app=web``) opened before the measured writes: tracks which objects
    satisfy ``accepts`` and sets :attr:`done` once ``count`` of them do."""

    def __init__(self, client: Any, resource: str, accepts: Callable[[Mapping[str, Any]], bool], count: int) -> None:
        self.client, self.resource, self.accepts, self.count = client, resource, accepts, count
        self.accepted: set[str] = set()
        self.done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self.client.list(self.resource, NAMESPACE, label_selector="app=web")
        self._task = asyncio.create_task(self._follow(listed.resource_version))

    async def _follow(self, resource_version: str) -> None:
        async for event in self.client.watch(self.resource, NAMESPACE, resource_version=resource_version,
                                             label_selector="app=web"):
            if event.type == "ERROR":
                raise RuntimeError(f"watch of {self.resource} failed: {event.object}")
            name = event.object["metadata"]["name"]
            if event.type != "DELETED" and self.accepts(event.object):
                self.accepted.add(name)
            else:
                self.accepted.discard(name)
            if len(self.accepted) >= self.count:
                self.done.set()
                return

    async def wait(self, timeout: float) -> None:
        assert self._task is not None
        finished = asyncio.ensure_future(self.done.wait())
        try:
            await asyncio.wait_for(asyncio.wait({finished, self._task}, return_when=asyncio.FIRST_COMPLETED),
                                   timeout)
        finally:
            finished.cancel()
        if not self.done.is_set():
            if self._task.done():
                self._task.result()  # raises what ended the watch
            raise TimeoutError(f"{len(self.accepted)}/{self.count} {self.resource} ready after {timeout:g} s")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _server(nodes: int, quiet: bool = False) -> Any:
    """A moving cluster with ``nodes`` simulated nodes, or a bare server for ``nodes=0``; ``quiet``: with the
    nodes' heartbeats and the monitors' periods far longer than a rollout (see ``--rollouts``)."""
    from kinformer.cluster import ClusterOptions
    from kinformer.server import APIServer

    return APIServer(storage="memory", controllers=nodes > 0, nodes=nodes,
                     cluster_options=ClusterOptions(**QUIET_NODES) if quiet else None)


async def _settled(client: Any) -> None:
    """Wait until the namespace's default ServiceAccount exists (pods are admitted only then), so no measurement
    counts the server's own start-up."""
    import kinformer as ki

    await ki.wait_for(client, "serviceaccounts", "default", lambda sa: sa is not None, namespace=NAMESPACE,
                      timeout=30)


def _quiesce() -> None:
    """Start a timed section from a quiet collector: collect what earlier measurements and the server's start
    left (fair to every measurement: each pays it before its clock starts, none during)."""
    gc.collect()


def run_alone(step: Callable[[], Awaitable[T]]) -> T:
    """Run one measurement in a fresh event loop; a RuntimeError if it left a task running (work that would go
    on into the next measurement's time)."""
    async def alone() -> T:
        result = await step()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if left:
            raise RuntimeError(f"the measurement left {len(left)} task(s) running: {left[:3]}")
        return result

    return asyncio.run(alone())


async def _create_pods(client: Any, replicas: int, concurrency: int) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def create(i: int) -> None:
        async with slots:
            await client.create("pods", pod(i), namespace=NAMESPACE)

    await asyncio.gather(*(create(i) for i in range(replicas)))


async def measure_deployment(replicas: int, nodes: int, timeout: float, quiet: bool = False) -> dict[str, float]:
    """Seconds from the Deployment's create until it is Available with ``replicas`` available."""
    import kinformer as ki

    async with _server(nodes, quiet) as server, ki.Client(server.url) as client:
        await _settled(client)
        watcher = Watcher(client, "deployments", available(replicas), 1)
        await watcher.start()
        try:
            _quiesce()
            t0, c0 = time.perf_counter(), time.process_time()
            await client.create("deployments", deployment(replicas), namespace=NAMESPACE)
            await watcher.wait(timeout)
            return {"deployment available s": time.perf_counter() - t0,
                    "deployment available cpu s": time.process_time() - c0}
        finally:
            await watcher.close()


async def measure_pods(replicas: int, nodes: int, concurrency: int, timeout: float) -> dict[str, float]:
    """Seconds until ``replicas`` pods created directly all ran and were ready."""
    import kinformer as ki

    async with _server(nodes) as server, ki.Client(server.url) as client:
        await _settled(client)
        watcher = Watcher(client, "pods", running_and_ready, replicas)
        await watcher.start()
        try:
            _quiesce()
            t0 = time.perf_counter()
            await _create_pods(client, replicas, concurrency)
            await watcher.wait(timeout)
            return {"pods ready s": time.perf_counter() - t0}
        finally:
            await watcher.close()


async def measure_creates(replicas: int, concurrency: int) -> dict[str, float]:
    """Seconds to create ``replicas`` pods on a bare server (no controller, scheduler or kubelet)."""
    import kinformer as ki

    async with _server(0) as server, ki.Client(server.url) as client:
        await _settled(client)
        _quiesce()
        t0, c0 = time.perf_counter(), time.process_time()
        await _create_pods(client, replicas, concurrency)
        return {"pods created s": time.perf_counter() - t0, "pods created cpu s": time.process_time() - c0}


def run_round(args: argparse.Namespace, index: int) -> dict[str, float]:
    """One round: the three measurements, in an order rotated by ``index``."""
    steps = [lambda: measure_deployment(args.replicas, args.nodes, args.timeout),
             lambda: measure_pods(args.replicas, args.nodes, args.concurrency, args.timeout),
             lambda: measure_creates(args.replicas, args.concurrency)]
    out: dict[str, float] = {}
    for step in steps[index % 3:] + steps[:index % 3]:
        out.update(run_alone(step))
    out["ratio vs pods created"] = out["deployment available s"] / out["pods created s"]
    out["ratio vs pods ready"] = out["deployment available s"] / out["pods ready s"]
    out["cpu ratio vs pods created"] = out["deployment available cpu s"] / out["pods created cpu s"]
    return out


def profile(args: argparse.Namespace) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run_alone(lambda: measure_deployment(args.replicas, args.nodes, args.timeout))
    profiler.disable()
    profiler.dump_stats(args.profile)
    print(f"profile of one Deployment rollout written to {args.profile}")


_REQUEST_TOTAL = re.compile(r'^apiserver_request_total\{(.*)\} (\S+)$', re.M)


async def _requests(client: Any) -> Counter[tuple[str, str]]:
    """The server's request counts so far, by (verb, resource), from its ``apiserver_request_total``."""
    text = (await client.request_bytes("GET", "/metrics")).decode()
    counts: Counter[tuple[str, str]] = Counter()
    for labels, value in _REQUEST_TOTAL.findall(text):
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        counts[(label.get("verb", ""), label.get("resource", ""))] += int(float(value))
    return counts


@contextmanager
def _collections() -> Iterator[Counter[str]]:
    """Count the cyclic collector's collections (by generation) and their seconds while the block runs."""
    out: Counter[str] = Counter()
    started: dict[int, float] = {}

    def callback(phase: str, info: dict[str, int]) -> None:
        generation = info["generation"]
        if phase == "start":
            started[generation] = time.perf_counter()
        else:
            out[f"gen{generation}"] += 1
            out[f"gen{generation} ms"] += round(1000 * (time.perf_counter() - started.pop(generation)))

    gc.callbacks.append(callback)
    try:
        yield out
    finally:
        gc.callbacks.remove(callback)


@contextmanager
def _select_seconds() -> Iterator[list[float]]:
    """Seconds the running loop's selector waited (idle) while the block runs."""
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    select, waited = selector.select, [0.0]

    def timed(timeout: float | None = None) -> Any:
        start = time.perf_counter()
        try:
            return select(timeout)
        finally:
            waited[0] += time.perf_counter() - start

    selector.select = timed
    try:
        yield waited
    finally:
        selector.select = select


async def census(replicas: int, nodes: int, timeout: float) -> None:
    """One rollout, counted (see ``--census``)."""
    import kinformer as ki

    async with _server(nodes) as server, ki.Client(server.url) as client:
        await _settled(client)
        manager = server.cluster.manager
        informers = manager.factory.informers
        before = await _requests(client), {n: inf.stats.deltas for n, inf in informers.items()}, \
            {c.name: c.stats.reconciles for c in manager.controllers}, _deliveries(informers)
        watcher = Watcher(client, "deployments", available(replicas), 1)
        await watcher.start()
        try:
            _quiesce()
            tracked = [len(gc.get_objects())]
            with _collections() as collected, _select_seconds() as idle:
                t0, c0 = time.perf_counter(), time.process_time()
                await client.create("deployments", deployment(replicas), namespace=NAMESPACE)
                await watcher.wait(timeout)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            # the recorders write their events after Available too: count those writes, untimed
            await asyncio.gather(*(r.flush(timeout) for r in manager.event_recorders))
            gc.collect()
            tracked.append(len(gc.get_objects()))
        finally:
            await watcher.close()
        requests = await _requests(client) - before[0]
    writes = sum(n for (verb, _), n in requests.items() if verb in ("POST", "PUT", "PATCH", "DELETE"))
    print(f"census of one rollout: {wall:.2f} s wall, {cpu:.2f} s CPU, the loop idle in select {idle[0]:.2f} s; "
          f"{writes} writes ({writes / replicas:.2f} a pod)")
    print("  requests: " + ", ".join(f"{verb} {resource} {n}" for (verb, resource), n in requests.most_common()))
    deltas = {n: inf.stats.deltas - before[1].get(n, 0) for n, inf in informers.items()}
    print("  informer deltas: " + ", ".join(f"{n} {d}" for n, d in sorted(deltas.items(), key=lambda x: -x[1]) if d))
    delivered = {n: d - before[3].get(n, 0) for n, d in _deliveries(informers).items()}
    print(f"  handler deliveries: {sum(delivered.values())}: " + ", ".join(
        f"{n} {d}" for n, d in sorted(delivered.items(), key=lambda x: -x[1]) if d))
    reconciles = {c.name: c.stats.reconciles - before[2].get(c.name, 0) for c in manager.controllers}
    print("  reconciles: " + ", ".join(f"{n} {r}" for n, r in sorted(reconciles.items(), key=lambda x: -x[1]) if r))
    print("  collections: " + ", ".join(f"{k} {v}" for k, v in sorted(collected.items())))
    print(f"  objects the cyclic collector tracks: {tracked[0]} before the rollout, {tracked[1]} after it "
          f"(+{tracked[1] - tracked[0]}, {(tracked[1] - tracked[0]) / replicas:.0f} a pod)")


def _deliveries(informers: Mapping[str, Any]) -> dict[str, int]:
    """Notifications each informer's handlers have processed so far (summed over its handlers)."""
    return {name: sum(listener.processed for listener in inf._listeners) for name, inf in informers.items()}


@contextmanager
def _cyclic_garbage() -> Iterator[Counter[str]]:
    """Count by type the objects the block leaves that only the cyclic collector frees (filled on exit). The
    collector is off inside the block; what was left before it is collected first."""
    out: Counter[str] = Counter()
    gc.collect()
    gc.disable()
    try:
        yield out
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        out.update(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


async def _rollout_garbage(replicas: int, nodes: int, timeout: float) -> Counter[str]:
    """The cyclic garbage of one rollout, from the Deployment's create until it is Available."""
    import kinformer as ki

    async with _server(nodes) as server, ki.Client(server.url) as client:
        await _settled(client)
        watcher = Watcher(client, "deployments", available(replicas), 1)
        await watcher.start()
        try:
            with _cyclic_garbage() as during:
                await client.create("deployments", deployment(replicas), namespace=NAMESPACE)
                await watcher.wait(timeout)
        finally:
            await watcher.close()
    return during


def garbage_census(replicas: int, nodes: int, timeout: float) -> None:
    """Print the cyclic garbage of a rollout and of its server's teardown (see ``--census``)."""
    def top(counts: Counter[str]) -> str:
        return f"{counts.total()} objects" + "".join(f", {k} {n}" for k, n in counts.most_common(8))

    run_alone(lambda: measure_deployment(replicas, nodes, timeout))  # first-use work is not a rollout's
    with _cyclic_garbage() as teardown:
        during = run_alone(lambda: _rollout_garbage(replicas, nodes, timeout))
    print(f"  cyclic garbage of a rollout: {top(during)}")
    print(f"  cyclic garbage of its server's teardown: {top(teardown)}")


def report(rounds: list[dict[str, float]], args: argparse.Namespace, load: tuple[float, float, float]) -> None:
    """Print the rounds' ratios and medians (``load``: the load average before the first round)."""
    med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    print(f"Deployment of {args.replicas} Available / {args.replicas} pods created directly (bare server): "
          f"{med['ratio vs pods created']:.2f}x (target <= 6x, floor ~4x)")
    print(f"Deployment of {args.replicas} Available / {args.replicas} pods created directly until Running+Ready: "
          f"{med['ratio vs pods ready']:.2f}x")
    fastest = {key: min(r[key] for r in rounds) for key in ("deployment available s", "pods created s")}
    print(f"  fastest Deployment / fastest bare creates (the least disturbed rounds; steadier on a busy machine): "
          f"{fastest['deployment available s'] / fastest['pods created s']:.2f}x")
    print(f"  CPU seconds of the process, Deployment / bare creates (median of the rounds' ratios; what other "
          f"processes on the machine disturb least): {med['cpu ratio vs pods created']:.2f}x")
    for key in ("deployment available s", "pods created s", "pods ready s", "deployment available cpu s",
                "pods created cpu s"):
        print(f"  {key:<28} {med[key]:8.2f}   rounds: {', '.join(f'{r[key]:.2f}' for r in rounds)}")
    print(f"  medians of {args.rounds} rounds; {args.nodes} nodes; {args.concurrency} creates in flight; "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs; "
          f"Python {sys.version.split()[0]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=3, help="simulated nodes (110 pods each)")
    parser.add_argument("--rounds", type=int, default=3, help="0: only --profile and --census")
    parser.add_argument("--concurrency", type=int, default=16, help="direct pod creates in flight")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a measurement may take")
    parser.add_argument("--profile", metavar="FILE", help="also write a cProfile of one Deployment rollout")
    parser.add_argument("--census", action="store_true",
                        help="also count what one rollout cost (requests, informer deltas, reconciles, collections)")
    parser.add_argument("--rollouts", type=int, default=0, metavar="N",
                        help="only run N Deployment rollouts (for instruction counts; see above)")
    parser.add_argument("--creates", type=int, default=0, metavar="N",
                        help="only run N measurements of the bare creates (for instruction counts; see above)")
    args = parse_args(parser, argv, replicas=20, nodes=1, rounds=1)
    if args.replicas > 110 * args.nodes:
        parser.error(f"{args.replicas} replicas do not fit on {args.nodes} nodes of 110 pods")
    if args.rollouts or args.creates:
        for _ in range(args.rollouts):
            run_alone(lambda: measure_deployment(args.replicas, args.nodes, args.timeout, quiet=True))
        for _ in range(args.creates):
            run_alone(lambda: measure_creates(args.replicas, args.concurrency))
        return
    if args.rounds:
        report([run_round(args, i) for i in range(args.rounds)], args, os.getloadavg())
    if args.profile:
        profile(args)
    if args.census:
        run_alone(lambda: census(args.replicas, args.nodes, args.timeout))
        garbage_census(args.replicas, args.nodes, args.timeout)


if __name__ == "__main__":
    main()
