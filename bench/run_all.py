"""Every kinformer benchmark in one run, side by side with its peers: figures, ratios and the targets.

    python3 bench/run_all.py               # full sizes, each section 3 times, medians reported
    python3 bench/run_all.py --quick       # small sizes, once (a smoke run: figures mean nothing)
    python3 bench/run_all.py --rounds 1 --only watch,pipeline --json out.json

Sections (each round runs each section in a fresh child process, so RSS and heap state do not leak
between them; rounds interleave the sections, so a noisy minute hits all of them alike):

  watch      50k MODIFIED watch events of ~7.7 KB realistic pods over loopback HTTP (bench_client_watch.py):
             the kinformer informer end to end (a plain handler, an async handler, metadata-only), each with
             a cache growing from empty (every event a new pod) and full (its list first holds the pods the
             events then replace: "cache full", the informer's life after its sync),
             Client.watch alone and keeping what it receives (the floor of any cache), the official
             ``kubernetes`` client's watch (dicts, deserialize=False, V1Pod models) and ``kubectl get -w``;
             RSS per cached pod.
  pipeline   DeltaFIFO -> indexer (namespace + 2 label indexes) -> one no-op handler, in process, 10k keys,
             200k deltas (bench_informer.py), with an async and a sync handler; and DeltaFIFO -> Indexer
             without handlers (bench_fifo_indexer.py).
  workqueue  WorkQueue add/get/done ops/s, 1 and 4 workers, vs asyncio.Queue (bench_workqueue.py).
  storage    SQLite (synchronous=FULL and NORMAL) and memory storage: sequential and 16-way creates/s
             (bench_storage.py).
  server     the embedded API server on SQLite over loopback HTTP, in a process of its own with the load
             generator in this section's process (bench_server.py): sequential creates/s (aiohttp client,
             and a minimal blocking HTTP/1.1 client), 16-client creates/s, create->event latency seen by
             100 watchers at 200 writes/s; then sequential and 16-client creates/s with server and
             aiohttp client sharing one process and event loop (the former method).

Every figure is the median over the rounds; ratios are computed within a round (peers measured minutes
apart are not compared) and their median is reported. Nothing here passes or fails: the target column
says whether the median met the issue's target on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

#: A kinformer source tree the watch section also runs kinformer's consumers on (``--baseline-src``).
BASELINE_ENV = "KINFORMER_BENCH_BASELINE_SRC"
#: The round a section child runs in (0-based): the watch section rotates its consumers' order by it.
ROUND_ENV = "KINFORMER_BENCH_ROUND"
SECTIONS = ("watch", "pipeline", "workqueue", "storage", "server")


# ---------------------------------------------------------------------------------------------- sections

def section_watch(quick: bool) -> dict[str, float]:
    import bench_client_watch

    baseline = os.environ.get(BASELINE_ENV) or None
    rotate = int(os.environ.get(ROUND_ENV, "0"))
    if quick:
        return bench_client_watch.measure(2_000, 500, 200, baseline_src=baseline, rotate=rotate)
    return bench_client_watch.measure(50_000, 10_000, 5_000, baseline_src=baseline, rotate=rotate)


def section_pipeline(quick: bool) -> dict[str, float]:
    import bench_fifo_indexer
    import bench_informer

    keys, updates = (500, 3_000) if quick else (10_000, 200_000)
    out: dict[str, float] = {}
    for kind in ("async", "sync"):
        out[f"fifo->indexer->{kind} handler"] = asyncio.run(bench_informer.bench_fifo(keys, updates, kind))
    out["watch->reflector->fifo->indexer->async handler"] = asyncio.run(
        bench_informer.bench_watch(keys, updates, "async"))
    elapsed, n = asyncio.run(bench_fifo_indexer.run(updates, keys, 100))
    out["fifo->indexer (no handler)"] = n / elapsed
    return out


def section_workqueue(quick: bool) -> dict[str, float]:
    import bench_workqueue

    keys = [f"default/obj-{i:06d}" for i in range(500 if quick else 10_000)] * (2 if quick else 10)
    out: dict[str, float] = {}

    async def run() -> None:
        for workers in (1, 4):
            ops, _ = await bench_workqueue.best_of(3, bench_workqueue.run_workqueue, keys, workers, 100, False)
            peer, _ = await bench_workqueue.best_of(3, bench_workqueue.run_asyncio_queue, keys, workers, 100, False)
            out[f"WorkQueue {workers} worker(s)"] = ops
            out[f"asyncio.Queue {workers} worker(s)"] = peer

    asyncio.run(run())
    return out


def section_storage(quick: bool) -> dict[str, float]:
    import bench_storage

    from kinformer.server.storage import MemoryStorage, SQLiteStorage

    n = 100 if quick else 3000
    out: dict[str, float] = {}

    async def run(tmp: str) -> None:
        for name, make in (("sqlite FULL", lambda: SQLiteStorage(f"{tmp}/full.db", synchronous="FULL")),
                           ("sqlite NORMAL", lambda: SQLiteStorage(f"{tmp}/normal.db", synchronous="NORMAL")),
                           ("memory", MemoryStorage)):
            store = make()
            await store.start()
            try:
                res = await bench_storage.writes(store, n, 16)
            finally:
                await store.close()
            out[f"{name} seq create"] = res["seq create"]
            out[f"{name} 16x create"] = res["16x create"]

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(tmp))
    return out


def section_server(quick: bool) -> dict[str, float]:
    import aiohttp
    import bench_server

    writes = 100 if quick else 2000
    seconds = 0.5 if quick else 5.0
    out: dict[str, float] = {}

    async def run(tmp: str) -> None:
        async with bench_server.server_url(f"sqlite:///{tmp}/bench.db", in_process=False) as url, \
                aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=0)) as http:
            out["sequential creates/s"] = await bench_server.sequential(http, writes, "seq")
            out["sequential creates/s, minimal client"] = await asyncio.to_thread(
                bench_server.sequential_raw, url, writes, "raw")
            out["16-client creates/s"] = await bench_server.concurrent(http, writes, 16, "con")
            lat = await bench_server.fanout(http, 10 if quick else 100, 200.0, seconds)
            out["fan-out p50 ms"] = statistics.median(lat)
            out["fan-out p99 ms"] = bench_server.pct(lat, 99)
            out["fan-out max ms"] = max(lat)
        async with bench_server.server_url(f"sqlite:///{tmp}/inproc.db", in_process=True) as url, \
                aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=0)) as http:
            out["in-process sequential creates/s"] = await bench_server.sequential(http, writes, "seq")
            out["in-process 16-client creates/s"] = await bench_server.concurrent(http, writes, 16, "con")

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(tmp))
    return out


RUNNERS = {"watch": section_watch, "pipeline": section_pipeline, "workqueue": section_workqueue,
           "storage": section_storage, "server": section_server}


# ---------------------------------------------------------------------------------------------- driver

def run_section(name: str, quick: bool) -> dict[str, float]:
    """One section in a fresh child process; its figures plus the 1-minute load average before it."""
    cmd = [sys.executable, __file__, "--section", name] + (["--quick"] if quick else [])
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"section {name} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load"] = load
    return result


# (label, numerator, denominator, target or None): ratios of the watch section, computed within a round
RATIOS = [
    ("kinformer informer / official dicts", "kinformer-informer", "official-dict", 3.0),
    ("kinformer informer / official deserialize=False", "kinformer-informer", "official-raw", None),
    ("kinformer informer / official models", "kinformer-informer", "official-models", 25.0),
    ("kinformer informer / kubectl get -w", "kinformer-informer", "kubectl", 15.0),
    ("kinformer Client.watch / official dicts", "kinformer-watch", "official-dict", None),
    ("informer, plain handler / Client.watch alone", "kinformer-informer", "kinformer-watch", 0.75),
    ("informer, async handler / Client.watch alone", "kinformer-informer-async", "kinformer-watch", 0.75),
    ("informer, metadata-only / Client.watch alone", "kinformer-informer-meta", "kinformer-watch", 0.75),
]
# the informer / Client.watch ratios again per CPU second, and both kinds on the baseline tree (when run)
_INFORMERS = RATIOS[-3:]
# the same informers once their list has filled the cache: each event replaces a cached object
_STEADY = [(label.replace(" /", ", cache full /"), f"{num}-steady", den, goal) for label, num, den, goal in _INFORMERS]
RATIOS += _STEADY
RATIOS += [(f"{label} (per CPU s)", f"{num} cpu", f"{den} cpu", None) for label, num, den, _ in _INFORMERS + _STEADY]
# the same against Client.watch keeping what it receives (managedFields cut): the informer's own machinery
RATIOS += [(f"{label.removesuffix('alone')}keeping its objects (per CPU s)", f"{num} cpu", "kinformer-watch-kept cpu",
            None) for label, num, den, _ in _INFORMERS]
RATIOS += [("Client.watch keeping its objects / Client.watch alone (per CPU s)", "kinformer-watch-kept cpu",
            "kinformer-watch cpu", None)]
RATIOS += [(f"{label}{extra}, baseline", f"{num}{suffix}@baseline", f"{den}{suffix}@baseline", None)
           for suffix, extra in (("", ""), (" cpu", " (per CPU s)")) for label, num, den, _ in _INFORMERS]

# figure -> (section, comparison, target, unit)
TARGETS: dict[str, tuple[str, str, float, str]] = {
    "kinformer-informer": ("watch", ">=", 20_000, "events/s"),
    "kb_per_pod": ("watch", "<=", 5.3, "KiB/pod"),
    "kb_per_pod_meta": ("watch", "<=", 1.2, "KiB/pod"),
    "fifo->indexer->async handler": ("pipeline", ">=", 100_000, "deltas/s"),
    "fifo->indexer->sync handler": ("pipeline", ">=", 100_000, "deltas/s"),
    "WorkQueue 1 worker(s)": ("workqueue", ">=", 200_000, "ops/s"),
    "WorkQueue 4 worker(s)": ("workqueue", ">=", 200_000, "ops/s"),
    "sequential creates/s": ("server", ">=", 2_000, "writes/s"),
    "sequential creates/s, minimal client": ("server", ">=", 2_000, "writes/s"),
    "fan-out p99 ms": ("server", "<=", 50, "ms"),
}

PEERS = {"WorkQueue 1 worker(s)": "asyncio.Queue 1 worker(s)", "WorkQueue 4 worker(s)": "asyncio.Queue 4 worker(s)"}


def _fmt(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def report(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Print the tables; return the medians (figures and ratios) for --json."""
    medians: dict[str, dict[str, float]] = {}
    for section in SECTIONS:
        runs = [r[section] for r in rounds if section in r]
        if not runs:
            continue
        keys = [k for k in runs[0] if k != "load"]
        medians[section] = {k: statistics.median(r[k] for r in runs if k in r) for k in keys}
        loads = ", ".join(f"{r['load']:.2f}" for r in runs)
        print(f"\n## {section}  (median of {len(runs)}; load average before each run: {loads})")
        print(f"{'figure':52s} {'median':>12s} {'runs':>30s}  target")
        for key in keys:
            values = [r[key] for r in runs if key in r]
            target = TARGETS.get(key)
            verdict = ""
            if target is not None and target[0] == section:
                _, op, goal, unit = target
                ok = medians[section][key] >= goal if op == ">=" else medians[section][key] <= goal
                verdict = f"{op} {_fmt(goal)} {unit}: {'met' if ok else 'MISSED'}"
            runs_text = " / ".join(_fmt(v) for v in values)
            print(f"{key:52s} {_fmt(medians[section][key]):>12s} {runs_text:>30s}  {verdict}")
        for mine, peer in PEERS.items():
            if mine in medians[section] and peer in medians[section]:
                ratio = statistics.median(r[mine] / r[peer] for r in runs if mine in r and peer in r)
                print(f"{mine + ' / ' + peer:52s} {ratio:>11.2f}x")
    ratios: dict[str, float] = {}
    watch_runs = [r["watch"] for r in rounds if "watch" in r]
    if watch_runs:
        print("\n## ratios (within each round; median)")
        for label, num, den, goal in RATIOS:
            values = [r[num] / r[den] for r in watch_runs if num in r and den in r]
            if not values:
                continue
            ratios[label] = statistics.median(values)
            verdict = f">= {goal:g}x: {'met' if ratios[label] >= goal else 'MISSED'}" if goal else ""
            runs_text = " / ".join(f"{v:.2f}x" for v in values)
            print(f"{label:70s} {ratios[label]:>6.2f}x {runs_text:>24s}  {verdict}")
    return {"medians": medians, "ratios": ratios}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, one round unless --rounds is given")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; 1 with --quick)")
    p.add_argument("--only", default="", help=f"comma-separated sections of {','.join(SECTIONS)}")
    p.add_argument("--json", metavar="PATH", help="also write every round and the medians as JSON")
    p.add_argument("--baseline-src", help="watch section: also run kinformer's consumers on this source tree")
    p.add_argument("--section", choices=SECTIONS, help=argparse.SUPPRESS)  # child process mode
    args = p.parse_args()
    if args.baseline_src:
        os.environ[BASELINE_ENV] = os.path.abspath(args.baseline_src)
    if args.section:
        print(json.dumps(RUNNERS[args.section](args.quick)))
        return
    sections = [s for s in SECTIONS if not args.only or s in args.only.split(",")]
    n_rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    print(f"kinformer benchmarks: {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, {'quick' if args.quick else 'full'} sizes, {n_rounds} round(s); "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rounds: list[dict[str, dict[str, float]]] = []
    started = time.monotonic()
    for i in range(n_rounds):
        results: dict[str, dict[str, float]] = {}
        for section in sections:
            print(f"round {i + 1}/{n_rounds}: {section} ...", flush=True)
            os.environ[ROUND_ENV] = str(i)
            results[section] = run_section(section, args.quick)
        rounds.append(results)
    summary = report(rounds)
    print(f"\n{time.monotonic() - started:.0f} s in all; load average now "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": rounds, **summary}, indent=1))


if __name__ == "__main__":
    main()
