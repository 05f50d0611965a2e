"""SQLite MVCC storage in the style of kine: one append-only table whose row id is the revision.

Table ``kv``: every create, update and delete appends one row
``(id = revision, name, created, deleted, create_revision, prev_revision, value)``; a delete appends a
tombstone (``deleted = 1``) carrying the key's last value; ``prev_revision`` is the id of the key's
previous row (a create after a delete points at the tombstone). The state at revision R is, per
name, the row with the largest ``id <= R`` unless that row is a tombstone. ``meta`` persists the
compaction point (``compact_rev``) and how far compaction has physically deleted (``compact_done``).

Threads and ordering:

* All writes go through ONE writer connection, serialised. Writes that queue up while a
  transaction commits are applied together in the next transaction (group commit); every
  compare-and-swap is checked inside ``BEGIN IMMEDIATE`` against rows the same transaction sees.
  Revisions are assigned explicitly (``last + 1``), so they are gapless.
* A batch normally runs in the writer thread. A lone write (a batch of one, nothing else queued, no
  job in the writer thread) runs in the event loop's thread instead: two thread hand-offs cost
  more than the commit itself on a fast disk. That blocks the loop for one commit, so it is only
  done while commits are fast (a moving average under ``_INLINE_MAX_COMMIT`` seconds); on a slow
  disk every batch goes to the thread. Either way the connection is used by one thread at a time.
  WAL checkpoints never run inside a commit (``wal_autocheckpoint`` is off): every
  ``_CHECKPOINT_EVERY`` commits a PASSIVE checkpoint runs as a job of the writer thread, so the
  loop never waits for the database file's fsync.
* A write's future resolves only after COMMIT returns; with ``synchronous=FULL`` (the default) the
  WAL is fsynced first, so an acknowledged write survives a process kill and a power loss.
* After each commit the event loop advances ``_rev`` and publishes the batch's events before it
  resolves the writers' futures; reads at "latest" use ``_rev`` and filter ``id <= _rev``, so a
  reader never sees a row whose events have not been published.
* Reads run in a reader thread on a second connection (WAL lets it read while the writer commits).
  For ``:memory:`` databases the writer thread and connection serve reads too.
* A watch subscribes to the live fan-out at revision ``now = _rev`` and then reads history
  ``[start, now]`` from the table; live events are delivered only when ``> now``. Because rows are
  published strictly after commit and in order, the hand-off has no gap and no duplicate.
* Compaction first persists the new compaction point and publishes it, then deletes in batches of
  revisions; it only ever deletes rows at or below the point, so reads at or above it stay exact.
  Readers re-check the point after each query and raise :class:`Compacted` if it overtook them.

One process owns a database file at a time (the revision counter lives in that process).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from .base import (
    Compacted,
    Event,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RevisionMismatch,
    Storage,
    StorageError,
    resolve_revision,
)
from .memory import DEFAULT_WATCH_BUFFER, WatchHub, drain_live, prefix_end

__all__ = ["SQLiteStorage"]

_T = TypeVar("_T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS kv (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        created INTEGER NOT NULL,
        deleted INTEGER NOT NULL,
        create_revision INTEGER NOT NULL,
        prev_revision INTEGER NOT NULL,
        value BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS kv_name_id ON kv (name, id)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
)

_SQL_LATEST = "SELECT id, deleted, create_revision, value FROM kv WHERE name = ? ORDER BY id DESC LIMIT 1"
_SQL_GET = "SELECT id, deleted, create_revision, value FROM kv WHERE name = ? AND id <= ? ORDER BY id DESC LIMIT 1"
_SQL_INSERT = (
    "INSERT INTO kv (id, name, created, deleted, create_revision, prev_revision, value) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_SQL_HISTORY = (
    "SELECT k.id, k.name, k.created, k.deleted, k.create_revision, k.prev_revision, k.value, p.value"
    " FROM kv AS k LEFT JOIN kv AS p ON p.id = k.prev_revision"
    " WHERE k.id >= ? AND k.id <= ?{name} ORDER BY k.id LIMIT ?"
)
_SQL_SET_META = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"
_SQL_COMPACT_PREV = (
    "DELETE FROM kv WHERE id IN (SELECT prev_revision FROM kv WHERE id > ? AND id <= ? AND prev_revision > 0)"
)
_SQL_COMPACT_TOMBSTONES = "DELETE FROM kv WHERE id > ? AND id <= ? AND deleted = 1"

_CREATE, _UPDATE, _DELETE = 0, 1, 2
_MAX_BATCH = 512
_INLINE_MAX_COMMIT = 0.001  # a lone write commits in the loop's thread while commits average under this
_CHECKPOINT_EVERY = 300  # commits between WAL checkpoints (~1,000 pages, SQLite's autocheckpoint default)
_HISTORY_PAGE = 1000
_COMPACT_BATCH = 2000

_Op = tuple[int, str, bytes, int]
_Outcome = tuple[KeyValue | StorageError, Event | None]


def _name_filter(prefix: str, start_after: str, col: str) -> tuple[str, list[str]]:
    """SQL conditions (and their parameters) selecting names under ``prefix`` and after ``start_after``."""
    conds: list[str] = []
    params: list[str] = []
    if start_after and start_after >= prefix:
        conds.append(f"{col} > ?")
        params.append(start_after)
    elif prefix:
        conds.append(f"{col} >= ?")
        params.append(prefix)
    end = prefix_end(prefix)
    if end is not None:
        conds.append(f"{col} < ?")
        params.append(end)
    return "".join(" AND " + c for c in conds), params


class SQLiteStorage(Storage):
    """MVCC storage in a SQLite file (or ``":memory:"``); see the module docstring for the design.

    ``synchronous`` is SQLite's ``PRAGMA synchronous`` in WAL mode: ``"FULL"`` (default) makes every
    acknowledged write durable across power loss; ``"NORMAL"`` keeps it across process crashes only.
    ``watch_buffer`` bounds each watcher's undelivered live events before :class:`WatcherTooSlow`.
    """

    def __init__(
        self,
        path: str,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        watch_buffer: int = DEFAULT_WATCH_BUFFER,
        readers: int = 2,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        if readers < 1:
            raise ValueError("readers must be at least 1")
        self._nreaders = readers
        self.path = path
        self._synchronous = synchronous
        self._memory = path == ":memory:" or path.startswith("file::memory:")
        self._hub = WatchHub(watch_buffer)
        self._rev = 0
        self._compacted = 0
        self._compact_done = 0
        self._wexec: ThreadPoolExecutor | None = None
        self._rexec: ThreadPoolExecutor | None = None
        self._wcon: sqlite3.Connection | None = None
        self._local = threading.local()  # .con: the calling thread's read connection
        self._rcons: list[sqlite3.Connection] = []
        self._wrev = 0  # writer-side copy of the last assigned revision
        self._wjobs = 0  # jobs submitted to the writer thread and not finished (event loop only)
        self._commit_avg = 0.0  # moving average of a batch's apply + commit time, seconds
        self._queue: list[tuple[_Op, asyncio.Future[KeyValue]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._kicked = False  # a _kick callback is scheduled
        self._commits = 0  # commits since the last WAL checkpoint
        self._checkpointer: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._compact_lock = asyncio.Lock()
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the database (idempotent): create the schema and load the revision counters. A file's database
        may be opened again after :meth:`close` (its data and revisions as they were; watches ended by the close
        stay ended, as for the memory storage); an in-memory one ended with its close."""
        async with self._start_lock:
            if self._wexec is not None:
                return
            if self._closed:
                if self._memory:
                    raise StorageError("storage is closed (an in-memory SQLite database ends with its close)")
                self._hub = WatchHub(self._hub.buffer_limit)
                self._closed = False
            wexec = ThreadPoolExecutor(1, thread_name_prefix="kinformer-sqlite-writer")
            loop = asyncio.get_running_loop()
            try:
                self._wcon, state = await loop.run_in_executor(wexec, self._open_writer)
                rexec = wexec
                if not self._memory:
                    rexec = ThreadPoolExecutor(self._nreaders, thread_name_prefix="kinformer-sqlite-reader")
            except BaseException:
                wexec.shutdown(wait=False)
                raise
            self._rev, self._compacted, self._compact_done = state
            self._wrev = self._rev
            self._wexec, self._rexec = wexec, rexec

    async def close(self) -> None:
        """Finish queued writes, end every watch, and close the connections (idempotent)."""
        self._closed = True
        while self._flusher is not None or self._kicked:
            if self._flusher is not None:
                await asyncio.shield(self._flusher)
            else:
                await asyncio.sleep(0)  # let the scheduled _kick apply what is queued
        if self._checkpointer is not None:
            await asyncio.shield(self._checkpointer)
        self._hub.close()
        wexec, rexec = self._wexec, self._rexec
        if wexec is None:
            return
        self._wexec = self._rexec = None
        loop = asyncio.get_running_loop()
        if rexec is not wexec and rexec is not None:
            await loop.run_in_executor(None, self._close_readers, rexec)
        if self._wcon is not None:
            await loop.run_in_executor(wexec, self._close_writer, self._wcon)
        wexec.shutdown(wait=False)
        self._wcon = None

    async def __aenter__(self) -> SQLiteStorage:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _connect(self, check_same_thread: bool = True) -> sqlite3.Connection:
        uri = self.path.startswith("file:")
        con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=check_same_thread, uri=uri)
        con.execute("PRAGMA busy_timeout = 10000")
        if not self._memory:
            con.execute("PRAGMA journal_mode = WAL")
        con.execute(f"PRAGMA synchronous = {self._synchronous}")
        return con

    def _open_writer(self) -> tuple[sqlite3.Connection, tuple[int, int, int]]:
        # lone writes may commit from the event loop's thread (never while the writer thread holds it)
        con = self._connect(check_same_thread=self._memory)
        if not self._memory:
            con.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run in the writer thread: _checkpoint
        for stmt in _SCHEMA:
            con.execute(stmt)
        if self._memory:
            self._local.con = con  # the writer thread serves reads of an in-memory database
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        compacted = int(meta.get("compact_rev", 0))
        done = int(meta.get("compact_done", 0))
        max_id = con.execute("SELECT COALESCE(MAX(id), 0) FROM kv").fetchone()[0]
        seq = con.execute("SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'kv'").fetchone()[0]
        return con, (max(max_id, seq, compacted), compacted, done)

    def _reader(self) -> sqlite3.Connection:
        """The calling reader thread's connection, opened on first use."""
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = self._connect(check_same_thread=False)
            self._rcons.append(con)
        return con

    def _close_readers(self, rexec: ThreadPoolExecutor) -> None:
        rexec.shutdown(wait=True)
        for con in self._rcons:
            con.close()
        self._rcons.clear()

    @staticmethod
    def _close_writer(con: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.Error):
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()

    async def _ensure_started(self) -> None:
        """Open on first use; after :meth:`close`, only an explicit :meth:`start` opens again."""
        if self._wexec is None:
            if self._closed:
                raise StorageError("storage is closed")
            await self.start()

    async def _in_writer(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` in the writer thread, counted until it has finished there (even if the caller is
        cancelled first), so that no lone write commits inline while the thread holds the connection."""
        fut = asyncio.get_running_loop().run_in_executor(self._wexec, fn, *args)
        self._wjobs += 1
        fut.add_done_callback(self._writer_job_done)
        return await asyncio.shield(fut)

    def _writer_job_done(self, fut: asyncio.Future[Any]) -> None:
        self._wjobs -= 1
        if not fut.cancelled():
            fut.exception()  # retrieved: a caller cancelled meanwhile does not read it

    async def _read(self, fn: Callable[..., _T], *args: Any) -> _T:
        await self._ensure_started()
        return await asyncio.get_running_loop().run_in_executor(self._rexec, fn, *args)

    # -- reads ---------------------------------------------------------------------------------------

    async def current_revision(self) -> int:
        await self._ensure_started()
        return self._rev

    async def compacted_revision(self) -> int:
        await self._ensure_started()
        return self._compacted

    def _resolve(self, revision: int) -> int:
        return resolve_revision(revision, self._rev, self._compacted)

    async def _at_revision(self, revision: int, fn: Callable[..., _T], *args: Any) -> tuple[int, _T]:
        """Run ``fn(rev, *args)`` in the reader thread at a resolved revision that compaction did not overtake."""
        await self._ensure_started()
        while True:
            rev = self._resolve(revision)
            result = await self._read(fn, rev, *args)
            if rev >= self._compacted:
                return rev, result
            if revision:
                raise Compacted(revision, self._compacted)

    async def get(self, key: str, revision: int = 0) -> KeyValue | None:
        return (await self._at_revision(revision, self._get_sync, key))[1]

    def _get_sync(self, rev: int, key: str) -> KeyValue | None:
        row = self._reader().execute(_SQL_GET, (key, rev)).fetchone()
        if row is None or row[1]:
            return None
        return KeyValue(key, row[3], row[0], row[2])

    async def list(self, prefix: str, revision: int = 0, start_after: str = "", limit: int = 0) -> ListResult:
        if limit < 0:
            raise ValueError(f"limit must not be negative: {limit}")
        rev, kvs = await self._at_revision(revision, self._list_sync, prefix, start_after, limit + 1 if limit else -1)
        more = bool(limit) and len(kvs) > limit
        if more:
            del kvs[limit:]
        return ListResult(kvs, rev, more)

    def _list_sync(self, rev: int, prefix: str, start_after: str, limit: int) -> builtins.list[KeyValue]:
        cond, params = _name_filter(prefix, start_after, "k.name")
        sql = (
            "SELECT k.name, k.value, k.id, k.create_revision FROM kv AS k"
            f" WHERE k.id <= ?{cond} AND k.deleted = 0"
            " AND k.id = (SELECT MAX(l.id) FROM kv AS l WHERE l.name = k.name AND l.id <= ?)"
            " ORDER BY k.name LIMIT ?"
        )
        rows = self._reader().execute(sql, (rev, *params, rev, limit)).fetchall()
        return [KeyValue(*row) for row in rows]

    async def count(self, prefix: str, revision: int = 0, start_after: str = "") -> int:
        return (await self._at_revision(revision, self._count_sync, prefix, start_after))[1]

    def _count_sync(self, rev: int, prefix: str, start_after: str) -> int:
        cond, params = _name_filter(prefix, start_after, "name")
        sql = (
            "SELECT COUNT(*) FROM kv WHERE id IN"
            f" (SELECT MAX(id) FROM kv WHERE id <= ?{cond} GROUP BY name) AND deleted = 0"
        )
        return int(self._reader().execute(sql, (rev, *params)).fetchone()[0])

    # -- writes --------------------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        return await self._write((_CREATE, key, value, 0))

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        return await self._write((_UPDATE, key, value, expected_revision))

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        return await self._write((_DELETE, key, b"", expected_revision))

    async def _write(self, op: _Op) -> KeyValue:
        if self._closed:
            raise StorageError("storage is closed")
        await self._ensure_started()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[KeyValue] = loop.create_future()
        self._queue.append((op, fut))
        if self._flusher is None and not self._kicked:
            # run after the writers already woken in this loop iteration queued theirs: they share a commit
            self._kicked = True
            loop.call_soon(self._kick)
        return await fut

    def _kick(self) -> None:
        """Commit a lone queued write inline, or start the flusher task for a batch."""
        self._kicked = False
        if self._flusher is not None or not self._queue:
            return
        if self._inline_ok(len(self._queue)):
            batch = self._queue[:]
            self._queue.clear()
            try:
                outcomes = self._apply_batch([op for op, _ in batch])
            except Exception as exc:
                self._fail(batch, exc)
            else:
                self._deliver(batch, outcomes)
            return
        self._flusher = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        """Apply queued writes batch by batch (see the module docstring), then publish and acknowledge them."""
        try:
            while self._queue:
                batch = self._queue[:_MAX_BATCH]
                del self._queue[:_MAX_BATCH]
                ops = [op for op, _ in batch]
                try:
                    if not self._queue and self._inline_ok(len(ops)):
                        outcomes = self._apply_batch(ops)
                    else:
                        outcomes = await self._in_writer(self._apply_batch, ops)
                except Exception as exc:
                    self._fail(batch, exc)
                    continue
                self._deliver(batch, outcomes)
        finally:
            self._flusher = None

    def _inline_ok(self, n: int) -> bool:
        """Whether ``n`` queued writes (all there are) may commit in the loop's thread (module docstring)."""
        return n == 1 and not self._wjobs and not self._memory and self._commit_avg < _INLINE_MAX_COMMIT

    @staticmethod
    def _fail(batch: builtins.list[tuple[_Op, asyncio.Future[KeyValue]]], exc: Exception) -> None:
        for _, fut in batch:
            if not fut.done():
                err = StorageError(f"write failed: {exc}")
                err.__cause__ = exc
                fut.set_exception(err)

    def _deliver(self, batch: builtins.list[tuple[_Op, asyncio.Future[KeyValue]]],
                 outcomes: builtins.list[_Outcome]) -> None:
        self._commits += 1
        if self._commits >= _CHECKPOINT_EVERY and self._checkpointer is None and not self._memory:
            self._commits = 0
            self._checkpointer = asyncio.get_running_loop().create_task(self._checkpoint())
        events = [ev for _, ev in outcomes if ev is not None]
        if events:
            self._rev = events[-1].kv.mod_revision
            self._hub.publish(events)
        for (_, fut), (result, _ev) in zip(batch, outcomes, strict=True):
            if fut.done():
                continue
            if isinstance(result, KeyValue):
                fut.set_result(result)
            else:
                fut.set_exception(result)

    def _apply_batch(self, ops: builtins.list[_Op]) -> builtins.list[_Outcome]:
        """Apply every op in one IMMEDIATE transaction (writer connection); CAS failures insert nothing."""
        con = self._wcon
        assert con is not None
        rev = self._wrev
        started = time.perf_counter()
        out: list[_Outcome] = []
        con.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                outcome, row = self._apply_one(con, op, rev + 1)
                if row is not None:
                    con.execute(_SQL_INSERT, row)
                    rev += 1
                out.append(outcome)
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
        self._wrev = rev
        self._commit_avg += (time.perf_counter() - started - self._commit_avg) * 0.125
        return out

    async def _checkpoint(self) -> None:
        """Copy the WAL into the database file in the writer thread (writes meanwhile queue behind it)."""
        try:
            if self._wexec is not None:
                await self._in_writer(self._checkpoint_sync)
        finally:
            self._checkpointer = None

    def _checkpoint_sync(self) -> None:
        con = self._wcon
        if con is not None:
            with contextlib.suppress(sqlite3.Error):  # busy readers: the next checkpoint catches up
                con.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @staticmethod
    def _apply_one(con: sqlite3.Connection, op: _Op, rev: int) -> tuple[_Outcome, tuple[Any, ...] | None]:
        kind, key, value, expected = op
        latest = con.execute(_SQL_LATEST, (key,)).fetchone()
        cur = None if latest is None or latest[1] else KeyValue(key, latest[3], latest[0], latest[2])
        if kind == _CREATE:
            if cur is not None:
                return (KeyExists(key), None), None
            kv = KeyValue(key, value, rev, rev)
            prev_id = latest[0] if latest is not None else 0
            return (kv, Event("PUT", kv, None)), (rev, key, 1, 0, rev, prev_id, value)
        if cur is None:
            return (KeyNotFound(key), None), None
        if expected and cur.mod_revision != expected:
            return (RevisionMismatch(cur), None), None
        if kind == _UPDATE:
            kv = KeyValue(key, value, rev, cur.create_revision)
            return (kv, Event("PUT", kv, cur)), (rev, key, 0, 0, cur.create_revision, cur.mod_revision, value)
        kv = KeyValue(key, cur.value, rev, cur.create_revision)
        return (kv, Event("DELETE", kv, cur)), (rev, key, 0, 1, cur.create_revision, cur.mod_revision, cur.value)

    # -- watch ---------------------------------------------------------------------------------------

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """History from ``start_revision`` (<= 0: from the next revision) read from the table, then live.

        A ``start_revision`` above the current revision is allowed: the watch waits for it.
        """
        await self._ensure_started()
        if 0 < start_revision <= self._compacted:
            raise Compacted(start_revision, self._compacted)
        sub = self._hub.subscribe(prefix)
        now = self._rev
        try:
            nxt = start_revision
            while 0 < nxt <= now:
                page = await self._read(self._history_sync, prefix, nxt, now)
                if nxt <= self._compacted:
                    raise Compacted(nxt, self._compacted)
                for ev in page:
                    yield ev
                if len(page) < _HISTORY_PAGE:
                    break
                nxt = page[-1].kv.mod_revision + 1
            async for ev in drain_live(sub, now, start_revision):
                yield ev
        finally:
            self._hub.unsubscribe(sub)

    def _history_sync(self, prefix: str, lo: int, hi: int) -> builtins.list[Event]:
        cond, params = _name_filter(prefix, "", "k.name")
        rows = self._reader().execute(_SQL_HISTORY.format(name=cond), (lo, hi, *params, _HISTORY_PAGE)).fetchall()
        out: list[Event] = []
        for rid, name, created, deleted, crev, prev_rev, value, prev_value in rows:
            kv = KeyValue(name, value, rid, crev)
            prev = None
            if not created and prev_value is not None:
                prev = KeyValue(name, prev_value, prev_rev, crev)
            out.append(Event("DELETE" if deleted else "PUT", kv, prev))
        return out

    # -- compaction ----------------------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        """Compact to ``revision`` (at or below the compaction point: only finishes pending deletions)."""
        await self._ensure_started()
        if revision > self._rev:
            raise FutureRevision(revision, self._rev)
        async with self._compact_lock:
            if revision > self._compacted:
                await self._in_writer(self._set_meta, "compact_rev", revision)
                self._compacted = revision
            target = self._compacted
            while self._compact_done < target:
                hi = min(self._compact_done + _COMPACT_BATCH, target)
                await self._in_writer(self._compact_batch, self._compact_done, hi)
                self._compact_done = hi

    def _set_meta(self, key: str, value: int) -> None:
        assert self._wcon is not None
        self._wcon.execute(_SQL_SET_META, (key, value))

    def _compact_batch(self, lo: int, hi: int) -> None:
        """Writer thread: delete rows superseded by a row in ``(lo, hi]`` and tombstones in it."""
        con = self._wcon
        assert con is not None
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(_SQL_COMPACT_PREV, (lo, hi))
            con.execute(_SQL_COMPACT_TOMBSTONES, (lo, hi))
            con.execute(_SQL_SET_META, ("compact_done", hi))
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise
