"""Benchmark of the embedded API server over loopback HTTP.

Measures: sequential and concurrent create writes/s; watch fan-out to N watchers with create->event
latency percentiles at a fixed write rate; list of many objects served from the watch cache vs storage.

By default the server runs in a process of its own (``--serve``, started by :func:`server_process`)
and the load generator (aiohttp client, watchers) in this one, so each has a core as in a real
deployment. ``--in-process`` runs both in one event loop, where the client's CPU counts against the
server.

    python bench/bench_server.py --storage sqlite --objects 10000
    python bench/bench_server.py --in-process
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from benchlib import parse_args

from kinformer.server import APIServer

CM = "/api/v1/namespaces/default/configmaps"


def body(name: str, stamp: float | None = None) -> bytes:
    meta: dict[str, object] = {"name": name, "labels": {"bench": "1"}}
    if stamp is not None:
        meta["annotations"] = {"sent": repr(stamp)}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                       "data": {"payload": "x" * 200}}).encode()


async def create(http: aiohttp.ClientSession, name: str, stamp: float | None = None) -> None:
    async with http.post(CM, data=body(name, stamp), headers={"Content-Type": "application/json"}) as r:
        if r.status != 201:
            raise RuntimeError(f"create {name}: {r.status} {await r.text()}")
        await r.read()


async def sequential(http: aiohttp.ClientSession, n: int, prefix: str) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        await create(http, f"{prefix}-{i}")
    return n / (time.perf_counter() - t0)


def sequential_raw(url: str, n: int, prefix: str) -> float:
    """Sequential creates/s from a minimal blocking HTTP/1.1 client (one keep-alive socket, no aiohttp).

    The load generator's own cost per request is a few microseconds here (like wrk or hey), so the
    figure is the server's round trip rather than aiohttp's client overhead (~0.4 ms per request).
    """
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    head = (f"POST {CM} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: ").encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        for i in range(n):
            data = body(f"{prefix}-{i}")
            sock.sendall(head + str(len(data)).encode() + b"\r\n\r\n" + data)
            _read_response(sock, f"create {prefix}-{i}")
        return n / (time.perf_counter() - t0)


def _read_response(sock: socket.socket, name: str, expect: bytes = b"201") -> bytes:
    """Read one HTTP/1.1 response with a Content-Length; its body (a status other than ``expect`` raises)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"{name}: connection closed")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 " + expect):
        raise RuntimeError(f"{name}: {lines[0].decode()}")
    length = next(int(v) for k, _, v in (line.partition(b":") for line in lines[1:])
                  if k.strip().lower() == b"content-length")
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"{name}: connection closed")
        rest += chunk
    return rest


async def concurrent(http: aiohttp.ClientSession, n: int, workers: int, prefix: str) -> float:
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            await create(http, f"{prefix}-{i}")

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return n / (time.perf_counter() - t0)


async def fanout(http: aiohttp.ClientSession, watchers: int, rate: float, seconds: float) -> list[float]:
    """Create->event latencies (ms) seen by ``watchers`` watchers while writing at ``rate``/s."""
    async with http.get(CM, params={"limit": "1"}) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    total = int(rate * seconds)
    latencies: list[float] = []
    ready = asyncio.Event()
    opened = 0

    async def watcher() -> None:
        nonlocal opened
        async with http.get(CM, params={"watch": "1", "resourceVersion": rv}, timeout=aiohttp.ClientTimeout(None)) \
                as resp:
            opened += 1
            if opened == watchers:
                ready.set()
            seen = 0
            buf = b""
            async for chunk in resp.content.iter_any():
                now = time.perf_counter()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    ev = json.loads(line)
                    sent = ev["object"]["metadata"].get("annotations", {}).get("sent")
                    if sent is not None and ev["object"]["metadata"]["name"].startswith("fan-"):
                        latencies.append((now - float(sent)) * 1000)
                        seen += 1
                if seen >= total:
                    return

    tasks = [asyncio.create_task(watcher()) for _ in range(watchers)]
    await asyncio.wait_for(ready.wait(), 30)
    await asyncio.sleep(0.2)
    t0 = time.perf_counter()
    for i in range(total):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await create(http, f"fan-{i}", time.perf_counter())
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return latencies


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


async def list_timing(http: aiohttp.ClientSession, params: dict[str, str], repeat: int = 3) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        async with http.get(CM, params=params) as r:
            data = await r.read()
        best = min(best, time.perf_counter() - t0)
        count = len(json.loads(data)["items"])
    return best * 1000, count


async def serve(storage: str) -> None:
    """The server side of a two-process run: print the URL, serve until stdin closes."""
    profile = os.environ.get("BENCH_SERVER_PROFILE")
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    async with APIServer(storage, compaction_interval=0) as server:
        print(server.url, flush=True)
        loop = asyncio.get_running_loop()
        if prof is not None:
            prof.enable()
        await loop.run_in_executor(None, sys.stdin.buffer.read)
        if prof is not None and profile:
            prof.disable()
            prof.dump_stats(profile)


@contextlib.asynccontextmanager
async def server_process(storage: str) -> AsyncIterator[str]:
    """An API server over ``storage`` in a child process (this script with ``--serve``); yields its URL."""
    async with child_server([__file__, "--serve", storage]) as (url, _):
        yield url


@contextlib.asynccontextmanager
async def child_server(argv: list[str], env: dict[str, str] | None = None) -> AsyncIterator[tuple[str, int]]:
    """``python argv...``, a server that prints its URL and serves until stdin closes; yields (URL, pid)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, *argv, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"bench server {argv} did not start (exit code {proc.returncode})")
        yield url, proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def server_url(storage: str, in_process: bool) -> AsyncIterator[str]:
    """The URL of a server over ``storage``: in this event loop, or in a child process."""
    if in_process:
        async with APIServer(storage, compaction_interval=0) as server:
            yield server.url
    else:
        async with server_process(storage) as url:
            yield url


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = "memory" if args.storage == "memory" else f"sqlite:///{Path(tmp) / 'bench.db'}"
        async with server_url(storage, args.in_process) as url, \
                aiohttp.ClientSession(base_url=url, connector=aiohttp.TCPConnector(limit=0)) as http:
            print(f"server: {'in this process' if args.in_process else 'separate process'}")
            print(f"storage: {args.storage}")
            print(f"sequential creates: {await sequential(http, args.writes, 'seq'):,.0f} writes/s")
            raw = await asyncio.to_thread(sequential_raw, url, args.writes, "raw")
            print(f"sequential creates, minimal HTTP client: {raw:,.0f} writes/s")
            print(f"concurrent creates ({args.workers} clients): "
                  f"{await concurrent(http, args.writes, args.workers, 'con'):,.0f} writes/s")
            lat = await fanout(http, args.watchers, args.rate, args.seconds)
            print(f"watch fan-out: {args.watchers} watchers at {args.rate:.0f} writes/s, {len(lat)} events: "
                  f"p50 {statistics.median(lat):.1f} ms, p99 {pct(lat, 99):.1f} ms, max {max(lat):.1f} ms")
            have = 3 * args.writes + int(args.rate * args.seconds)
            if args.objects > have:
                await concurrent(http, args.objects - have, args.workers, "fill")
            cache_ms, n = await list_timing(http, {"resourceVersion": "0"})
            storage_ms, n2 = await list_timing(http, {"limit": str(10 * args.objects)})
            print(f"list {n} objects: watch cache {cache_ms:.0f} ms, storage {storage_ms:.0f} ms ({n2} items)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--storage", choices=("memory", "sqlite"), default="sqlite")
    p.add_argument("--writes", type=int, default=2000)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--in-process", action="store_true",
                   help="run the server in this process and event loop (the client's CPU counts against it)")
    p.add_argument("--serve", metavar="STORAGE", help=argparse.SUPPRESS)
    args = parse_args(p, writes=100, watchers=5, seconds=0.5, objects=200)
    if args.serve:
        asyncio.run(serve(args.serve))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
