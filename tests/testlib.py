"""Helpers shared by the unit, integration and conformance tests.

``tests/`` is on ``sys.path`` while pytest runs (``tests/conftest.py`` puts it there, as ``tests/chaos``
is for ``chaoslib``), so test modules import this as ``from testlib import ...``.

Every wait here is bounded: what does not come in time fails the test (AssertionError or TimeoutError)
instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import inspect
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from kinformer.clock import FakeClock
from kinformer.errors import AlreadyExists, Conflict, NotFound

if TYPE_CHECKING:
    from kinformer.server import APIServer
    from kinformer.server.storage.base import Event

_T = TypeVar("_T")

__all__ = ["LeaseStore", "call", "cm", "collect", "configmap", "cyclic_garbage", "running", "wait_until",
           "wait_until_sync"]


async def wait_until(cond: Callable[[], bool | Awaitable[bool]], timeout: float = 15.0, what: str = "condition",
                     interval: float | None = None) -> None:
    """Poll ``cond`` until it is true, for at most ``timeout`` seconds of real time.

    ``cond`` may be a plain predicate or return an awaitable (an HTTP check, say). Plain predicates are
    polled every millisecond; awaitable ones, each a round trip, every 20 ms, unless ``interval`` is given.
    The default deadline is generous (a loaded 2-core machine): it only delays a failure, never a pass.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = cond()
        awaited = inspect.isawaitable(result)
        if awaited:
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval if interval is not None else (0.02 if awaited else 0.001))


@contextlib.asynccontextmanager
async def running(mgr: Any) -> AsyncIterator[asyncio.Task[None]]:
    """Run a Manager in a task until the block ends (then stop it, bounded); yields once it is ready."""
    task = asyncio.create_task(mgr.run())
    try:
        await wait_until(lambda: mgr.ready() or task.done(), what="manager ready")
        if task.done():
            task.result()
        yield task
    finally:
        mgr.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)


async def served(client: Any, resource: str) -> bool:
    """Whether ``client``'s discovery, asked afresh, finds ``resource`` (a CRD is served once it does)."""
    client.invalidate_discovery()
    try:
        await client.resolve(resource)
    except LookupError:
        return False
    return True


def wait_until_sync(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "condition",
                    interval: float = 0.05) -> None:
    """Blocking form of :func:`wait_until` for tests that drive servers in threads or subprocesses."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


async def collect(it: AsyncIterator[_T], n: int, timeout: float = 20.0) -> list[_T]:
    """The first ``n`` items of ``it`` (fewer if it ends first); fails with TimeoutError after ``timeout`` s."""
    out: list[_T] = []
    async with asyncio.timeout(timeout):
        async for item in it:
            out.append(item)
            if len(out) == n:
                break
    return out


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None,
               params: dict[str, str] | None = None, ctype: str = "application/json") -> tuple[int, Any]:
    """Send ``body`` (JSON-encoded unless None) and return the status code and the decoded JSON reply."""
    data = json.dumps(body).encode() if body is not None else None
    async with http.request(method, path, data=data, params=params, headers={"Content-Type": ctype}) as r:
        return r.status, await r.json()


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[list[Any]]:
    """The objects the block left that only the cyclic collector frees (reference cycles nothing reaches).

    The yielded list is filled when the block exits. The collector is off inside the block (so nothing it
    leaves is freed unseen) and what earlier code left is collected before it starts, so the count is the
    block's own: deterministic for deterministic code.
    """
    found: list[Any] = []
    enabled, flags = gc.isenabled(), gc.get_debug()
    gc.collect()
    gc.disable()
    try:
        yield found
        gc.set_debug(flags | gc.DEBUG_SAVEALL)
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(flags)
        if enabled:
            gc.enable()


def cancelled_future() -> asyncio.Future[None]:
    """A future that is already cancelled (awaiting it raises CancelledError in the awaiting task)."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fut.cancel()
    return fut


def direct_batches(informer: Any) -> list[int]:
    """A list that records the size of every batch handed to ``informer``'s direct path (its
    ``_handle_direct``, still called)."""
    sizes: list[int] = []
    handle = informer._handle_direct

    def spy(deltas: list[Any]) -> None:
        sizes.append(len(deltas))
        handle(deltas)

    informer._handle_direct = spy
    return sizes


def cm(name: str, ns: str = "default", value: str = "1", **labels: str) -> dict[str, Any]:
    """A ConfigMap as cache-level tests feed it to stores and informers: metadata, labels and ``data.v``."""
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"v": value}}


def configmap(name: str, ns: str = "default", **data: str) -> dict[str, Any]:
    """A complete ConfigMap object (apiVersion and kind included) to send to an API server."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


class LeaseStore:
    """The API calls a LeaderElector makes, on Leases held in memory: get/create/replace with resourceVersion CAS.

    Faults: ``fail`` makes every call raise OSError (the server unreachable); ``hang_gets`` makes ``get`` never
    return (``get_entered`` is set when one starts); ``get_latency`` steps ``clock`` by that much per ``get``.
    """

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.fail = False
        self.hang_gets = False
        self.get_entered = asyncio.Event()
        self.get_latency = 0.0

    def _check(self) -> None:
        if self.fail:
            raise OSError("connection refused")

    async def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._check()
        if self.hang_gets:
            self.get_entered.set()
            await asyncio.Event().wait()  # a request that never returns (client timeout is 60 s by default)
        if self.get_latency and self.clock is not None:
            self.clock.step(self.get_latency)  # the request took this long
        try:
            return copy.deepcopy(self.objects[(namespace or "", name)])
        except KeyError:
            raise NotFound(f'leases "{name}" not found') from None

    async def create(self, resource: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self._check()
        key = (namespace or "", body["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists("exists")
        return self._store(key, body)

    async def replace(self, resource: str, body: dict[str, Any], name: str | None = None,
                      namespace: str | None = None) -> dict[str, Any]:
        self._check()
        key = (namespace or "", name or body["metadata"]["name"])
        if key not in self.objects:
            raise NotFound("gone")
        if body["metadata"].get("resourceVersion") != self.objects[key]["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        return self._store(key, body)

    def _store(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        return copy.deepcopy(obj)


# -- embedded-server helpers for HTTP-level tests


async def call_raw(http: aiohttp.ClientSession, method: str, path: str, data: bytes,
                   ctype: str) -> tuple[int, Any]:
    """Send raw ``data`` as ``ctype`` and return the status code and the decoded JSON reply."""
    async with http.request(method, path, data=data, headers={"Content-Type": ctype}) as r:
        return r.status, await r.json()


async def settle(server: APIServer, rv: str | int) -> None:
    """Wait until the cache has applied ``rv`` and the garbage collector has nothing queued."""
    assert await server.cache.wait_for(int(rv), 5.0)
    await server.gc.wait_idle(5.0)


def ref(obj: dict[str, Any], **extra: Any) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"], **extra}


class CacheGate:
    """Holds the watch cache's source events (in order) while closed, simulating a lagging cache."""

    def __init__(self, server: APIServer) -> None:
        self.cache = server.cache
        self.real = server.cache._apply
        self.held: deque[Event] = deque()
        self.closed = False
        server.cache._apply = self._apply  # type: ignore[method-assign]

    def _apply(self, ev: Event) -> None:
        if self.closed or self.held:
            self.held.append(ev)
        else:
            self.real(ev)

    def close(self) -> None:
        self.closed = True

    def open(self) -> None:
        self.closed = False
        while self.held:
            self.real(self.held.popleft())


class Counted(str):
    """A string that counts the equality comparisons made with it (how a scan of a list shows)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__
