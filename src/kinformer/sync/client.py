"""The blocking Kubernetes client: :class:`kinformer.Client`'s verbs for code that is not asyncio."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Literal, overload

from kinformer.client.client import Client as AsyncClient
from kinformer.client.podexec import ExecResult
from kinformer.client.portforward import PortForward
from kinformer.sync.loop import BlockingIterator, LoopThread, blocking, blocking_iterator, cancel_other_tasks

__all__ = ["Client"]

log = logging.getLogger(__name__)


class Client:
    """A blocking client: every call blocks its caller only, until the async :class:`kinformer.Client` it
    drives has answered on the event-loop thread this object owns.

    ``Client(url, ...)`` takes :class:`kinformer.Client`'s arguments; or ``Client.from_kubeconfig(path, context)``,
    ``Client.in_cluster()``, ``Client.auto()``. The verbs are the async client's, with its signatures and
    exceptions (the same classes, re-raised: ``except kinformer.NotFound`` works); ``watch`` and ``iter_list``
    return a :class:`~kinformer.sync.loop.BlockingIterator` (close it, or use ``with``, to stop early).

    Lifecycle: one event-loop thread per Client, started at construction; :meth:`close` (or leaving ``with``)
    stops everything running on it (informers and Managers made from this client included), closes the
    connections and joins the thread.

    Thread safety: every method may be called from any number of threads at once, except from the client's own
    event-loop thread (async handlers and coroutines there use :attr:`aio`).
    """

    def __init__(self, url: str | None = None, *args: Any, **kwargs: Any) -> None:
        self._start(AsyncClient(url, *args, **kwargs))

    def _start(self, aio: AsyncClient, loop: LoopThread | None = None) -> None:
        self._aio = aio
        self._loop = loop or LoopThread(f"kinformer-sync {aio.url}")
        self._closers: list[Callable[[], Awaitable[Any]]] = []

    def on_close(self, closer: Callable[[], Awaitable[Any]]) -> None:
        """Have :meth:`close` await ``closer()`` on the loop first (last registered, first run): how the
        factories and Managers made from this client shut down in order."""
        self._closers.append(closer)

    @classmethod
    def _build(cls, make: Coroutine[Any, Any, AsyncClient]) -> Client:
        loop = LoopThread()
        try:
            aio = loop.run(make)
        except BaseException:
            loop.close()
            raise
        client = cls.__new__(cls)
        client._start(aio, loop)
        return client

    @classmethod
    def from_kubeconfig(cls, path: str | list[str] | None = None, context: str | None = None,
                        **kwargs: Any) -> Client:
        """A client for ``context`` (default: current-context) of the kubeconfig at ``path`` (default:
        ``$KUBECONFIG`` merged, else ``~/.kube/config``); keyword arguments as :class:`kinformer.Client`'s."""
        return cls._build(AsyncClient.from_kubeconfig(path, context, **kwargs))

    @classmethod
    def in_cluster(cls, env: Mapping[str, str] | None = None, sa_dir: str | None = None, **kwargs: Any) -> Client:
        """A client for the pod's service account (token re-read when it rotates)."""
        client = cls.__new__(cls)
        client._start(AsyncClient.in_cluster(env, sa_dir, **kwargs))
        return client

    @classmethod
    def auto(cls, **kwargs: Any) -> Client:
        """In-cluster configuration when running in a pod, else the kubeconfig."""
        return cls._build(AsyncClient.auto(**kwargs))

    @property
    def aio(self) -> AsyncClient:
        """The async client behind this one: use it only in coroutines running on :attr:`loop`."""
        return self._aio

    @property
    def loop(self) -> LoopThread:
        """The event-loop thread this client owns."""
        return self._loop

    @property
    def url(self) -> str:
        return self._aio.url

    @property
    def default_namespace(self) -> str | None:
        return self._aio.default_namespace

    get = blocking(AsyncClient.get)
    list = blocking(AsyncClient.list)
    list_page = blocking(AsyncClient.list_page)
    iter_list = blocking_iterator(AsyncClient.iter_list)
    watch = blocking_iterator(AsyncClient.watch)
    watch_stream = blocking_iterator(AsyncClient.watch_stream)
    create = blocking(AsyncClient.create)
    replace = blocking(AsyncClient.replace)
    patch = blocking(AsyncClient.patch)
    delete = blocking(AsyncClient.delete)
    get_status = blocking(AsyncClient.get_status)
    replace_status = blocking(AsyncClient.replace_status)
    patch_status = blocking(AsyncClient.patch_status)
    version = blocking(AsyncClient.version)
    resolve = blocking(AsyncClient.resolve)
    request_bytes = blocking(AsyncClient.request_bytes)
    get_json = blocking(AsyncClient.get_json)

    @overload
    def logs(self, name: str, namespace: str | None = None, *, follow: Literal[False] = False,
             **options: Any) -> str: ...

    @overload
    def logs(self, name: str, namespace: str | None = None, *, follow: Literal[True],
             **options: Any) -> BlockingIterator[str]: ...

    def logs(self, name: str, namespace: str | None = None, *, follow: bool = False,
             **options: Any) -> str | BlockingIterator[str]:
        """A pod's log as :meth:`kinformer.Client.logs` (same options): the whole text, or with ``follow=True``
        a blocking iterator of lines as they are written (close it to stop)."""
        if follow:
            return BlockingIterator(self._loop, self._aio.logs(name, namespace, follow=True, **options))
        self._loop.check()
        return self._loop.run(self._aio.logs(name, namespace, **options))

    def exec(self, name: str, command: Sequence[str], namespace: str | None = None, *, stdin: bytes | None = None,
             container: str | None = None, tty: bool = False) -> ExecResult:
        """Run ``command`` in the pod to completion (:meth:`kinformer.Client.exec`), sending ``stdin`` if given
        (v5.channel.k8s.io servers); its output and exit code."""
        async def run() -> ExecResult:
            session = await self._aio.exec(name, command, namespace, container=container, stdin=stdin is not None,
                                           tty=tty)
            async with session:
                return await session.communicate(stdin)

        return self._loop.run(run())

    @contextlib.contextmanager
    def port_forward(self, name: str, port: int, namespace: str | None = None, **options: Any) -> Iterator[PortForward]:
        """Forward a local port to the pod's ``port`` for the body of the ``with`` (options as
        :meth:`kinformer.Client.port_forward`); the forwarding runs on the client's loop."""
        forward = self._aio.port_forward(name, port, namespace, **options)
        self._loop.run(forward.start())
        try:
            yield forward
        finally:
            if not self._loop.closed:
                self._loop.run(forward.close())

    def invalidate_discovery(self) -> None:
        """Forget cached discovery documents (e.g. after installing a CRD)."""
        self._loop.call(self._aio.invalidate_discovery)

    def close(self) -> None:
        """Stop what runs on the loop, close the connections and join the loop thread (idempotent)."""
        if self._loop.closed:
            return
        try:
            self._loop.run(self._shutdown())
        finally:
            self._loop.close()

    async def _shutdown(self) -> None:
        for closer in reversed(self._closers):
            try:
                await closer()
            except Exception:
                log.exception("closing %r", closer)
        await cancel_other_tasks()
        await self._aio.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<kinformer.sync.Client {self.url}>"
