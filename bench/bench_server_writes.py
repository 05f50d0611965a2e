"""Write throughput of the embedded API server, before and after a change, side by side in one run.

Each server runs in a process of its own (``APIServer("memory")``, plain HTTP on loopback, as
``--serve`` of this script), the load generators in this one. Figures per server:

* realistic pods (``bench/pod-realistic.json``, 7.5 KB with managedFields; the
  ownerReference is dropped, since its owner does not exist and the garbage collector would delete
  every pod) created from one sequential aiohttp client, from 16 concurrent aiohttp clients, and
  from a minimal blocking HTTP/1.1 client (one keep-alive socket, a few µs per request);
* small ConfigMaps (~0.3 KB) from the minimal client;
* the server process's CPU time per create (user + system, from /proc), which load on the machine
  disturbs much less than wall-clock rates, and this process's own (what the load generator costs).

``--profile N`` instead profiles N pod creates in this process (the server in this event loop under
cProfile with the collector tuned as in a server process, the minimal client in a thread) and prints
each step's share of the server's time per request.

``--floor`` also runs the floor of this stack: an aiohttp application on the same event loop that only
decodes each body with orjson, sets a uid, a resourceVersion and a creation time, keeps the object in a
dict and answers it re-encoded with 201, its collector tuned as ``kinformer serve`` tunes its own. It has
no schema, defaults, managedFields, validation, admission, flow control, watch cache or storage. No server
built on aiohttp and orjson creates faster than it, so its figures say how much of a target is left to
kinformer's own work.

``--baseline SRC`` also runs a server from another source tree (for example an export of an older
commit: ``git archive COMMIT src | tar -x -C /tmp/before``), round by round with the current one on
a fresh server each time, and prints the ratios current / baseline. It prints figures, never verdicts. The servers
take turns going first from one round to the next.

    python3 bench/bench_server_writes.py --baseline /tmp/before/src --rounds 3
    python3 bench/bench_server_writes.py --floor --rounds 3 --instructions

With ``--floor`` the summary starts with the target ratios: kinformer's creates/s over the floor's for
realistic pods from one sequential aiohttp client and from 16, and small ConfigMaps from one sequential
aiohttp client (each the median of the within-round ratios); with ``--instructions`` also the instructions
per pod and per ConfigMap create over the floor's (one valgrind run each, after the rounds). With
``--baseline`` both trees are set against the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import resource
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from bench_server import _read_response, child_server
from benchlib import FIXTURE, parse_args

HERE = Path(__file__).resolve().parent
PODS = "/api/v1/namespaces/default/pods"
CMS = "/api/v1/namespaces/default/configmaps"
TICKS = os.sysconf("SC_CLK_TCK")


def pod_bodies(n: int, prefix: str) -> list[bytes]:
    pod = json.loads(FIXTURE.read_text())
    meta = pod["metadata"]
    for field in ("resourceVersion", "uid", "creationTimestamp", "ownerReferences", "generateName"):
        meta.pop(field, None)
    meta["namespace"] = "default"
    # the namespace's own account (the fixture's "reporting" does not exist here, and a pod naming a missing
    # ServiceAccount is refused)
    pod["spec"]["serviceAccountName"] = pod["spec"]["serviceAccount"] = "default"
    out = []
    for i in range(n):
        p = copy.deepcopy(pod)
        p["metadata"]["name"] = f"{prefix}-{i}"
        out.append(json.dumps(p, separators=(",", ":")).encode())
    return out


def configmap_bodies(n: int, prefix: str) -> list[bytes]:
    return [json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": f"{prefix}-{i}", "labels": {"bench": "1"}},
                        "data": {"payload": "x" * 200}}, separators=(",", ":")).encode() for i in range(n)]


# ------------------------------------------------------------------------------------------ load generators

async def _post(http: aiohttp.ClientSession, path: str, body: bytes) -> None:
    async with http.post(path, data=body, headers={"Content-Type": "application/json"}) as r:
        if r.status != 201:
            raise RuntimeError(f"create: {r.status} {await r.text()}")
        await r.read()


async def aiohttp_sequential(url: str, path: str, bodies: list[bytes]) -> None:
    async with aiohttp.ClientSession(base_url=url) as http:
        for body in bodies:
            await _post(http, path, body)


async def aiohttp_concurrent(url: str, path: str, bodies: list[bytes], workers: int = 16) -> None:
    todo = iter(bodies)
    async with aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=0)) as http:
        async def worker() -> None:
            for body in todo:
                await _post(http, path, body)

        await asyncio.gather(*(worker() for _ in range(workers)))


def minimal_sequential(url: str, path: str, bodies: list[bytes]) -> None:
    """One keep-alive socket, one request at a time; the client costs a few µs per request."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: "
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for body in bodies:
            sock.sendall(head.encode() + str(len(body)).encode() + b"\r\n\r\n" + body)
            _read_response(sock, f"create {path}")


# ------------------------------------------------------------------------------------------ the server side

def _tune_collector() -> None:
    """The collector as `kinformer serve` tunes it, in this tree or an older one (before the server's subpackages
    it was ``gc_tuning``; the oldest trees do not tune it)."""
    import importlib

    for name in ("kinformer.server.python_gc", "kinformer.server.gc_tuning"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        module.tune_for_server()
        return


async def serve(storage: str) -> None:
    """Child mode: an APIServer on ``storage``; prints its URL and serves until stdin closes."""
    from kinformer.server import APIServer

    profile = os.environ.get("BENCH_SERVER_PROFILE")  # a path: cProfile the server while it serves
    async with APIServer(storage, compaction_interval=0) as server:
        print(server.url, flush=True)
        _tune_collector()
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
        if prof is not None and profile:
            prof.disable()
            prof.dump_stats(profile)


async def serve_floor() -> None:
    """Child mode: the floor application (see the module docstring); prints its URL, serves until stdin closes.

    It also answers ``GET /healthz`` and a GET of an object it keeps, for ``bench_request_pipeline.py``.
    """
    import itertools

    import orjson
    from aiohttp import web

    objects: dict[str, dict[str, object]] = {}
    revisions = itertools.count(1)

    async def create(request: web.Request) -> web.Response:
        obj = orjson.loads(await request.read())
        meta = obj["metadata"]
        meta["uid"] = f"uid-{len(objects)}"
        meta["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        meta["resourceVersion"] = str(next(revisions))
        objects[request.path + "/" + meta["name"]] = obj
        return web.Response(body=orjson.dumps(obj), status=201, content_type="application/json")

    async def get(request: web.Request) -> web.Response:
        obj = objects.get(request.path)
        if obj is None:
            return web.Response(body=b'{"kind":"Status","code":404}', status=404, content_type="application/json")
        return web.Response(body=orjson.dumps(obj), content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(body=b"ok", content_type="text/plain")

    app = web.Application()
    for path in (PODS, CMS):
        app.router.add_post(path, create)
        app.router.add_get(path + "/{name}", get)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", flush=True)  # type: ignore[union-attr]
    from kinformer.server.python_gc import tune_for_server

    tune_for_server()  # the collector as in `kinformer serve`: kept objects are not rescanned at every create
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    finally:
        await runner.cleanup()


FLOOR = "floor"  # the variant name, and its --serve value


def server_process(src: str) -> contextlib.AbstractAsyncContextManager[tuple[str, int]]:
    """A server importing kinformer from ``src`` in a child process; yields (URL, pid)."""
    storage = FLOOR if src == FLOOR else "memory"
    return child_server([__file__, "--serve", storage], {**os.environ, "PYTHONPATH": str(HERE.parent / "src")
                                                         if src == FLOOR else src})


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


# ------------------------------------------------------------------------------------------ the run

Workload = tuple[str, str, Callable[[int, str], list[bytes]], str]
WORKLOADS: list[Workload] = [
    ("pods, sequential aiohttp client", PODS, pod_bodies, "aiohttp"),
    ("pods, 16 aiohttp clients", PODS, pod_bodies, "concurrent"),
    ("pods, sequential minimal client", PODS, pod_bodies, "minimal"),
    ("configmaps, sequential aiohttp client", CMS, configmap_bodies, "aiohttp"),
    ("configmaps, sequential minimal client", CMS, configmap_bodies, "minimal"),
]
#: The workloads whose rate against the floor's is the target (>= 0.8x each), printed first with --floor
TARGET_WORKLOADS = ["pods, sequential aiohttp client", "pods, 16 aiohttp clients",
                    "configmaps, sequential aiohttp client"]
#: bench_request_pipeline's workloads whose instructions per create against the floor's are the target (<= 1.6x)
INSTRUCTION_WORKLOADS = ["create realistic pod", "create configmap"]


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(src: str, n: int) -> dict[str, tuple[float, float, float]]:
    """(creates/s, server CPU µs per create, this process's CPU µs per create) per workload, on one fresh server
    from ``src``. This process is the load generator: its CPU is what the client costs."""
    out: dict[str, tuple[float, float, float]] = {}
    async with server_process(src) as (url, pid):
        for i, (name, path, make, client) in enumerate(WORKLOADS):
            count = 2 * n if client == "concurrent" else n
            await aiohttp_sequential(url, path, make(50, f"warm{i}"))
            bodies = make(count, f"w{i}")
            cpu0, own0, t0 = cpu_seconds(pid), _own_cpu_seconds(), time.perf_counter()
            if client == "aiohttp":
                await aiohttp_sequential(url, path, bodies)
            elif client == "concurrent":
                await aiohttp_concurrent(url, path, bodies)
            else:
                await asyncio.to_thread(minimal_sequential, url, path, bodies)
            wall, cpu, own = time.perf_counter() - t0, cpu_seconds(pid) - cpu0, _own_cpu_seconds() - own0
            out[name] = (count / wall, cpu / count * 1e6, own / count * 1e6)
    return out


async def run(args: argparse.Namespace) -> None:
    variants = {"current": str(HERE.parent / "src")}
    if args.baseline:
        variants = {"baseline": args.baseline, **variants}
    if args.floor:
        variants[FLOOR] = FLOOR
    rounds: list[dict[str, dict[str, tuple[float, float, float]]]] = []
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}, load average {os.getloadavg()[0]:.1f}", flush=True)
        order = list(variants.items())
        if r % 2:  # alternate which server goes first: a trend in the machine's load favours neither
            order.reverse()
        rounds.append({v: await measure(src, args.creates) for v, src in order})
    print(f"\nmedians of {args.rounds} rounds ({args.creates} creates per workload, 2x for 16 clients); "
          f"load average at the end {os.getloadavg()[0]:.1f}")
    if FLOOR in variants:
        _print_targets(rounds, variants, args)
    header = "| workload | " + " | ".join(f"{v} creates/s | {v} server µs/create" for v in variants)
    if "baseline" in variants:
        header += " | creates/s ratio | server CPU ratio"
    if FLOOR in variants:
        header += " | current creates/s / floor's | current server CPU / floor's"
    print(header + " |")
    print("|---" * (header.count("|")) + "|")
    for name, *_ in WORKLOADS:
        cells = []
        for v in variants:
            cells.append(f"{statistics.median(rd[v][name][0] for rd in rounds):,.0f}")
            cells.append(f"{statistics.median(rd[v][name][1] for rd in rounds):,.0f}")
        if "baseline" in variants:
            rate = statistics.median(rd["current"][name][0] / rd["baseline"][name][0] for rd in rounds)
            cpu = statistics.median(rd["baseline"][name][1] / rd["current"][name][1] for rd in rounds)
            cells += [f"{rate:.2f}x", f"{cpu:.2f}x less"]
        if FLOOR in variants:
            share = statistics.median(rd["current"][name][0] / rd[FLOOR][name][0] for rd in rounds)
            times = statistics.median(rd["current"][name][1] / (rd[FLOOR][name][1] or float("nan")) for rd in rounds)
            cells += [f"{share:.0%}", f"{times:.2f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nthe load generator's own CPU per create (what the client costs; medians of the rounds)")
    print("| workload | " + " | ".join(f"{v} client µs/create" for v in variants) + " |")
    print("|---" * (1 + len(variants)) + "|")
    for name, *_ in WORKLOADS:
        cells = [f"{statistics.median(rd[v][name][2] for rd in rounds):,.0f}" for v in variants]
        print(f"| {name} | " + " | ".join(cells) + " |")


def _print_targets(rounds: list[dict[str, dict[str, tuple[float, float, float]]]], variants: dict[str, str],
                   args: argparse.Namespace) -> None:
    """The target ratios: each target workload's creates/s over the floor's (the median of the within-round
    ratios; target >= 0.8x), then with ``--instructions`` the instructions per create over the floor's (<= 1.6x),
    for the current tree and, with ``--baseline``, the baseline's too."""
    trees = [v for v in ("baseline", "current") if v in variants]
    print("\nagainst the floor, in this run:")
    for name in TARGET_WORKLOADS:
        cells = [f"{v} {statistics.median(rd[v][name][0] / rd[FLOOR][name][0] for rd in rounds):.2f}x" for v in trees]
        print(f"  {name}: " + ", ".join(cells) + " the floor's creates/s")
    if args.instructions:
        from bench_request_pipeline import instructions  # it imports this module

        counts = {v: instructions(variants[v], args.requests, INSTRUCTION_WORKLOADS) for v in [*trees, FLOOR]}
        for name in INSTRUCTION_WORKLOADS:
            floor = counts[FLOOR][name]
            cells = [f"{v} {counts[v][name]:,.0f} = {counts[v][name] / floor:.2f}x" for v in trees]
            print(f"  {name}, instructions: " + ", ".join(cells) + f" the floor's {floor:,.0f}")
    print()


# (label, function name, file name ending) of the steps --profile reports
STEPS = [
    ("whole request in aiohttp (the 100 %)", "_handle_request", "web_protocol.py"),
    ("resource API handler (create)", "create", "writes.py"),
    ("managedFields bookkeeping", "update_managed_fields", "managedfields.py"),
    ("managedFields bookkeeping (before the split)", "update_managed_fields", "apply.py"),
    ("body reading and JSON decoding", "_decode", "writes.py"),
    ("validation (schema, metadata, kind)", "validate", "objects.py"),
    ("unknown-field check (fieldValidation)", "_field_validation", "writes.py"),
    ("create preparation (system fields, strategy, defaults; managedFields too where it runs inside)",
     "prepare_create", "objects.py"),
    ("storage write and namespace check", "create", "objects.py"),
    ("storage write, namespace check, served encoding", "_create", "objects.py"),
    ("response encoding", "json_response", "responses.py"),
    ("watch cache update (decode, ring, watchers)", "_apply", "watchcache.py"),
]


async def profile(n: int, dump: str | None = None) -> None:
    import cProfile
    import gc
    import pstats

    from kinformer.server import APIServer

    async with APIServer("memory", compaction_interval=0) as server:
        gc.collect()  # the collector as kinformer.server.python_gc sets it in a server process, for every tree
        gc.freeze()
        gc.set_threshold(20_000, 10, 100)
        await asyncio.to_thread(minimal_sequential, server.url, PODS, pod_bodies(50, "warm"))
        bodies = pod_bodies(n, "p")
        gc.collect()
        prof = cProfile.Profile()
        prof.enable()
        await asyncio.to_thread(minimal_sequential, server.url, PODS, bodies)
        await asyncio.sleep(0.2)  # let the watch cache take the last events
        prof.disable()
    if dump:
        prof.dump_stats(dump)
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (filename, _, func), (_, _, _, cum, _) in stats.items():
        for _, name, suffix in STEPS:
            if func == name and filename.endswith(suffix):
                # same-named functions of one module (a method and the helper it calls): the outer one
                cumulative[(name, suffix)] = max(cumulative.get((name, suffix), 0.0), cum)
    total = cumulative.get(("_handle_request", "web_protocol.py"), 0.0) or 1.0
    print(f"cProfile of {n} realistic pod creates in process, load average {os.getloadavg()[0]:.1f}; "
          f"{total / n * 1e3:.2f} ms per request under the profiler")
    print("| step | share of the request |")
    print("|---|---:|")
    for label, name, suffix in STEPS:
        if (name, suffix) in cumulative:
            print(f"| {label} | {cumulative[(name, suffix)] / total:.0%} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="SRC", help="another source tree (its src/ directory) to run side by side")
    p.add_argument("--creates", type=int, default=1000, help="creates per workload and round (default 1000)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--floor", action="store_true", help="also run the floor application side by side")
    p.add_argument("--instructions", action="store_true", help="with --floor: also count the instructions per "
                   "create of kinformer and the floor under valgrind (bench_request_pipeline.py; ~1 min each)")
    p.add_argument("--requests", type=int, default=300, help="with --instructions: creates counted (default 300)")
    p.add_argument("--profile", type=int, metavar="N", help="profile N pod creates in process instead")
    p.add_argument("--dump", metavar="PATH", help="with --profile: also write the cProfile stats to PATH (for pstats)")
    p.add_argument("--serve", metavar="STORAGE", help=argparse.SUPPRESS)
    args = parse_args(p, creates=100, rounds=1)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    if args.serve:
        factory = None
        with contextlib.suppress(ImportError):  # the event loop `kinformer serve` picks (older trees: asyncio's)
            from kinformer.server.eventloop import loop_factory

            factory = loop_factory()
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve_floor() if args.serve == FLOOR else serve(args.serve))
        return
    asyncio.run(profile(args.profile, args.dump) if args.profile else run(args))


if __name__ == "__main__":
    main()
