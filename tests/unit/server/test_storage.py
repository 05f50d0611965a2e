"""Behaviour of every MVCC storage backend (memory, SQLite file, SQLite :memory:) against base.py's invariants."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinformer.server.storage import (
    Compacted,
    Event,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    MemoryStorage,
    RevisionMismatch,
    SQLiteStorage,
    Storage,
    StorageError,
    WatcherTooSlow,
    open_storage,
    parse_storage_url,
)
from kinformer.server.storage import sqlite as sqlite_storage
from testlib import collect

BACKENDS = ["memory", "sqlite-file", "sqlite-memory"]
DEADLINE = 10.0


def make_storage(kind: str, tmp_path: Path, **kwargs: int) -> Storage:
    if kind == "memory":
        return MemoryStorage(**kwargs)
    if kind == "sqlite-file":
        return SQLiteStorage(str(tmp_path / "kv.db"), **kwargs)
    return SQLiteStorage(":memory:", **kwargs)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    s = make_storage(request.param, tmp_path)
    await s.start()
    yield s
    await s.close()


# -- basic CRUD and compare-and-swap ------------------------------------------------------------------


async def test_create_get_update_delete(store: Storage) -> None:
    assert await store.current_revision() == 0
    kv = await store.create("/a", b"1")
    assert (kv.key, kv.value, kv.mod_revision, kv.create_revision) == ("/a", b"1", 1, 1)
    assert await store.get("/a") == kv
    up = await store.update("/a", b"2", 1)
    assert (up.value, up.mod_revision, up.create_revision) == (b"2", 2, 1)
    gone = await store.delete("/a", 2)
    assert (gone.value, gone.mod_revision, gone.create_revision) == (b"2", 3, 1)
    assert await store.get("/a") is None
    again = await store.create("/a", b"3")
    assert (again.mod_revision, again.create_revision) == (4, 4)
    assert await store.current_revision() == 4


async def test_create_existing_and_missing_keys(store: Storage) -> None:
    await store.create("/a", b"1")
    with pytest.raises(KeyExists):
        await store.create("/a", b"2")
    with pytest.raises(KeyNotFound):
        await store.update("/missing", b"x", 0)
    with pytest.raises(KeyNotFound):
        await store.delete("/missing")
    await store.delete("/a")
    with pytest.raises(KeyNotFound):
        await store.update("/a", b"x", 0)
    with pytest.raises(KeyNotFound):
        await store.delete("/a")
    assert await store.current_revision() == 2  # failed writes never bump the revision


async def test_cas_conflicts(store: Storage) -> None:
    v1 = await store.create("/a", b"1")
    v2 = await store.update("/a", b"2", v1.mod_revision)
    with pytest.raises(RevisionMismatch) as info:
        await store.update("/a", b"stale", v1.mod_revision)
    assert info.value.current == v2
    with pytest.raises(RevisionMismatch):
        await store.delete("/a", v1.mod_revision)
    v3 = await store.update("/a", b"3", 0)  # unconditional
    assert v3.mod_revision == 3
    assert (await store.delete("/a", v3.mod_revision)).mod_revision == 4


# -- reads at revisions, pagination, prefixes ---------------------------------------------------------


async def test_get_and_list_at_old_revisions(store: Storage) -> None:
    await store.create("/p/a", b"a1")  # 1
    await store.create("/p/b", b"b1")  # 2
    await store.update("/p/a", b"a2", 1)  # 3
    await store.delete("/p/b")  # 4
    await store.create("/p/c", b"c1")  # 5
    assert (await store.get("/p/a", 2)).value == b"a1"
    assert (await store.get("/p/a", 3)).value == b"a2"
    assert (await store.get("/p/b", 3)).value == b"b1"
    assert await store.get("/p/b", 4) is None
    assert await store.get("/p/c", 4) is None

    def names(res: object) -> list[tuple[str, bytes]]:
        return [(kv.key, kv.value) for kv in res.kvs]

    assert names(await store.list("/p/", 2)) == [("/p/a", b"a1"), ("/p/b", b"b1")]
    assert names(await store.list("/p/", 4)) == [("/p/a", b"a2")]
    latest = await store.list("/p/")
    assert latest.revision == 5
    assert names(latest) == [("/p/a", b"a2"), ("/p/c", b"c1")]
    assert (await store.list("/p/", 3)).revision == 3
    assert await store.count("/p/", 2) == 2
    assert await store.count("/p/", 4) == 1
    assert await store.count("/p/") == 2


async def test_future_and_negative_revisions(store: Storage) -> None:
    await store.create("/a", b"1")
    with pytest.raises(FutureRevision) as info:
        await store.get("/a", 2)
    assert (info.value.requested, info.value.current) == (2, 1)
    with pytest.raises(FutureRevision):
        await store.list("/", 5)
    with pytest.raises(FutureRevision):
        await store.count("/", 5)
    with pytest.raises(ValueError):
        await store.get("/a", -1)


async def test_list_pagination_and_count(store: Storage) -> None:
    keys = [f"/r/items/k{i:02d}" for i in range(25)]
    for k in reversed(keys):
        await store.create(k, k.encode())
    await store.delete(keys[3])
    live = [k for k in keys if k != keys[3]]
    rev = await store.current_revision()
    seen: list[str] = []
    start_after = ""
    pages = 0
    while True:
        page = await store.list("/r/items/", rev, start_after=start_after, limit=10)
        assert page.revision == rev
        seen.extend(kv.key for kv in page.kvs)
        pages += 1
        if not page.more:
            break
        assert len(page.kvs) == 10
        start_after = page.kvs[-1].key
    assert seen == live
    assert pages == 3
    exact = await store.list("/r/items/", limit=24)
    assert len(exact.kvs) == 24 and not exact.more
    assert await store.count("/r/items/") == 24
    assert await store.count("/r/items/", start_after=keys[9]) == 15
    assert await store.count("/r/items/", rev - 1) == 25  # before the delete
    assert await store.count("/r/items/", start_after="/r/items/k99") == 0


async def test_prefix_isolation(store: Storage) -> None:
    await store.create("/registry/pods/a", b"1")
    await store.create("/registry/pods/b", b"2")
    await store.create("/registry/podsx/a", b"3")
    await store.create("/registry/pod", b"4")
    await store.create("/registry/poda/z", b"5")
    pods = await store.list("/registry/pods/")
    assert [kv.key for kv in pods.kvs] == ["/registry/pods/a", "/registry/pods/b"]
    assert await store.count("/registry/pods/") == 2
    assert [kv.key for kv in (await store.list("/registry/podsx/")).kvs] == ["/registry/podsx/a"]
    assert await store.count("/registry/") == 5
    assert await store.count("") == 5
    start = await store.list("/registry/pods/", start_after="/registry/pod")
    assert [kv.key for kv in start.kvs] == ["/registry/pods/a", "/registry/pods/b"]

    watch = store.watch("/registry/pods/", 1)
    evs = await collect(watch, 2)
    await watch.aclose()
    assert [e.kv.key for e in evs] == ["/registry/pods/a", "/registry/pods/b"]


async def test_unicode_keys_sort_by_code_point(store: Storage) -> None:
    for k in ["/u/é", "/u/z", "/u/\U0001f600", "/u/A"]:
        await store.create(k, b"x")
    assert [kv.key for kv in (await store.list("/u/")).kvs] == sorted(["/u/é", "/u/z", "/u/\U0001f600", "/u/A"])


# -- watch --------------------------------------------------------------------------------------------


async def test_watch_history_then_live_without_gap_or_duplicate(store: Storage) -> None:
    for i in range(20):
        await store.create(f"/w/k{i}", b"0")
    total = 200

    async def writer() -> None:
        for i in range(total - 20):
            key = f"/w/k{i % 20}"
            if i % 7 == 6:
                await store.delete(key)
                await store.create(key, b"again")
                continue
            await store.update(key, str(i).encode(), 0)
            if i % 3 == 0:
                await asyncio.sleep(0)

    async def reader(start: int) -> list[Event]:
        watch = store.watch("/w/", start)
        try:
            out: list[Event] = []
            async with asyncio.timeout(DEADLINE):
                async for ev in watch:
                    out.append(ev)
                    if ev.kv.key == "/w/end":
                        break
            return out
        finally:
            await watch.aclose()

    starts = (5, 1, 20)
    readers = [asyncio.create_task(reader(s)) for s in starts]
    await asyncio.sleep(0)
    await writer()
    end = (await store.create("/w/end", b"x")).mod_revision
    for start, task in zip(starts, readers, strict=True):
        assert [e.revision for e in await task] == list(range(start, end + 1))


async def test_watch_events_carry_prev_kv(store: Storage) -> None:
    await store.create("/e/a", b"1")
    await store.update("/e/a", b"2", 1)
    await store.delete("/e/a")
    await store.create("/e/a", b"3")
    history = store.watch("/e/", 1)
    evs = await collect(history, 4)
    await history.aclose()
    assert [(e.type, e.kv.value, e.revision, e.is_create) for e in evs] == [
        ("PUT", b"1", 1, True),
        ("PUT", b"2", 2, False),
        ("DELETE", b"2", 3, False),
        ("PUT", b"3", 4, True),
    ]
    assert [e.prev_kv.value if e.prev_kv else None for e in evs] == [None, b"1", b"2", None]
    assert evs[2].prev_kv.mod_revision == 2 and evs[2].kv.create_revision == 1


async def test_watch_live_only_and_future_start(store: Storage) -> None:
    await store.create("/l/a", b"1")
    live = store.watch("/l/", 0)
    future = store.watch("/l/", 3)
    first = asyncio.create_task(collect(live, 2))
    later = asyncio.create_task(collect(future, 1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    for i in range(3):
        await store.create(f"/l/k{i}", b"x")
    assert [e.revision for e in await first] == [2, 3]
    assert [e.revision for e in await later] == [3]
    await live.aclose()
    await future.aclose()


async def test_watch_from_compacted_revision_raises_before_yielding(store: Storage) -> None:
    for i in range(5):
        await store.create(f"/c/k{i}", b"x")
    await store.compact(3)
    for start in (1, 3):
        with pytest.raises(Compacted) as info:
            await anext(store.watch("/c/", start))
        assert info.value.compacted == 3
    watch = store.watch("/c/", 4)
    assert [e.revision for e in await collect(watch, 2)] == [4, 5]
    await watch.aclose()


@pytest.mark.parametrize("kind", BACKENDS)
async def test_slow_watcher_overflows(kind: str, tmp_path: Path) -> None:
    store = make_storage(kind, tmp_path, watch_buffer=5)
    await store.start()
    try:
        await store.create("/s/first", b"x")
        watch = store.watch("/s/", 1)
        assert (await anext(watch)).revision == 1  # subscribed now
        for i in range(20):
            await store.create(f"/s/k{i}", b"x")
        got: list[int] = []
        with pytest.raises(WatcherTooSlow):
            async with asyncio.timeout(DEADLINE):
                async for ev in watch:
                    got.append(ev.revision)
        assert got == [2, 3, 4, 5, 6]  # the buffered prefix, no gap
        other = store.watch("/s/", 2)  # re-watching from the next revision catches up from history
        assert [e.revision for e in await collect(other, 20)] == list(range(2, 22))
        await other.aclose()
    finally:
        await store.close()


async def test_close_ends_watches(store: Storage) -> None:
    await store.create("/x/a", b"1")
    watch = store.watch("/x/", 1)
    assert (await anext(watch)).revision == 1
    pending = asyncio.create_task(collect(watch, 5))
    await asyncio.sleep(0)
    await store.close()
    assert await pending == []


# -- compaction ---------------------------------------------------------------------------------------


async def test_compaction_keeps_latest_values(store: Storage) -> None:
    for i in range(10):
        await store.create(f"/k/{i}", b"v0")
    for rnd in range(1, 4):
        for i in range(10):
            await store.update(f"/k/{i}", f"v{rnd}".encode(), 0)
    for i in range(0, 10, 2):
        await store.delete(f"/k/{i}")
    await store.create("/k/0", b"reborn")
    before = await store.list("/k/")
    rev = await store.current_revision()
    await store.compact(rev - 1)
    assert await store.compacted_revision() == rev - 1
    assert await store.list("/k/") == before
    at_point = await store.list("/k/", rev - 1)
    assert [kv.key for kv in at_point.kvs] == [f"/k/{i}" for i in range(1, 10, 2)]
    assert all(kv.value == b"v3" for kv in at_point.kvs)
    with pytest.raises(Compacted):
        await store.get("/k/1", rev - 2)
    with pytest.raises(Compacted):
        await store.list("/k/", 5)
    await store.compact(3)  # below the point: no-op
    assert await store.compacted_revision() == rev - 1
    with pytest.raises(FutureRevision):
        await store.compact(rev + 1)
    await store.compact(rev)
    assert await store.list("/k/") == before
    kv = await store.update("/k/1", b"after", 0)
    assert kv.mod_revision == rev + 1 and kv.create_revision == 2


async def test_memory_history_limit_compacts_automatically() -> None:
    store = MemoryStorage(history_limit=10)
    await store.start()
    await store.create("/h/a", b"0")
    for i in range(100):
        await store.update("/h/a", str(i).encode(), 0)
    rev = await store.current_revision()
    compacted = await store.compacted_revision()
    assert rev - 13 <= compacted <= rev - 10
    assert (await store.get("/h/a", compacted)).value == str(compacted - 2).encode()
    with pytest.raises(Compacted):
        await store.get("/h/a", compacted - 1)
    await store.close()


# -- concurrency --------------------------------------------------------------------------------------


async def test_memory_history_is_not_tracked_by_the_cyclic_collector() -> None:
    import gc

    store = MemoryStorage()
    await store.start()
    kv = await store.create("/registry/core/configmaps/default/a", b"1")
    kv2 = await store.update(kv.key, b"2", kv.mod_revision)
    events = [ev async for ev in _history(store, kv.key)]
    assert [ev.kv for ev in events] == [kv, kv2] and events[1].prev_kv == kv
    assert not any(gc.is_tracked(o) for o in (kv, kv2, *events))
    await store.close()


async def _history(store: Storage, key: str) -> AsyncIterator[Event]:
    async for ev in store.watch(key, 1):
        yield ev
        if ev.kv.mod_revision == 2:
            return


async def test_concurrent_writers(store: Storage) -> None:
    results = await asyncio.gather(*(store.create(f"/cc/{i}", b"x") for i in range(64)))
    revs = sorted(kv.mod_revision for kv in results)
    assert revs == list(range(1, 65))
    base = await store.create("/cc/contended", b"0")

    async def racer(i: int) -> bool:
        try:
            await store.update("/cc/contended", str(i).encode(), base.mod_revision)
            return True
        except RevisionMismatch:
            return False

    wins = await asyncio.gather(*(racer(i) for i in range(32)))
    assert sum(wins) == 1
    assert await store.current_revision() == 66
    mixed = await asyncio.gather(
        *(store.update(f"/cc/{i}", b"y", 0) for i in range(32)),
        *(store.delete(f"/cc/{i}") for i in range(32, 64)),
    )
    assert sorted(kv.mod_revision for kv in mixed) == list(range(67, 131))
    assert await store.count("/cc/") == 33


# -- persistence ----------------------------------------------------------------------------------------


async def test_sqlite_restart_persists_everything(tmp_path: Path) -> None:
    path = str(tmp_path / "restart.db")
    async with SQLiteStorage(path) as store:
        for i in range(10):
            await store.create(f"/p/{i}", str(i).encode())
        await store.delete("/p/9")
        await store.compact(5)
        before = await store.list("/p/")
    async with SQLiteStorage(path) as store:
        assert await store.current_revision() == 11
        assert await store.compacted_revision() == 5
        assert await store.list("/p/") == before
        with pytest.raises(Compacted):
            await store.get("/p/1", 4)
        kv = await store.create("/p/new", b"x")
        assert kv.mod_revision == 12
        await store.compact(12)  # the latest row is kept; the counter must not go back on restart
        await store.delete("/p/new")
        await store.compact(13)
    async with SQLiteStorage(path) as store:
        assert await store.current_revision() == 13
        assert (await store.create("/p/next", b"x")).mod_revision == 14


async def test_a_closed_sqlite_file_opens_again_as_it_was(tmp_path: Path) -> None:
    store = SQLiteStorage(str(tmp_path / "again.db"))
    await store.start()
    ended = store.watch("/a/", 1)
    await store.create("/a/1", b"one")
    assert (await anext(ended)).kv.key == "/a/1"
    await store.close()
    with pytest.raises(StorageError, match="closed"):
        await store.create("/a/2", b"two")
    await store.start()
    try:
        assert (await store.get("/a/1")).value == b"one"
        assert (await store.create("/a/2", b"two")).mod_revision == 2
        assert [ev.kv.key async for ev in ended] == []  # the watch the close ended stays ended
        live = store.watch("/a/", 3)
        await store.create("/a/3", b"three")
        assert (await anext(live)).kv.key == "/a/3"
        await live.aclose()
    finally:
        await store.close()
    memory = SQLiteStorage(":memory:")
    await memory.start()
    await memory.close()
    with pytest.raises(StorageError, match="in-memory SQLite database ends with its close"):
        await memory.start()


async def test_open_storage_urls(tmp_path: Path) -> None:
    assert isinstance(open_storage("memory"), MemoryStorage)
    assert isinstance(open_storage("memory://"), MemoryStorage)
    mem = open_storage("sqlite://:memory:")
    assert isinstance(mem, SQLiteStorage) and mem.path == ":memory:"
    absolute = open_storage(f"sqlite://{tmp_path}/a.db")
    assert isinstance(absolute, SQLiteStorage) and absolute.path == f"{tmp_path}/a.db"
    relative = open_storage("sqlite://data/b.db")
    assert isinstance(relative, SQLiteStorage) and relative.path == "data/b.db"
    for bad in ("etcd://", "etcd://localhost", "etcd://a:1,b", "etcd://http://a:1", "postgres://x", "sqlite://", ""):
        with pytest.raises(ValueError, match="unsupported storage URL") as refused:
            open_storage(bad)
        for form in ("memory", "sqlite:///", "sqlite://:memory:", "etcd://HOST:PORT"):  # every accepted form
            assert form in str(refused.value), refused.value
    assert parse_storage_url("etcd://a:1,[::1]:2379/kine/") == ("etcd", "/kine", ["a:1", "[::1]:2379"])


# -- model-based property ------------------------------------------------------------------------------

_KEYS = ["/m/a", "/m/b", "/m/c", "/n/a"]
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(_KEYS)),
        st.tuples(st.just("update"), st.sampled_from(_KEYS), st.booleans()),
        st.tuples(st.just("delete"), st.sampled_from(_KEYS), st.booleans()),
        st.tuples(st.just("compact"), st.integers(0, 40)),
    ),
    max_size=40,
)


async def _run_model(store: Storage, ops: list[tuple]) -> None:
    model: dict[str, tuple[bytes, int, int]] = {}  # key -> (value, mod, create)
    states: list[dict[str, tuple[bytes, int, int]]] = [{}]  # states[rev]
    compacted = 0
    for n, op in enumerate(ops):
        kind, arg = op[0], op[1]
        value = f"v{n}".encode()
        cur = model.get(arg) if kind != "compact" else None
        rev = len(states)
        wrote = False
        if kind == "create":
            if cur is None:
                kv = await store.create(arg, value)
                model[arg] = (value, rev, rev)
                wrote = True
                assert (kv.mod_revision, kv.create_revision) == (rev, rev)
            else:
                with pytest.raises(KeyExists):
                    await store.create(arg, value)
        elif kind in ("update", "delete"):
            expected = (cur[1] if op[2] else cur[1] + 1000) if cur else 0
            call = store.update(arg, value, expected) if kind == "update" else store.delete(arg, expected)
            if cur is None:
                with pytest.raises(KeyNotFound):
                    await call
            elif not op[2]:
                with pytest.raises(RevisionMismatch):
                    await call
            else:
                kv = await call
                assert kv.mod_revision == rev
                wrote = True
                if kind == "update":
                    model[arg] = (value, rev, cur[2])
                else:
                    del model[arg]
        else:
            target = min(arg, len(states) - 1)
            await store.compact(target)
            compacted = max(compacted, target)
            continue
        if wrote:
            states.append(dict(model))
    current = len(states) - 1
    assert await store.current_revision() == current
    assert await store.compacted_revision() == compacted
    for rev in range(max(compacted, 1), current + 1):
        want = states[rev]
        for prefix in ("/m/", "/"):
            got = await store.list(prefix, rev)
            assert {kv.key: (kv.value, kv.mod_revision, kv.create_revision) for kv in got.kvs} == {
                k: v for k, v in want.items() if k.startswith(prefix)
            }
        for key in _KEYS:
            kv = await store.get(key, rev)
            assert (None if kv is None else (kv.value, kv.mod_revision, kv.create_revision)) == want.get(key)
    if current > compacted:
        watch = store.watch("/", compacted + 1)
        evs = await collect(watch, current - compacted)
        await watch.aclose()
        assert [e.revision for e in evs] == list(range(compacted + 1, current + 1))


@pytest.mark.parametrize("kind", ["memory", "sqlite-memory"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_random_ops_agree_with_dict_model(kind: str, ops: list[tuple], tmp_path: Path) -> None:
    async def run() -> None:
        store = make_storage(kind, tmp_path)
        await store.start()
        try:
            await _run_model(store, ops)
        finally:
            await store.close()

    asyncio.run(run())


async def test_writes_after_close_fail(store: Storage) -> None:
    await store.create("/z/a", b"1")
    await store.close()
    with pytest.raises(StorageError):
        await store.create("/z/b", b"2")


@pytest.mark.parametrize("kind", ["sqlite-file", "sqlite-memory"])
async def test_sqlite_paged_history_and_batched_compaction(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_storage, "_HISTORY_PAGE", 5)
    monkeypatch.setattr(sqlite_storage, "_COMPACT_BATCH", 7)
    async with make_storage(kind, tmp_path) as store:
        for i in range(30):
            await store.create(f"/b/{i % 4}/{i}", b"x")
            await store.create(f"/other/{i}", b"y")
        for i in range(0, 30, 3):
            await store.delete(f"/b/{i % 4}/{i}")
        end = await store.current_revision()
        watch = store.watch("/b/", 1)
        evs = await collect(watch, 40)
        await watch.aclose()
        assert [e.revision for e in evs] == [r for r in range(1, end + 1) if r % 2 == 1 or r > 60]
        before = await store.list("/")
        await store.compact(end - 3)
        assert await store.list("/") == before

        async def rows() -> int:
            return await store._read(lambda: store._reader().execute("SELECT COUNT(*) FROM kv").fetchone()[0])

        # the last 3 revisions are deletes: their tombstones and the rows they supersede remain
        assert await rows() == len(before.kvs) + 6
        await store.compact(end)
        assert await rows() == len(before.kvs)
        assert await store.list("/") == before
