"""An acknowledged SQLite write survives SIGKILL of the writing process, and revisions keep increasing."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from kinformer.server.storage import SQLiteStorage

WRITER = r"""
import asyncio, sys
from kinformer.server.storage import SQLiteStorage

async def worker(store, w):
    counter = f"/d/counter/{w}"
    await store.create(counter, b"0")
    i = 0
    while True:
        i += 1
        kv = await store.create(f"/d/keys/{w}/{i:08d}", b"x" * 200)
        sys.stdout.write(f"C {kv.key} {kv.mod_revision}\n")
        kv = await store.update(counter, str(i).encode(), 0)
        sys.stdout.write(f"U {kv.key} {kv.mod_revision}\n")
        sys.stdout.flush()

async def main():
    store = SQLiteStorage(sys.argv[1], synchronous=sys.argv[2])
    await store.start()
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    await asyncio.gather(*(worker(store, w) for w in range(8)))

asyncio.run(main())
"""


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
async def test_acknowledged_writes_survive_sigkill(tmp_path: Path, synchronous: str) -> None:
    path = str(tmp_path / "durable.db")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, path, synchronous, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    created: dict[str, int] = {}
    updated: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            assert (await proc.stdout.readline()).strip() == b"READY"
            while len(created) < 400:
                line = await proc.stdout.readline()
                if not line:
                    break
                kind, key, rev = line.decode().split()
                (created if kind == "C" else updated)[key] = int(rev)
    finally:
        # One SIGKILL, mid-load (the writer never stops on its own). A second signal would poll the child
        # first, racing the event loop's child watcher for its exit status (which then reads 255).
        proc.kill()
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL, (await proc.stderr.read()).decode()[-3000:]
    assert len(created) >= 400, "writer did not make progress"

    async with SQLiteStorage(path) as store:
        top = max(max(created.values()), max(updated.values()))
        current = await store.current_revision()
        assert current >= top
        for key, rev in created.items():
            kv = await store.get(key)
            assert kv is not None and kv.mod_revision == rev, key
        for key, rev in updated.items():
            kv = await store.get(key)
            assert kv is not None and kv.mod_revision >= rev, key
        history = await store.list("/d/keys/")
        revs = [kv.mod_revision for kv in history.kvs]
        assert len(set(revs)) == len(revs)
        fresh = await store.create("/d/after-restart", b"x")
        assert fresh.mod_revision == current + 1 > top
