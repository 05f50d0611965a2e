"""run_sized: small bodies' stages run inline on the loop, large ones in a thread while the loop keeps running."""

from __future__ import annotations

import asyncio
import threading

from kinformer.server.endpoints.offloop import OFF_LOOP_BYTES, run_sized


async def test_small_bodies_run_inline_on_the_loop_thread() -> None:
    assert await run_sized(OFF_LOOP_BYTES - 1, threading.get_ident) == threading.get_ident()


async def test_large_bodies_run_in_a_thread_while_the_loop_runs_other_tasks() -> None:
    other_ran = threading.Event()

    def heavy() -> bool:  # stands for a long merge: it ends once a task on the loop has run meanwhile
        return other_ran.wait(timeout=30)

    async def other() -> None:
        other_ran.set()

    async with asyncio.TaskGroup() as tg:
        work = tg.create_task(run_sized(OFF_LOOP_BYTES, heavy))
        tg.create_task(other())
    assert work.result() is True
