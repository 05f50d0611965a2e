"""The etcd storage backend against real etcd processes (single member and a 3-member cluster) on loopback.

The backend-parametrized cases of tests/unit/server/test_storage.py run here too, against a fresh etcd each.
An empty etcd is at revision 1 while those cases expect 0, so they see the backend through
:class:`_Shifted`, which only renumbers revisions by one; the etcd-specific tests use the backend as is.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import inspect
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from kinformer.server.storage import (
    Compacted,
    EtcdStorage,
    Event,
    FutureRevision,
    KeyExists,
    KeyValue,
    ListResult,
    RevisionMismatch,
    Storage,
    StorageError,
    open_storage,
)
from testlib import collect

ETCD = shutil.which("etcd")
pytestmark = pytest.mark.skipif(ETCD is None, reason="etcd binary not found (apt-get install etcd-server)")
DEADLINE = 20.0


# -- etcd processes -----------------------------------------------------------------------------------


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (all held open until every one is picked)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


class EtcdMember:
    """One etcd process on loopback with its own data dir (in /dev/shm when available: no disk syncs)."""

    def __init__(self, name: str, client_port: int, peer_port: int, cluster: str) -> None:
        self.name = name
        self.client_url = f"http://127.0.0.1:{client_port}"
        self.endpoint = f"127.0.0.1:{client_port}"
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.data_dir = tempfile.mkdtemp(prefix=f"etcd-{name}-", dir=base)
        peer_url = f"http://127.0.0.1:{peer_port}"
        self._log = open(os.path.join(self.data_dir, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            [
                ETCD or "etcd",
                "--name", name,
                "--data-dir", os.path.join(self.data_dir, "data"),
                "--listen-client-urls", self.client_url,
                "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", peer_url,
                "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", cluster,
                "--initial-cluster-state", "new",
                "--heartbeat-interval", "50",
                "--election-timeout", "500",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    async def wait_healthy(self, timeout: float = DEADLINE) -> None:
        """Poll /health until it reports true (bounded); fail with the log tail otherwise."""
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    async with session.get(self.client_url + "/health", timeout=aiohttp.ClientTimeout(1)) as r:
                        if (await r.json(content_type=None)).get("health") == "true":
                            return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"etcd {self.name} did not become healthy:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return Path(self.data_dir, "etcd.log").read_bytes()[-2000:].decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def start_single() -> EtcdMember:
    client, peer = _free_ports(2)
    return EtcdMember("default", client, peer, f"default=http://127.0.0.1:{peer}")


class _Pool:
    """Fresh single-member etcds, one always starting in the background so a test rarely waits for one."""

    def __init__(self) -> None:
        self._spare: EtcdMember | None = None
        self.members: list[EtcdMember] = []

    def take(self) -> EtcdMember:
        member = self._spare or start_single()
        self._spare = start_single()
        self.members.append(member)
        return member

    def close(self) -> None:
        for m in [*self.members, *([self._spare] if self._spare else [])]:
            m.cleanup()


@pytest.fixture(scope="module")
def etcd_pool() -> Iterator[_Pool]:
    pool = _Pool()
    yield pool
    pool.close()


@pytest.fixture
async def etcd(etcd_pool: _Pool) -> AsyncIterator[EtcdMember]:
    member = etcd_pool.take()
    try:
        await member.wait_healthy()
        yield member
    finally:
        member.cleanup()


async def _start_cluster() -> list[EtcdMember]:
    """Three members on distinct free ports; started again on fresh ports (at most 3 tries) when another
    process took one of them between picking and binding."""
    for attempt in range(3):
        free = _free_ports(6)
        ports = list(zip(free[::2], free[1::2], strict=True))
        spec = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(ports))
        members = [EtcdMember(f"m{i}", client, peer, spec) for i, (client, peer) in enumerate(ports)]
        try:
            await asyncio.gather(*(m.wait_healthy() for m in members))
            return members
        except RuntimeError as e:
            for m in members:
                m.cleanup()
            if "address already in use" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
async def cluster() -> AsyncIterator[list[EtcdMember]]:
    members = await _start_cluster()
    try:
        yield members
    finally:
        for m in members:
            m.cleanup()


# -- the shared backend cases, through a revision renumbering --------------------------------------


def _down(kv: KeyValue | None) -> KeyValue | None:
    if kv is None:
        return None
    return KeyValue(kv.key, kv.value, kv.mod_revision - 1, kv.create_revision - 1)


def _up(revision: int) -> int:
    return revision + 1 if revision > 0 else revision


@contextlib.contextmanager
def _errors_down() -> Iterator[None]:
    try:
        yield
    except Compacted as exc:
        raise Compacted(exc.requested - 1, exc.compacted - 1) from None
    except FutureRevision as exc:
        raise FutureRevision(exc.requested - 1, exc.current - 1) from None
    except RevisionMismatch as exc:
        raise RevisionMismatch(_down(exc.current)) from None


class _Shifted(Storage):
    """An EtcdStorage whose revisions read one lower, so a fresh etcd starts at 0 like the other backends."""

    def __init__(self, inner: EtcdStorage) -> None:
        self.inner = inner

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def current_revision(self) -> int:
        return await self.inner.current_revision() - 1

    async def compacted_revision(self) -> int:
        return max(await self.inner.compacted_revision() - 1, 0)

    async def get(self, key: str, revision: int = 0) -> KeyValue | None:
        with _errors_down():
            return _down(await self.inner.get(key, _up(revision)))

    async def list(self, prefix: str, revision: int = 0, start_after: str = "", limit: int = 0) -> ListResult:
        with _errors_down():
            res = await self.inner.list(prefix, _up(revision), start_after, limit)
        return ListResult([_down(kv) for kv in res.kvs], res.revision - 1, res.more)

    async def count(self, prefix: str, revision: int = 0, start_after: str = "") -> int:
        with _errors_down():
            return await self.inner.count(prefix, _up(revision), start_after)

    async def create(self, key: str, value: bytes) -> KeyValue:
        return _down(await self.inner.create(key, value))

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        with _errors_down():
            return _down(await self.inner.update(key, value, _up(expected_revision)))

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        with _errors_down():
            return _down(await self.inner.delete(key, _up(expected_revision)))

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        with _errors_down():
            async with contextlib.aclosing(self.inner.watch(prefix, _up(start_revision))) as events:
                async for ev in events:
                    yield Event(ev.type, _down(ev.kv), _down(ev.prev_kv))

    async def compact(self, revision: int) -> None:
        if revision > 0:
            with _errors_down():
                await self.inner.compact(revision + 1)


def _load_shared_cases() -> dict[str, object]:
    path = Path(__file__).resolve().parents[1] / "unit" / "server" / "test_storage.py"
    spec = importlib.util.spec_from_file_location("kinformer_shared_storage_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


_SHARED = _load_shared_cases()
# every case that takes just the backend-parametrized ``store`` fixture runs here against etcd
for _name, _fn in list(_SHARED.items()):
    if _name.startswith("test_") and callable(_fn) and list(inspect.signature(_fn).parameters) == ["store"]:
        globals()[f"{_name}_etcd"] = _fn


@pytest.fixture
async def store(etcd: EtcdMember) -> AsyncIterator[Storage]:
    s = _Shifted(EtcdStorage([etcd.endpoint]))
    await s.start()
    yield s
    await s.close()


@pytest.mark.parametrize("seed", range(4))
async def test_random_ops_agree_with_dict_model_etcd(seed: int, store: Storage) -> None:
    rng = random.Random(seed)
    keys = ["/m/a", "/m/b", "/m/c", "/n/a"]
    ops: list[tuple] = []
    for _ in range(40):
        kind = rng.choice(["create", "create", "update", "delete", "compact"])
        if kind == "compact":
            ops.append((kind, rng.randint(0, 40)))
        elif kind == "create":
            ops.append((kind, rng.choice(keys)))
        else:
            ops.append((kind, rng.choice(keys), rng.random() < 0.8))
    await _SHARED["_run_model"](store, ops)


# -- etcd-specific behaviour ----------------------------------------------------------------------------


async def test_revisions_are_etcd_revisions_and_prefixes_isolate(etcd: EtcdMember) -> None:
    a = open_storage(f"etcd://{etcd.endpoint}/tenant-a")
    b = open_storage(f"etcd://127.0.0.1:1,{etcd.endpoint}/tenant-b")  # the first endpoint is dead
    assert isinstance(a, EtcdStorage) and a.prefix == "/tenant-a"
    async with a, b:
        assert await a.current_revision() == 1  # an empty etcd
        kv = await a.create("/registry/pods/x", b"a")
        assert (kv.mod_revision, kv.create_revision) == (2, 2)
        await b.create("/registry/pods/x", b"b")
        assert await a.current_revision() == await b.current_revision() == 3
        assert [(k.key, k.value) for k in (await a.list("/registry/")).kvs] == [("/registry/pods/x", b"a")]
        assert await b.count("") == 1
        async with aiohttp.ClientSession() as raw:
            body = {"key": "AA==", "range_end": "AA==", "keys_only": True}
            async with raw.post(etcd.client_url + "/v3/kv/range", json=body) as resp:
                stored = sorted(base64.b64decode(d["key"]) for d in (await resp.json())["kvs"])
        assert stored == [b"/tenant-a/registry/pods/x", b"/tenant-b/registry/pods/x"]


async def test_start_fails_when_no_endpoint_answers() -> None:
    s = EtcdStorage([f"127.0.0.1:{_free_port()}"], request_timeout=0.5)
    with pytest.raises(StorageError, match="no etcd endpoint"):
        await s.start()
    await s.close()


async def test_watch_reconnects_after_stream_drop_without_gap_or_duplicate(etcd: EtcdMember) -> None:
    async with EtcdStorage([etcd.endpoint]) as s:
        first = (await s.create("/w/k0", b"0")).mod_revision
        watch = s.watch("/w/", first)
        got = [(await anext(watch)).revision]
        for round_ in range(5):
            for i in range(10):
                await s.update("/w/k0", f"{round_}-{i}".encode(), 0)
                await s.create(f"/w/r{round_}-{i}", b"x")
            assert s._watches, "the watch stream is open"
            for resp in list(s._watches):
                resp.close()  # the connection drops mid-stream
            got.extend(e.revision for e in await collect(watch, 20))
        await watch.aclose()
        assert got == list(range(first, first + 101))


async def test_watch_start_and_reconnect_report_compaction(etcd: EtcdMember) -> None:
    async with EtcdStorage([etcd.endpoint]) as writer, EtcdStorage([etcd.endpoint]) as other:
        await writer.create("/c/k0", b"x")  # revision 2
        watch = other.watch("/c/", 2)
        assert (await anext(watch)).revision == 2
        for i in range(5):
            await writer.create(f"/d/k{i}", b"x")  # revisions 3..7, not under the watched prefix
        await writer.compact(5)
        assert other._watches, "the watch stream is open"
        for resp in list(other._watches):
            resp.close()  # reopening from 3 now hits the compaction
        with pytest.raises(Compacted) as info:
            await collect(watch, 1)
        assert (info.value.requested, info.value.compacted) == (3, 5)
        # other clients learn the exact point from etcd, not only from their own compactions
        async with EtcdStorage([etcd.endpoint]) as fresh:
            assert await fresh.compacted_revision() == 5
            with pytest.raises(Compacted) as info:
                await anext(fresh.watch("/d/", 5))
            assert info.value.compacted == 5
            assert [e.revision for e in await collect(fresh.watch("/d/", 6), 2)] == [6, 7]
        async with EtcdStorage([etcd.endpoint]) as fresh2:
            with pytest.raises(Compacted) as info:
                await anext(fresh2.watch("/d/", 4))  # etcd itself reports it (the watch opens at 3)
            assert (info.value.requested, info.value.compacted) == (4, 5)
            with pytest.raises(Compacted) as info:
                await fresh2.get("/c/k0", 3)
            assert (info.value.requested, info.value.compacted) == (3, 5)
            await fresh2.compact(4)  # below the point: a no-op
            assert await fresh2.compacted_revision() == 5
            with pytest.raises(FutureRevision):
                await fresh2.compact(100)


async def test_watch_from_zero_sees_everything_after_this_clients_writes(etcd: EtcdMember) -> None:
    async with EtcdStorage([etcd.endpoint]) as s:
        before = await s.create("/z/a", b"1")
        watch = s.watch("/z/", 0)
        task = asyncio.create_task(collect(watch, 2))
        await asyncio.sleep(0)
        created = [await s.create(f"/z/k{i}", b"x") for i in range(2)]  # may race the watch's creation
        assert [e.revision for e in await task] == [kv.mod_revision for kv in created]
        assert before.mod_revision < created[0].mod_revision
        await watch.aclose()
        async with EtcdStorage([etcd.endpoint]) as other:  # history this client never saw, then compacted
            for i in range(3):
                await other.create(f"/z/o{i}", b"x")
            await other.compact(await other.current_revision())
        live = s.watch("/z/", 0)
        task = asyncio.create_task(collect(live, 1))
        await asyncio.sleep(0)
        late = await s.create("/z/late", b"x")
        assert [e.revision for e in await task] == [late.mod_revision]
        await live.aclose()


async def test_writes_fail_over_from_a_dead_endpoint(etcd: EtcdMember) -> None:
    dead = f"127.0.0.1:{_free_port()}"
    async with EtcdStorage([dead, etcd.endpoint, dead]) as s:
        kvs = await asyncio.gather(*(s.create(f"/f/{i}", b"x") for i in range(20)))
        assert sorted(kv.mod_revision for kv in kvs) == list(range(2, 22))
        with pytest.raises(KeyExists):
            await s.create("/f/0", b"y")
        watch = s.watch("/f/", 2)
        assert len(await collect(watch, 20)) == 20
        await watch.aclose()


# -- a 3-member cluster ------------------------------------------------------------------------------


async def _leader_first(members: list[EtcdMember]) -> list[EtcdMember]:
    """The members, the current raft leader first."""
    async with aiohttp.ClientSession() as session:
        async with session.post(members[0].client_url + "/v3/maintenance/status", json={}) as resp:
            leader = (await resp.json())["leader"]
        ids = {}
        for m in members:
            async with session.post(m.client_url + "/v3/maintenance/status", json={}) as resp:
                ids[m.name] = (await resp.json())["header"]["member_id"]
    return sorted(members, key=lambda m: ids[m.name] != leader)


async def test_cluster_watch_across_members_and_member_kill(cluster: list[EtcdMember]) -> None:
    m0, m1, m2 = await _leader_first(cluster)  # killing m0 also forces an election
    writer = EtcdStorage([m0.endpoint, m1.endpoint, m2.endpoint], request_timeout=5.0)
    remote = EtcdStorage([m1.endpoint])
    watcher = EtcdStorage([m0.endpoint, m2.endpoint, m1.endpoint], request_timeout=5.0)
    async with writer, remote, watcher:
        kv = await writer.create("/load/hello", b"m0")
        seen_remote = remote.watch("/load/", kv.mod_revision)
        assert (await anext(seen_remote)).kv == kv  # written through m0, watched on m1
        await seen_remote.aclose()

        start = kv.mod_revision
        watch = watcher.watch("/load/", start)
        seen: dict[str, tuple[int, bytes]] = {}

        async def watch_all() -> None:
            async for ev in watch:
                seen[ev.kv.key] = (ev.revision, ev.kv.value)
                if ev.kv.key == "/load/end":
                    return

        watching = asyncio.create_task(watch_all())
        acked: dict[str, KeyValue] = {}
        after_kill = 0
        killed = asyncio.Event()
        warmed_up = asyncio.Event()
        unknown: list[str] = []  # keys whose write's outcome was unknown

        async def resync(key: str) -> None:
            """After a write with an unknown outcome, learn the key's real state (retrying through elections)."""
            while True:
                try:
                    current = await writer.get(key)
                except StorageError:
                    await asyncio.sleep(0.05)
                    continue
                if current is None:
                    acked.pop(key, None)
                else:
                    acked[key] = current
                return

        async def load(worker: int) -> None:
            nonlocal after_kill
            i = 0
            while after_kill < 150:
                key = f"/load/w{worker}-{i % 25}"
                i += 1
                try:
                    if key in acked:
                        kv = await writer.update(key, f"{worker}-{i}".encode(), acked[key].mod_revision)
                    else:
                        kv = await writer.create(key, f"{worker}-{i}".encode())
                except (StorageError, RevisionMismatch, KeyExists):
                    unknown.append(key)
                    await resync(key)  # an in-flight write's outcome is unknown: read what the store has
                    continue
                acked[key] = kv
                if len(acked) >= 40:
                    warmed_up.set()
                if killed.is_set():
                    after_kill += 1

        async with asyncio.timeout(60):
            workers = [asyncio.create_task(load(w)) for w in range(4)]
            await warmed_up.wait()
            m0.kill()  # the endpoint both the writer and the watcher are using
            killed.set()
            await asyncio.gather(*workers)
            end = await writer.create("/load/end", b"")
            await watching
        await watch.aclose()

        assert writer.endpoints[writer._ep] != m0.client_url  # both failed over
        assert watcher.endpoints[watcher._ep] != m0.client_url
        async with EtcdStorage([m2.endpoint, m1.endpoint]) as check:
            for key, kv in acked.items():
                assert await check.get(key) == kv, key
            listed = await check.list("/load/")
            assert listed.revision >= end.mod_revision
        for key, kv in acked.items():
            assert seen[key] == (kv.mod_revision, kv.value), key
