"""The API server on etcd vs SQLite, side by side in one run, over loopback HTTP.

For each backend: sequential and concurrent create writes/s, list latency (``resourceVersion=0`` from
the watch cache; a consistent list: the cache once it has caught up with the store's current revision;
a list with ``limit``, read from storage), and watch fan-out (create ->
event latency at a fixed write rate to N watchers). On etcd it also runs the fan-out across two
replicas: writes through replica A, watchers on replica B (the event travels A -> etcd -> B's watch
cache -> watchers).

    python bench/bench_server_storage.py                      # starts a throwaway etcd on loopback
    python bench/bench_server_storage.py --etcd 127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import concurrent, fanout, list_timing, pct, sequential
from benchlib import parse_args

from kinformer.server import APIServer


def summary(lat: list[float]) -> str:
    if not lat:
        raise RuntimeError("no watch event arrived: were the watches refused?")
    return f"{statistics.median(lat):.1f} / {pct(lat, 99):.1f}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_etcd() -> Iterator[str]:
    """A single-member etcd on loopback with its data in /dev/shm (when writable); yields its endpoint."""
    etcd = shutil.which("etcd")
    if etcd is None:
        raise SystemExit("etcd not found: install etcd-server or pass --etcd")
    client, peer = _free_port(), _free_port()
    data = tempfile.mkdtemp(prefix="bench-etcd-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    proc = subprocess.Popen(
        [etcd, "--name", "bench", "--data-dir", os.path.join(data, "d"),
         "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"bench=http://127.0.0.1:{peer}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:  # wait until it has elected itself
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=1) as r:
                    if b'"true"' in r.read():
                        break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("etcd did not become healthy")
            time.sleep(0.05)
        yield f"127.0.0.1:{client}"
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)


async def measure(name: str, storage: str, args: argparse.Namespace, replica_url: str | None) -> dict[str, str]:
    row: dict[str, str] = {"storage": name}
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(APIServer(storage, compaction_interval=0, max_watches_per_client=None))
        http = await stack.enter_async_context(
            aiohttp.ClientSession(base_url=server.url, connector=aiohttp.TCPConnector(limit=0)))
        row["sequential writes/s"] = f"{await sequential(http, args.writes, 'seq'):,.0f}"
        con = await concurrent(http, args.writes, args.workers, "con")
        row[f"concurrent writes/s ({args.workers})"] = f"{con:,.0f}"
        lat = await fanout(http, args.watchers, args.rate, args.seconds)
        row[f"fan-out p50/p99 ms ({args.watchers} w, {args.rate:.0f}/s)"] = summary(lat)
        have = 2 * args.writes + int(args.rate * args.seconds)
        if args.objects > have:
            await concurrent(http, args.objects - have, args.workers, "fill")
        cache_ms, n = await list_timing(http, {"resourceVersion": "0"})
        synced_ms, _ = await list_timing(http, {})
        storage_ms, _ = await list_timing(http, {"limit": str(10 * args.objects)})
        row[f"list {n}, RV=0 (cache) ms"] = f"{cache_ms:.0f}"
        row[f"list {n}, consistent (cache after sync) ms"] = f"{synced_ms:.0f}"
        row[f"list {n}, paginated (storage) ms"] = f"{storage_ms:.0f}"
        if replica_url is not None:
            row["fan-out across replicas p50/p99 ms"] = await across_replicas(http, replica_url, args)
    return row


async def across_replicas(writer: aiohttp.ClientSession, storage: str, args: argparse.Namespace) -> str:
    """Writes through ``writer``'s server, watchers on a second replica over the same storage."""
    async with APIServer(storage, compaction_interval=0, max_watches_per_client=None) as b, \
            aiohttp.ClientSession(base_url=b.url, connector=aiohttp.TCPConnector(limit=0)) as http_b:
        return summary(await fanout_split(writer, http_b, args))


async def fanout_split(writer: aiohttp.ClientSession, reader: aiohttp.ClientSession,
                       args: argparse.Namespace) -> list[float]:
    import bench_server

    # bench_server.fanout opens watchers and writes through one session; route its writes to the writer.
    original = bench_server.create

    async def create(_: aiohttp.ClientSession, name: str, stamp: float | None = None) -> None:
        await original(writer, name.replace("fan-", "fan-r", 1), stamp)  # a name not taken by the first run

    bench_server.create = create  # type: ignore[assignment]
    try:
        return await fanout(reader, args.watchers, args.rate, args.seconds)
    finally:
        bench_server.create = original  # type: ignore[assignment]


async def run(args: argparse.Namespace, etcd: str) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(await measure("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}", args, None))
    url = f"etcd://{etcd}/bench-{uuid.uuid4().hex[:8]}"
    rows.append(await measure("etcd", url, args, url))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    width = max(len(k) for k in keys)
    for k in keys:
        print(f"{k:<{width}}  " + "  ".join(f"{r.get(k, '-'):>14}" for r in rows))
    for k in keys:
        if "writes/s" in k:
            a, b = (float(r[k].replace(",", "")) for r in rows)
            print(f"etcd/sqlite {k}: {b / a:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--etcd", default=None, help="etcd endpoints host:port[,host:port...] (default: start one)")
    p.add_argument("--writes", type=int, default=1000)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--objects", type=int, default=5000)
    args = parse_args(p, writes=50, watchers=5, seconds=0.5, objects=100)
    if args.etcd:
        asyncio.run(run(args, args.etcd))
        return
    with throwaway_etcd() as endpoint:
        asyncio.run(run(args, endpoint))


if __name__ == "__main__":
    main()
