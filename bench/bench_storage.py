"""Storage backend throughput: sequential and concurrent writes/s, and list latency over 10k keys.

Run: ``python bench/bench_storage.py [--writes 3000] [--tasks 16] [--keys 10000]``. Each backend gets a
fresh database in a temporary directory; SQLite is measured with ``synchronous=FULL`` (the default,
durable across power loss) and ``NORMAL`` (durable across process crashes only).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchlib import parse_args

from kinformer.server.storage import MemoryStorage, SQLiteStorage, Storage

VALUE = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"},"data":{"k":"' + (
    b"v" * 400
) + b'"}}'


async def _timed(n: int, fn: Callable[[], Awaitable[None]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return n / (time.perf_counter() - t0)


async def writes(store: Storage, n: int, tasks: int) -> dict[str, float]:
    """writes/s for creates and updates, sequential and with ``tasks`` concurrent writers."""

    async def seq_create() -> None:
        for i in range(n):
            await store.create(f"/bench/seq/{i:08d}", VALUE)

    async def seq_update() -> None:
        for i in range(n):
            await store.update(f"/bench/seq/{i:08d}", VALUE, 0)

    per = n // tasks

    async def conc(op: str) -> None:
        async def one(t: int) -> None:
            for i in range(per):
                key = f"/bench/conc/{t:03d}/{i:08d}"
                await (store.create(key, VALUE) if op == "create" else store.update(key, VALUE, 0))

        await asyncio.gather(*(one(t) for t in range(tasks)))

    return {
        "seq create": await _timed(n, seq_create),
        "seq update": await _timed(n, seq_update),
        f"{tasks}x create": await _timed(per * tasks, lambda: conc("create")),
        f"{tasks}x update": await _timed(per * tasks, lambda: conc("update")),
    }


async def lists(store: Storage, keys: int) -> dict[str, float]:
    """Latency (ms, median of 5) of listing ``keys`` keys at once, in pages of 500, and counting them."""
    batch = 256
    for start in range(0, keys, batch):
        await asyncio.gather(
            *(store.create(f"/bench/list/{i:08d}", VALUE) for i in range(start, min(start + batch, keys)))
        )
    for i in range(0, keys, 10):  # some history: every tenth key has two versions
        await store.update(f"/bench/list/{i:08d}", VALUE, 0)

    async def full() -> None:
        res = await store.list("/bench/list/")
        assert len(res.kvs) == keys

    async def paged() -> None:
        rev = await store.current_revision()
        after, total = "", 0
        while True:
            res = await store.list("/bench/list/", rev, start_after=after, limit=500)
            total += len(res.kvs)
            if not res.more:
                break
            after = res.kvs[-1].key
        assert total == keys

    async def first_page() -> None:
        await store.list("/bench/list/", limit=500)

    async def count() -> None:
        assert await store.count("/bench/list/") == keys

    out = {}
    for name, fn in (("list all", full), ("list paged 500", paged), ("first page 500", first_page), ("count", count)):
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - t0) * 1000)
        out[f"{name} ({keys} keys) ms"] = statistics.median(samples)
    return out


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backends: list[tuple[str, Callable[[str], Storage]]] = [
            ("memory", lambda _d: MemoryStorage()),
            ("sqlite FULL", lambda d: SQLiteStorage(str(Path(d) / "full.db"), synchronous="FULL")),
            ("sqlite NORMAL", lambda d: SQLiteStorage(str(Path(d) / "normal.db"), synchronous="NORMAL")),
        ]
        for name, factory in backends:
            sub = Path(tmp) / name.replace(" ", "-")
            sub.mkdir()
            store = factory(str(sub))
            await store.start()
            try:
                results = await writes(store, args.writes, args.tasks)
                results.update(await lists(store, args.keys))
            finally:
                await store.close()
            print(f"== {name}")
            for metric, value in results.items():
                unit = "" if metric.endswith("ms") else " writes/s"
                print(f"  {metric:<28} {value:>10.1f}{unit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--keys", type=int, default=10_000)
    asyncio.run(run(parse_args(parser, writes=100, keys=200)))


if __name__ == "__main__":
    main()
