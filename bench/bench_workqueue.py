"""Work queue throughput: add/get/done operations per second.

Run: ``python bench/bench_workqueue.py [--keys 10000] [--rounds 10] [--batch 100] [--repeat 3]``.

How operations are counted: every ``add()`` call is one op (including adds de-duplicated because the
key is already dirty), every ``get()`` that returns an item is one op, every ``done()`` is one op.
``ops/s = (adds + gets + dones) / wall time`` of the whole run (producer and workers together, one
event loop). ``items/s`` is the rate of completed get+done cycles.

Scenarios (each with 1 and with 4 worker tasks):

- ``distinct``: ``rounds`` passes over ``keys`` distinct keys; every add queues an item.
- ``hot``: the same number of adds drawn from a hot set of 100 keys, so most adds hit a dirty key
  (de-duplicated) or a key in flight (re-queued at ``done``).

The producer adds ``batch`` keys, then yields to the loop (``await asyncio.sleep(0)``), so workers
alternate between the fast path (items queued) and parking on the queue. The ``+await`` variants make
each worker ``await asyncio.sleep(0)`` between ``get`` and ``done`` (a stand-in for a reconcile that
awaits once), so 4 workers really interleave and keys are re-added while in flight. Peer: ``asyncio.Queue``
(``put_nowait``/``get``/``task_done``, no de-duplication and no one-worker-per-key rule) fed the same
way, for a ratio (of ops/s). Where keys repeat (``hot``, and ``+await`` where adds outrun the
workers) the WorkQueue collapses duplicates and so hands out fewer items than ``asyncio.Queue``, which
processes every put: compare the items/s columns with that in mind. Best of ``repeat`` runs is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence

from benchlib import parse_args

from kinformer.workqueue import ShutDown, WorkQueue

Runner = Callable[[Sequence[Hashable], int, int, bool], Awaitable[tuple[float, int, int]]]


async def run_workqueue(keys: Sequence[Hashable], workers: int, batch: int, work: bool) -> tuple[float, int, int]:
    """Returns (seconds, ops, items)."""
    q = WorkQueue()
    items = 0

    async def worker() -> None:
        nonlocal items
        get = q.get
        done = q.done
        count = 0
        while True:
            try:
                key = await get()
            except ShutDown:
                break
            if work:
                await asyncio.sleep(0)
            done(key)
            count += 1
        items += count

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await asyncio.sleep(0)
    t0 = time.perf_counter()
    add = q.add
    sleep = asyncio.sleep
    for start in range(0, len(keys), batch):
        for key in keys[start : start + batch]:
            add(key)
        await sleep(0)
    await q.shutdown_with_drain()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - t0
    return elapsed, len(keys) + 2 * items, items


async def run_asyncio_queue(keys: Sequence[Hashable], workers: int, batch: int, work: bool) -> tuple[float, int, int]:
    """The same feed through asyncio.Queue; ops = puts + gets + task_dones."""
    q: asyncio.Queue[Hashable | None] = asyncio.Queue()
    items = 0

    async def worker() -> None:
        nonlocal items
        get = q.get
        task_done = q.task_done
        count = 0
        while True:
            key = await get()
            if work:
                await asyncio.sleep(0)
            task_done()
            if key is None:
                break
            count += 1
        items += count

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await asyncio.sleep(0)
    t0 = time.perf_counter()
    put = q.put_nowait
    sleep = asyncio.sleep
    for start in range(0, len(keys), batch):
        for key in keys[start : start + batch]:
            put(key)
        await sleep(0)
    for _ in range(workers):
        put(None)
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - t0
    return elapsed, len(keys) + 2 * items, items


async def best_of(
    repeat: int, runner: Runner, keys: Sequence[Hashable], workers: int, batch: int, work: bool
) -> tuple[float, float]:
    """(ops/s, items/s) of the fastest of ``repeat`` runs."""
    best: tuple[float, float] = (0.0, 0.0)
    for _ in range(repeat):
        gc.collect()
        elapsed, ops, items = await runner(keys, workers, batch, work)
        if ops / elapsed > best[0]:
            best = (ops / elapsed, items / elapsed)
    return best


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(1)
    total = args.keys * args.rounds
    scenarios = {
        "distinct": [f"default/obj-{i:06d}" for i in range(args.keys)] * args.rounds,
        "hot": [f"default/hot-{rng.randrange(100):03d}" for _ in range(total)],
    }
    print(f"{total} adds per run, batch {args.batch}, best of {args.repeat}; ops = adds + gets + dones")
    header = ("scenario", "workers", "WorkQueue ops/s", "items/s", "asyncio.Queue ops/s", "items/s", "ratio")
    print("{:<15} {:>7} {:>16} {:>10} {:>20} {:>10} {:>6}".format(*header))
    for work in (False, True):
        for name, keys in scenarios.items():
            for workers in (1, 4):
                ops, items = await best_of(args.repeat, run_workqueue, keys, workers, args.batch, work)
                peer_ops, peer_items = await best_of(args.repeat, run_asyncio_queue, keys, workers, args.batch, work)
                label = name + ("+await" if work else "")
                print(
                    f"{label:<15} {workers:>7} {ops:>16,.0f} {items:>10,.0f} "
                    f"{peer_ops:>20,.0f} {peer_items:>10,.0f} {ops / peer_ops:>6.2f}"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys per round")
    parser.add_argument("--rounds", type=int, default=10, help="passes over the keys per run")
    parser.add_argument("--batch", type=int, default=100, help="adds between yields to the loop")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario; the best is reported")
    asyncio.run(main(parse_args(parser, keys=500, rounds=2, repeat=1)))
