"""What watchers that never read cost the server: its resident memory with and without them.

    python3 bench/bench_slow_watchers.py [--watchers 20] [--count 3000] [--size 51200]

Two runs of one ``kinformer serve --no-tls --storage memory`` process each: the first with no watcher, the
second with ``--watchers`` raw connections that each open a ConfigMap watch and never read a byte (a receive
buffer of 4 KiB). Both runs then write ``--count`` versions of ``--size`` bytes of data (10 ConfigMaps,
updated in turn: the store and the watch cache's event window hold the same in both runs), and the
server's resident memory (VmRSS, /proc) is read before and after. Printed per run: the resident memory
after start, after the writes, the growth, and (second run) the growth the watchers add over the first
run: the versions the watchers pin. Figures are one run's.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
from urllib.parse import urlsplit

import aiohttp
from bench_hostile_requests import start_server
from benchlib import parse_args

CM = "/api/v1/namespaces/default/configmaps"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def idle_watcher(url: str) -> socket.socket:
    """A connection with a ConfigMap watch open that never reads its answer."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname or "127.0.0.1", parts.port or 80))
    sock.sendall(f"GET {CM}?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


async def write_all(http: aiohttp.ClientSession, url: str, count: int, size: int, prefix: str) -> None:
    """``count`` writes of ``size`` bytes: 10 ConfigMaps created, then updated in turn (each version differs)."""
    sem = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        name = f"{prefix}{i % 10}"
        body = {"data": {"v": f"{i:08d}" + "x" * size}}
        async with sem:
            if i < 10:
                async with http.post(url + CM, json={"metadata": {"name": name}, **body}) as r:
                    r.raise_for_status()
                return
            async with http.patch(f"{url}{CM}/{name}", json=body,
                                  headers={"Content-Type": "application/merge-patch+json"}) as r:
                r.raise_for_status()

    await asyncio.gather(*(one(i) for i in range(10)))
    await asyncio.gather(*(one(i) for i in range(10, count)))


async def run(watchers: int, count: int, size: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as data:
        proc, url = await start_server(data, "--max-watches-per-client", "0")
        socks: list[socket.socket] = []
        try:
            async with aiohttp.ClientSession() as http:
                await write_all(http, url, 20, 1000, "warm")
                before = rss_mb(proc.pid)
                socks = [idle_watcher(url) for _ in range(watchers)]
                await asyncio.sleep(1.0)
                await write_all(http, url, count, size, "cm")
                await asyncio.sleep(2.0)
                after = rss_mb(proc.pid)
        finally:
            for s in socks:
                s.close()
            proc.terminate()
            await proc.wait()
    return before, after


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--size", type=int, default=50 * 1024)
    args = parse_args(parser, watchers=3, count=100, size=4096)
    print(f"{args.count} ConfigMap writes of {args.size} bytes; resident memory of the server (MB)")
    base_before, base_after = await run(0, args.count, args.size)
    print(f"  no watcher:        start {base_before:7.1f}  after {base_after:7.1f}  "
          f"growth {base_after - base_before:7.1f}")
    before, after = await run(args.watchers, args.count, args.size)
    extra = (after - before) - (base_after - base_before)
    print(f"  {args.watchers:3d} idle watchers: start {before:7.1f}  after {after:7.1f}  growth {after - before:7.1f}"
          f"  (+{extra:.1f} for the watchers)")


if __name__ == "__main__":
    asyncio.run(main())
