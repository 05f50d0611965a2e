"""etcd vs SQLite storage, side by side: writes/s (sequential, concurrent), list latency over 10k keys, watch fan-out.

Run: ``python bench/bench_storage_etcd.py [--writes 2000] [--tasks 16] [--keys 10000] [--watchers 8] [--shm]``.
Needs the ``etcd`` binary (Debian: ``apt-get install etcd-server``). A single-member etcd is started on
loopback with a fresh data dir next to the SQLite files (on disk; ``--shm`` puts both in /dev/shm, which
takes fsync cost out of the comparison). Write and list figures come from bench_storage.py's workloads,
so they compare directly with its numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_storage import VALUE, lists, writes
from benchlib import parse_args

from kinformer.server.storage import EtcdStorage, SQLiteStorage, Storage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def start_etcd(data_dir: Path) -> tuple[asyncio.subprocess.Process, str]:
    """A single-member etcd on loopback; returns the process and its client endpoint once healthy."""
    etcd = shutil.which("etcd")
    if etcd is None:
        raise SystemExit("etcd binary not found (apt-get install etcd-server)")
    client, peer = _free_port(), _free_port()
    c_url, p_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    log = (data_dir / "etcd.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        etcd, "--data-dir", str(data_dir / "data"), "--listen-client-urls", c_url, "--advertise-client-urls", c_url,
         "--listen-peer-urls", p_url, "--initial-advertise-peer-urls", p_url, "--initial-cluster", f"default={p_url}",
         "--quota-backend-bytes", str(8 * 2**30),
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline and proc.returncode is None:
            try:
                async with session.get(c_url + "/health") as resp:
                    if (await resp.json(content_type=None)).get("health") == "true":
                        return proc, f"127.0.0.1:{client}"
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    proc.kill()
    raise SystemExit(f"etcd did not become healthy; see {data_dir / 'etcd.log'}")


async def fan_out(store: Storage, watchers: int, events: int) -> dict[str, float]:
    """Events/s delivered in total to ``watchers`` concurrent watches replaying ``events`` written events.

    The events are written first, so the figure is the watch path's (decode and fan-out), not the writes'.
    """
    start = await store.current_revision() + 1
    batch = 64
    for lo in range(0, events, batch):
        await asyncio.gather(*(store.create(f"/bench/fan/{i:08d}", VALUE) for i in range(lo, min(lo + batch, events))))

    async def watch() -> None:
        got = 0
        async with contextlib.aclosing(store.watch("/bench/fan/", start)) as stream:
            async for _ev in stream:
                got += 1
                if got == events:
                    return

    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(watch() for _ in range(watchers))), 120)
    return {f"watch {watchers}x replay events/s": watchers * events / (time.perf_counter() - t0)}


async def measure(store: Storage, args: argparse.Namespace) -> dict[str, float]:
    await store.start()
    try:
        results = await writes(store, args.writes, args.tasks)
        results.update(await lists(store, args.keys))
        results.update(await fan_out(store, args.watchers, args.writes))
        return results
    finally:
        await store.close()


async def run(args: argparse.Namespace) -> None:
    base = "/dev/shm" if args.shm else None
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        (root / "etcd").mkdir()
        proc, endpoint = await start_etcd(root / "etcd")
        try:
            backends: list[tuple[str, Callable[[], Storage]]] = [
                ("etcd", lambda: EtcdStorage([endpoint])),
                ("sqlite FULL", lambda: SQLiteStorage(str(root / "full.db"), synchronous="FULL")),
                ("sqlite NORMAL", lambda: SQLiteStorage(str(root / "normal.db"), synchronous="NORMAL")),
            ]
            table: dict[str, dict[str, float]] = {}
            for name, factory in backends:
                table[name] = await measure(factory(), args)
        finally:
            proc.kill()
            await proc.wait()
    names = list(table)
    print(f"storage in {'/dev/shm' if args.shm else 'a disk temp dir'}; writes={args.writes} tasks={args.tasks}")
    print(f"{'metric':<36}" + "".join(f"{n:>15}" for n in names) + f"{'etcd/sqlite FULL':>18}")
    for metric in table["etcd"]:
        row = [table[n][metric] for n in names]
        print(f"{metric:<36}" + "".join(f"{v:>15.1f}" for v in row) + f"{row[0] / row[1]:>17.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=8)
    parser.add_argument("--shm", action="store_true", help="data dirs in /dev/shm (no fsync cost)")
    asyncio.run(run(parse_args(parser, writes=100, keys=200, watchers=2)))


if __name__ == "__main__":
    main()
