"""The informer's cost curve: cold sync time, RSS per cached pod and steady watch throughput at 10k, 100k and 1M
realistic pods, full and metadata-only, beside the official ``kubernetes`` client's list (dicts).

A small aiohttp server (a process of its own, holding no objects) renders ~8.4 KB realistic pods
(bench/pod-realistic.json: names, namespaces, uids and resourceVersions varied, managedFields
included) on demand: ``GET /api/v1/pods`` lists them (``limit``/``continue`` pages, or all at once), as
``PartialObjectMetadataList`` when the ``Accept`` header asks for it, and a watch streams MODIFIED events of
existing pods, one burst per ``/trigger`` of its stream. (The embedded API server keeps every object decoded
in its watch cache, so 1M pods would not fit in memory beside the informer on this machine: the cost measured
here is the informer's alone.)

Every consumer runs in a fresh interpreter, so RSS is its own:

  informer-full / informer-meta   SharedIndexInformer over Client (metadata_only=True for -meta): cold sync
                                   (list, decode, transform, RealFIFO, indexer) with one no-op handler, RSS
                                   growth per cached pod, then events/s of ``--events`` MODIFIED events with
                                   the cache full (watch to handler), in 3 bursts, each followed by a burst of
                                   as many events to Client.watch alone in the same process (so the ratio
                                   of the two sees one machine load; medians reported)
  official-list                   kubernetes CoreV1Api.list_pod_for_all_namespaces(_preload_content=False)
                                   + json.loads: seconds and RSS per pod as dicts

    python bench/bench_cost_curve.py [--sizes 10000,100000,1000000] [--events 20000] [--plot docs/cost-curve.png]

Prints one table and the ratios the issue sets targets for (within this run). Not a pass/fail test. The 1M
rows need about 2 GB of RAM and a few minutes; ``--full-max`` (default 100000) bounds the full-object runs
and ``--official-max`` (default 100000) the official client's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import FIXTURE, parse_args

NAMESPACES = 100
ROUNDS = 3  # watch bursts per consumer, each followed by a Client.watch-alone burst of the same size
GC_FREEZE = os.environ.get("BENCH_GC_FREEZE") == "1"  # the informers' gc_freeze option (--gc-freeze)
PARTIAL_HEAD = b'{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":'


# ---------------------------------------------------------------------------------------------------- server

class PodTemplate:
    """Renders pod ``i`` at resourceVersion ``rv`` as JSON bytes (whole, or its PartialObjectMetadata)."""

    def __init__(self) -> None:
        import orjson

        pod = json.loads(FIXTURE.read_text())
        meta = pod["metadata"]
        meta.update(name="@@NAME@@", namespace="@@NS@@", uid="@@UID@@", resourceVersion="@@RV@@")
        meta.pop("generateName", None)
        self.full = self._split(orjson.dumps(pod))
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        self.partial = self._split(orjson.dumps(partial))
        self.uid_prefix = str(uuid.uuid4())[:-12]

    @staticmethod
    def _split(data: bytes) -> list[bytes]:
        parts: list[bytes] = []
        for marker in (b"@@NAME@@", b"@@NS@@", b"@@UID@@", b"@@RV@@"):
            head, data = data.split(marker, 1)
            parts.append(head)
        parts.append(data)
        return parts

    def render(self, i: int, rv: int, partial: bool) -> bytes:
        a, b, c, d, e = self.partial if partial else self.full
        return b"".join((a, f"pod-{i}".encode(), b, f"ns-{i % NAMESPACES}".encode(), c,
                         f"{self.uid_prefix}{i:012d}".encode(), d, str(rv).encode(), e))


def _announce(port_file: str, port: int) -> None:
    tmp = f"{port_file}.tmp"
    Path(tmp).write_text(str(port))
    os.replace(tmp, port_file)  # atomic: the parent never reads a partial port


def _serve(port_file: str, size: int) -> None:
    from aiohttp import web

    tpl = PodTemplate()
    rounds: dict[str, asyncio.Queue[int]] = {}  # per stream (the labelSelector "stream=<name>"): event counts
    state = {"rv": size}

    def partial_asked(request: web.Request) -> bool:
        return "as=PartialObjectMetadata" in request.headers.get("Accept", "")

    async def pods(request: web.Request) -> web.StreamResponse:
        q = request.query
        partial = partial_asked(request)
        if q.get("watch") == "true":
            return await watch(request, partial)
        start = int(q.get("continue") or 0)
        limit = int(q.get("limit") or 0) or size
        end = min(size, start + limit)
        meta: dict[str, Any] = {"resourceVersion": str(size)}
        if end < size:
            meta["continue"] = str(end)
        kind = "PartialObjectMetadataList" if partial else "PodList"
        api = "meta.k8s.io/v1" if partial else "v1"
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        head = json.dumps({"kind": kind, "apiVersion": api, "metadata": meta})
        await resp.write(head[:-1].encode() + b',"items":[')
        step = 500
        for lo in range(start, end, step):
            hi = min(end, lo + step)
            chunk = b",".join(tpl.render(i, i + 1, partial) for i in range(lo, hi))
            await resp.write((b"," if lo > start else b"") + chunk)
        await resp.write(b"]}")
        await resp.write_eof()
        return resp

    async def watch(request: web.Request, partial: bool) -> web.StreamResponse:
        """Streams one burst of MODIFIED events per /trigger of this watch's stream (never ends by itself)."""
        stream = request.query.get("labelSelector", "stream=a").partition("=")[2]
        queue = rounds.setdefault(stream, asyncio.Queue())
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        prefix = b'{"type":"MODIFIED","object":'
        while True:
            count = await queue.get()
            batch: list[bytes] = []
            for k in range(count):
                state["rv"] += 1
                batch.append(prefix + tpl.render(k % size, state["rv"], partial) + b"}\n")
                if len(batch) == 64:
                    await resp.write(b"".join(batch))
                    batch = []
            if batch:
                await resp.write(b"".join(batch))

    async def fire(request: web.Request) -> web.Response:
        stream = request.query.get("stream", "a")
        rounds.setdefault(stream, asyncio.Queue()).put_nowait(int(request.query["events"]))
        return web.Response(text="ok")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/pods", pods)
        app.router.add_get("/trigger", fire)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        _announce(port_file, port)
        await asyncio.Event().wait()

    asyncio.run(main())


class Server:
    """The pod server in a child process, for one ``size`` (a fresh one per consumer)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._dir = tempfile.TemporaryDirectory()
        port_file = os.path.join(self._dir.name, "port")
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", port_file, str(size)])
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("pod server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{Path(port_file).read_text()}"

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._dir.cleanup()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------------- consumers

def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def _trigger(url: str, events: int, stream: str) -> None:
    import aiohttp

    params = {"events": str(events), "stream": stream}
    async with aiohttp.ClientSession() as s, s.get(f"{url}/trigger", params=params) as r:
        assert r.status == 200


class Counter:
    """Counts events; ``wait(n)`` returns once ``n`` more arrived."""

    def __init__(self) -> None:
        self.count = 0
        self._target = 0
        self._done = asyncio.Event()

    def hit(self) -> None:
        self.count += 1
        if self.count >= self._target:
            self._done.set()

    async def burst(self, url: str, events: int, stream: str) -> float:
        """Trigger ``events`` on ``stream`` and return the events/s until all arrived."""
        self._target = self.count + events
        self._done.clear()
        t0 = time.perf_counter()
        await _trigger(url, events, stream)
        await asyncio.wait_for(self._done.wait(), 3600)
        return events / (time.perf_counter() - t0)


class GCTimer:
    """Seconds the cyclic garbage collector ran (gc.callbacks), to see what a big cache costs it."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


async def informer_run(url: str, size: int, events: int, metadata_only: bool) -> dict[str, float]:
    """Cold sync seconds, RSS KiB per cached pod, events/s with the cache full (and GC seconds in each)."""
    from kinformer.cache.shared_informer import SharedIndexInformer
    from kinformer.client import Client, Resource

    gc.collect()
    gc_timer = GCTimer()
    before = rss_kb()
    seen = Counter()

    async def on_update(old: Any, new: Any) -> None:
        seen.hit()

    async with Client(url, timeout=None) as client:
        pods = Resource("", "v1", "pods", "Pod")
        lw = client.lister_watcher(pods, metadata_only=metadata_only, label_selector="stream=a")
        inf = SharedIndexInformer(lw, name="pods", watch_idle_timeout=None, gc_freeze=GC_FREEZE)
        inf.add_event_handler(on_update=on_update)
        t0 = time.perf_counter()
        inf.start()
        assert await inf.wait_for_sync(3600)
        sync_s = time.perf_counter() - t0
        sync_gc_s = gc_timer.take()
        cached = len(inf.indexer)
        gc.collect()
        per_pod = (rss_kb() - before) / max(cached, 1)
        alone = Counter()

        async def watch_alone() -> None:
            async for ev in client.watch(pods, label_selector="stream=b", resource_version="1"):
                if ev.object.resource_version:
                    alone.hit()

        informer_rates, alone_rates = [], []
        watch_s = 0.0
        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(watch_alone())
            await asyncio.sleep(0.5)  # the watch is open (its request sent) before the first burst
            for _ in range(ROUNDS):  # interleaved: the two rates see the same machine load
                rate = await seen.burst(url, events, "a")
                watch_s += events / rate
                informer_rates.append(rate)
                alone_rates.append(await alone.burst(url, events, "b"))
            reader.cancel()
        watch_gc_s = gc_timer.take()
        await inf.stop()
    assert cached == size, cached
    return {"sync_s": sync_s, "kib_per_pod": per_pod, "events_s": statistics.median(informer_rates),
            "watch_alone_s": statistics.median(alone_rates),
            "vs_watch": statistics.median(a / b for a, b in zip(informer_rates, alone_rates, strict=True)),
            "rss_mib": rss_kb() / 1024, "sync_gc_share": sync_gc_s / sync_s, "watch_gc_share": watch_gc_s / watch_s}


def official_run(url: str, size: int) -> dict[str, float]:
    from kubernetes import client as kclient

    gc.collect()
    before = rss_kb()
    cfg = kclient.Configuration()
    cfg.host = url
    api = kclient.CoreV1Api(kclient.ApiClient(cfg))
    t0 = time.perf_counter()
    resp = api.list_pod_for_all_namespaces(_preload_content=False)
    items = json.loads(resp.data)["items"]
    sync_s = time.perf_counter() - t0
    del resp
    gc.collect()
    per_pod = (rss_kb() - before) / max(len(items), 1)
    assert len(items) == size
    return {"sync_s": sync_s, "kib_per_pod": per_pod, "rss_mib": rss_kb() / 1024}


def _child(kind: str, url: str, size: int, events: int) -> None:
    if kind == "official-list":
        out = official_run(url, size)
    else:
        out = asyncio.run(informer_run(url, size, events, metadata_only=kind == "informer-meta"))
    print(json.dumps(out))


def measure_one(kind: str, size: int, events: int) -> dict[str, float]:
    with Server(size) as server:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1] / "src"),
                                             env.get("PYTHONPATH", "")])
        out = subprocess.run([sys.executable, __file__, "--child", kind, server.url, str(size), str(events)],
                             check=True, capture_output=True, text=True, env=env, timeout=7200)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------- report

def measure(sizes: list[int], events: int, full_max: int, official_max: int) -> dict[str, dict[int, dict]]:
    results: dict[str, dict[int, dict]] = {"informer-meta": {}, "informer-full": {}, "official-list": {}}
    for size in sizes:
        results["informer-meta"][size] = measure_one("informer-meta", size, events)
        if size <= full_max:
            results["informer-full"][size] = measure_one("informer-full", size, events)
        if size <= official_max:
            results["official-list"][size] = measure_one("official-list", size, events)
        print(f"# {size}: done", file=sys.stderr, flush=True)
    return results


def report(results: dict[str, dict[int, dict]], sizes: list[int]) -> list[str]:
    lines = [f"{'consumer':<15} {'pods':>9} {'sync s':>8} {'KiB/pod':>8} {'RSS MiB':>8} {'events/s':>9} "
             f"{'watch/s':>8} {'inf/watch':>9} {'GC% sync':>8} {'GC% watch':>9}"]
    for kind in ("informer-meta", "informer-full", "official-list"):
        for size, r in sorted(results[kind].items()):
            if "events_s" in r:
                rates = f"{r['events_s']:9.0f} {r['watch_alone_s']:8.0f} {r['vs_watch']:9.2f}"
                gcs = f"{100 * r['sync_gc_share']:8.0f} {100 * r['watch_gc_share']:9.0f}"
            else:
                rates = f"{'-':>9} {'-':>8} {'-':>9}"
                gcs = f"{'-':>8} {'-':>9}"
            lines.append(f"{kind:<15} {size:>9} {r['sync_s']:8.2f} {r['kib_per_pod']:8.2f} {r['rss_mib']:8.0f} "
                         f"{rates} {gcs}")
    meta = results["informer-meta"]
    small, big = min(sizes), max(sizes)
    lines.append("")
    lines.append("ratios (this run; targets in brackets):")
    for size, r in sorted(meta.items()):
        lines.append(f"  metadata-only KiB/pod at {size}: {r['kib_per_pod']:.2f} [<= 1.2]")
    for size, r in sorted(results["informer-full"].items()):
        lines.append(f"  full KiB/pod at {size}: {r['kib_per_pod']:.2f} [<= 5.5]")
    if 100_000 in meta and big > 100_000:
        lines.append(f"  metadata-only sync time {big} / 100000: {meta[big]['sync_s'] / meta[100_000]['sync_s']:.1f}x "
                     f"[<= 10x]; RSS at {big}: {meta[big]['rss_mib']:.0f} MiB [<= 1430 MiB]")
    if big != small:
        # each consumer ran minutes apart: its rate is normalised by Client.watch alone measured beside it
        lines.append(f"  metadata-only events/s at {big} / at {small} (each relative to Client.watch beside it): "
                     f"{meta[big]['vs_watch'] / meta[small]['vs_watch']:.2f} [>= 0.9]; raw "
                     f"{meta[big]['events_s'] / meta[small]['events_s']:.2f}")
    lines.append(f"  metadata-only events/s at {big} / Client.watch alone: {meta[big]['vs_watch']:.2f} [>= 0.6]")
    full = results["informer-full"]
    for size, r in sorted(results["official-list"].items()):
        if size in full:
            lines.append(f"  official list / informer-full at {size}: sync {r['sync_s'] / full[size]['sync_s']:.1f}x, "
                         f"memory {r['kib_per_pod'] / full[size]['kib_per_pod']:.1f}x")
    return lines


def plot(results: dict[str, dict[int, dict]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    styles = {"informer-meta": "o-", "informer-full": "s-", "official-list": "^--"}
    for kind, style in styles.items():
        rows = sorted(results[kind].items())
        if not rows:
            continue
        xs = [size for size, _ in rows]
        axes[0].plot(xs, [r["sync_s"] for _, r in rows], style, label=kind)
        axes[1].plot(xs, [r["kib_per_pod"] for _, r in rows], style, label=kind)
        if "events_s" in rows[0][1]:
            axes[2].plot(xs, [r["events_s"] for _, r in rows], style, label=kind)
    for kind, style in (("informer-meta", "x:"), ("informer-full", "+:")):
        rows = sorted(results[kind].items())
        axes[2].plot([size for size, _ in rows], [r["watch_alone_s"] for _, r in rows], style, color="grey",
                     label=f"Client.watch alone (beside {kind})")
    for ax, title in zip(axes, ("cold sync (s)", "RSS per cached pod (KiB)", "watch events/s, cache full"),
                         strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("pods")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    axes[2].legend(fontsize=8)
    fig.suptitle("kinformer informer cost curve (realistic pods)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        _serve(sys.argv[2], int(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--full-max", type=int, default=100_000)
    parser.add_argument("--official-max", type=int, default=100_000)
    parser.add_argument("--gc-freeze", action="store_true", help="informers with gc_freeze=True")
    parser.add_argument("--plot", default="", help="write the curve as a PNG here (needs matplotlib)")
    parser.add_argument("--json", default="", help="write the raw figures here")
    args = parse_args(parser, sizes="500", events=200)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.gc_freeze:
        os.environ["BENCH_GC_FREEZE"] = "1"  # inherited by the consumer processes
    results = measure(sizes, args.events, args.full_max, args.official_max)
    print("\n".join(report(results, sizes)))
    if args.json:
        Path(args.json).write_text(json.dumps({k: {str(s): r for s, r in v.items()} for k, v in results.items()},
                                              indent=1))
    if args.plot:
        plot(results, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
