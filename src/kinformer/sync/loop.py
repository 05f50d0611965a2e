"""The event-loop thread behind the blocking facade, and the adapters that call into it.

A :class:`LoopThread` runs one asyncio event loop in a daemon thread it owns; :meth:`LoopThread.run` submits a
coroutine to it and blocks the calling thread (only) until the coroutine ends, returning its result or raising
its exception — the very object the coroutine raised, so ``except ki.NotFound`` works unchanged.

Invariants: every coroutine submitted runs on the loop thread; a caller interrupted while waiting (Ctrl-C) cancels
the coroutine it waited for; :meth:`LoopThread.close` cancels and awaits every task still on the loop, closes it
and joins the thread; calling :meth:`LoopThread.run` from the loop thread itself (it would wait for itself) or
after close raises RuntimeError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["BlockingIterator", "LoopThread", "blocking", "blocking_iterator", "cancel_other_tasks"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_CLOSE_TIMEOUT = 30.0


class LoopThread:
    """One asyncio event loop running in a thread of its own (named ``name``).

    Thread safety: :meth:`run`, :meth:`call` and :meth:`call_soon` may be called from any thread but the loop's;
    :meth:`close` from any thread but the loop's, once (later calls do nothing).
    """

    def __init__(self, name: str = "kinformer-sync") -> None:
        self.loop = asyncio.new_event_loop()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def closed(self) -> bool:
        return self._closed

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def check(self) -> None:
        """Raise RuntimeError if a blocking call cannot be made now (closed, or from the loop's own thread)."""
        if self._closed:
            raise RuntimeError("the client is closed")
        if self.in_loop_thread():
            raise RuntimeError("a blocking call from the event loop's own thread would wait for itself; "
                               "use the async API (kinformer) in coroutines and async handlers")

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop and return its future (RuntimeError from the loop's thread or once closed)."""
        try:
            self.check()
        except RuntimeError:
            coro.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop; block until it ends (at most ``timeout`` seconds: then it is cancelled and
        TimeoutError raised). Its exception is raised here as is."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except TimeoutError:
            if future.done():
                raise  # the coroutine's own TimeoutError
            future.cancel()
            raise TimeoutError(f"no result within {timeout}s") from None
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting: nothing keeps running on the caller's behalf
            raise

    def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Call the plain function ``fn`` on the loop thread (for objects only that thread may touch) and
        return its result."""

        async def invoke() -> T:
            return fn(*args, **kwargs)

        return self.run(invoke())

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Schedule ``fn()`` on the loop without waiting (safe from signal handlers and any thread)."""
        if not self._closed:
            self.loop.call_soon_threadsafe(fn)

    def close(self) -> None:
        """Cancel and await what is left on the loop, stop it and join its thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            if self.in_loop_thread():
                raise RuntimeError("close() called from the event loop's own thread")
            with contextlib.suppress(concurrent.futures.TimeoutError):
                asyncio.run_coroutine_threadsafe(cancel_other_tasks(), self.loop).result(_CLOSE_TIMEOUT)
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()


async def cancel_other_tasks() -> None:
    """Cancel every task of the running loop but the caller's, and wait until they have ended."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class BlockingIterator(Iterator[T]):
    """A blocking iterator over an async iterator that lives on a :class:`LoopThread` (a watch, a paged list).

    ``next()`` blocks until the next item (or the end); :meth:`close` (also on leaving ``with``) stops the
    underlying iterator and releases its connection. Thread safety: one consumer thread at a time; :meth:`close`
    may come from any other thread, and a ``next()`` blocked meanwhile then ends the iteration (StopIteration).
    """

    def __init__(self, loop: LoopThread, source: AsyncIterator[T]) -> None:
        self._loop = loop
        self._source = source
        self._step_task: asyncio.Task[Any] | None = None  # the next() in progress, on the loop
        self._done = False

    def __iter__(self) -> BlockingIterator[T]:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        try:
            return self._loop.run(self._step())
        except StopAsyncIteration:
            self._done = True
            raise StopIteration from None
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            if self._done:  # closed meanwhile
                raise StopIteration from None
            raise

    async def _step(self) -> T:
        self._step_task = asyncio.current_task()
        try:
            return await anext(self._source)
        finally:
            self._step_task = None

    async def _aclose(self) -> None:
        step = self._step_task
        if step is not None:
            step.cancel()
            await asyncio.wait([step])
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()

    def close(self) -> None:
        """Stop iterating and release what the source holds (idempotent)."""
        if self._done:
            return
        self._done = True
        if not self._loop.closed:
            self._loop.run(self._aclose())

    def __enter__(self) -> BlockingIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class blocking(Generic[P, R]):
    """A blocking method made from the coroutine method ``fn`` of the wrapped async object.

    ``get = blocking(ki.Client.get)`` on a class whose instances have ``_aio`` (the async object) and ``_loop``
    (a :class:`LoopThread`) gives ``get(*args)`` with ``fn``'s signature and docstring, run on the loop.
    """

    def __init__(self, fn: Callable[Concatenate[Any, P], Awaitable[R]]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    @overload
    def __get__(self, obj: None, owner: type) -> blocking[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type) -> blocking[P, R] | Callable[P, R]:
        if obj is None:
            return self
        fn, aio, loop = self._fn, obj._aio, obj._loop  # type: ignore[attr-defined]

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            loop.check()  # before the coroutine exists: a refused call leaves no coroutine never awaited
            return loop.run(_awaited(fn(aio, *args, **kwargs)))

        return call


class blocking_iterator(Generic[P, T]):
    """As :class:`blocking`, for a method returning an async iterator: the blocking one returns a
    :class:`BlockingIterator`. Nothing is sent until the first ``next()``."""

    def __init__(self, fn: Callable[Concatenate[Any, P], AsyncIterator[T]]) -> None:
        self._fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    @overload
    def __get__(self, obj: None, owner: type) -> blocking_iterator[P, T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, BlockingIterator[T]]: ...

    def __get__(self, obj: object | None, owner: type) -> blocking_iterator[P, T] | Callable[P, BlockingIterator[T]]:
        if obj is None:
            return self
        fn, aio, loop = self._fn, obj._aio, obj._loop  # type: ignore[attr-defined]

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> BlockingIterator[T]:
            return BlockingIterator(loop, fn(aio, *args, **kwargs))

        return call


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable
