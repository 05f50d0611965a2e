"""Priority queue: add/get/done throughput beside the plain queues, and the starvation bound under load.

Run: ``python bench/bench_priority_queue.py [--keys 20000] [--rounds 5] [--repeat 5] [--max-wait 2.0]``.

Throughput: ``rounds`` passes over ``keys`` distinct keys, added in batches of 100 with a yield between
batches, consumed by one worker (``get`` + ``done``); ops/s = (adds + gets + dones) / wall time,
for WorkQueue, RateLimitingQueue and PriorityQueue (half the keys at LOW_PRIORITY, so the heap really orders
them), in ``repeat`` interleaved rounds; reported: the median ops/s and the median of the within-round ratios
to WorkQueue.

Starvation (simulated time on a FakeClock, so the figures do not depend on the machine's load): one worker
takes ``service`` = 1 ms of clock time per item; 1000 initial-list items are queued at LOW_PRIORITY and then
new events (distinct keys, NORMAL priority) arrive at 1.25 items per ms, more than the worker can serve, for
``duration`` seconds. Reported: the worst and the mean wait of an initial-list item, and how many of them
were served, with aging (``max_wait``) and without (strict priority: they starve while events keep coming).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchlib import parse_args

from kinformer.clock import FakeClock
from kinformer.workqueue import RateLimitingQueue, ShutDown, WorkQueue
from kinformer.workqueue.priority_queue import LOW_PRIORITY, NORMAL_PRIORITY, PriorityQueue


async def run_throughput(make: Callable[[], Any], keys: int, rounds: int, prioritised: bool) -> float:
    q = make()
    done_items = 0

    async def worker() -> None:
        nonlocal done_items
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            q.done(key)
            done_items += 1

    task = asyncio.create_task(worker())
    await asyncio.sleep(0)
    names = [f"ns/key-{i}" for i in range(keys)]
    t0 = time.perf_counter()
    adds = 0
    for _ in range(rounds):
        for start in range(0, keys, 100):
            if prioritised:
                for i, key in enumerate(names[start:start + 100]):
                    q.add(key, LOW_PRIORITY if i & 1 else NORMAL_PRIORITY)
            else:
                for key in names[start:start + 100]:
                    q.add(key)
            adds += min(100, keys - start)
            await asyncio.sleep(0)
    await q.shutdown_with_drain()
    await task
    elapsed = time.perf_counter() - t0
    await q.aclose()
    return (adds + 2 * done_items) / elapsed


async def run_starvation(max_wait: float | None, *, initial: int = 1000, service: float = 0.001,
                         arrivals_per_service: float = 1.25, duration: float = 20.0) -> dict[str, float]:
    """Simulate one worker under an event stream; the clock moves only by the simulated service time."""
    clock = FakeClock(start=0.0)
    q: PriorityQueue[str] = PriorityQueue(clock=clock, max_wait=max_wait)
    queued_at = {}
    for i in range(initial):
        key = f"initial-{i}"
        queued_at[key] = clock.now()
        q.add(key, LOW_PRIORITY)
    waits: list[float] = []
    arrivals = 0.0
    seq = 0
    while clock.now() < duration:
        arrivals += arrivals_per_service
        while arrivals >= 1.0:
            arrivals -= 1.0
            q.add(f"event-{seq}")
            seq += 1
        key = await q.get()
        if key in queued_at:
            waits.append(clock.now() - queued_at.pop(key))
        clock.step(service)
        q.done(key)
    await q.aclose()
    return {"served": len(waits), "worst": max(waits, default=float("inf")),
            "mean": sum(waits) / len(waits) if waits else float("inf"), "backlog": len(q)}


async def main(args: argparse.Namespace) -> None:
    makers: dict[str, tuple[Callable[[], Any], bool]] = {
        "WorkQueue": (WorkQueue, False),
        "RateLimitingQueue": (RateLimitingQueue, False),
        "PriorityQueue": (PriorityQueue, True),
    }
    rounds: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(args.repeat):  # interleaved, so a noisy moment hits every queue alike
        for name, (make, prio) in makers.items():
            gc.collect()
            rounds[name].append(await run_throughput(make, args.keys, args.rounds, prio))
    print(f"throughput, {args.keys} keys x {args.rounds} rounds, 1 worker ({args.repeat} interleaved rounds; "
          "median ops/s, median of the within-round ratios):")
    for name, ops in rounds.items():
        ratio = statistics.median(o / base for o, base in zip(ops, rounds["WorkQueue"], strict=True))
        print(f"  {name:<18} {statistics.median(ops):>12,.0f} ops/s   {ratio:5.2f}x WorkQueue")
    print(f"starvation: 1000 initial-list items, events at 1.25x the service rate, {args.duration:.0f} s simulated:")
    for label, max_wait in ((f"aging max_wait={args.max_wait:g}s", args.max_wait), ("no aging", None)):
        r = await run_starvation(max_wait, duration=args.duration)
        print(f"  {label:<22} served {r['served']:>4}/1000  worst wait {r['worst']:8.3f} s  "
              f"mean {r['mean']:8.3f} s  backlog at end {r['backlog']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--max-wait", type=float, default=2.0)
    parser.add_argument("--duration", type=float, default=20.0)
    asyncio.run(main(parse_args(parser, keys=500, rounds=1, repeat=1, duration=0.5)))
