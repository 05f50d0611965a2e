"""The blocking facade (kinformer.sync) against the embedded server, from plain threads: no asyncio in the tests.

The server runs on an event-loop thread of its own (a :class:`~kinformer.sync.loop.LoopThread`), so the code
under test sees it exactly as it would see a remote cluster.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from test_client_exec import forwarding_kubelet, kubelet

import kinformer as ki
from kinformer import sync as kis
from kinformer.client.discovery import ResourceNotFound
from kinformer.server import APIServer
from kinformer.sync.loop import LoopThread
from testlib import cm, wait_until_sync

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server_url() -> Iterator[str]:
    loop = LoopThread("test-apiserver")
    server = APIServer(compaction_interval=0, namespace_defaults=False)
    loop.run(server.start())
    try:
        yield server.url
    finally:
        loop.run(server.stop())
        loop.close()


@pytest.fixture
def client(server_url: str) -> Iterator[kis.Client]:
    with kis.Client(server_url) as c:
        yield c


def _loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kinformer-sync")]


def test_verbs_block_and_return_what_the_async_client_returns(client: kis.Client) -> None:
    created = client.create("configmaps", cm("web", app="web"))
    assert created["metadata"]["name"] == "web"
    assert client.get("configmaps", "web", namespace="default")["data"] == {"v": "1"}
    client.create("configmaps", cm("db", app="db"))
    assert [o["metadata"]["name"] for o in client.list("configmaps", "default", label_selector="app=web").items] == [
        "web"]
    patched = client.patch("configmaps", "web", {"data": {"v": "2"}}, namespace="default")
    assert patched["data"] == {"v": "2"}
    applied = client.patch("configmaps", "web", {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "web", "namespace": "default"},
                                                 "data": {"w": "3"}},
                           "apply", namespace="default", field_manager="test", force=True)
    assert applied["data"]["w"] == "3"
    body = applied.to_dict()
    body["data"] = {"v": "4"}
    assert client.replace("configmaps", body)["data"] == {"v": "4"}
    client.delete("configmaps", "web", namespace="default")
    assert [o["metadata"]["name"] for o in client.iter_list("configmaps", "default", limit=1)] == ["db"]
    assert client.version()["major"]


def test_errors_are_the_async_apis_own_classes(client: kis.Client) -> None:
    with pytest.raises(ki.NotFound) as missing:
        client.get("configmaps", "absent", namespace="default")
    assert missing.value.code == 404 and "absent" in str(missing.value)
    stale = client.create("configmaps", cm("a")).to_dict()
    with pytest.raises(ki.AlreadyExists):
        client.create("configmaps", cm("a"))
    client.patch("configmaps", "a", {"data": {"v": "2"}}, namespace="default")
    with pytest.raises(ki.Conflict):
        client.replace("configmaps", stale)
    with pytest.raises(ValueError, match="unknown patch type"):
        client.patch("configmaps", "a", {}, "bogus", namespace="default")


def test_watch_is_a_blocking_iterator_that_can_be_closed(client: kis.Client) -> None:
    rv = client.list("configmaps", "default").resource_version
    client.create("configmaps", cm("a"))
    client.create("configmaps", cm("b"))
    with client.watch("configmaps", "default", resource_version=rv) as events:
        seen = [(e.type, e.object["metadata"]["name"]) for _, e in zip(range(2), events, strict=False)]
    assert seen == [("ADDED", "a"), ("ADDED", "b")]
    assert list(events) == []  # closed: iteration is over


def test_closing_a_watch_from_another_thread_ends_a_blocked_next(client: kis.Client) -> None:
    rv = client.list("configmaps", "default").resource_version
    events = client.watch("configmaps", "default", resource_version=rv)
    outcome: list[Any] = []

    def consume() -> None:
        outcome.extend(events)  # blocks: nothing changes
        outcome.append("ended")

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_until_sync(lambda: events._step_task is not None, what="the consumer waiting for an event")
    events.close()
    consumer.join(10)
    assert not consumer.is_alive() and outcome == ["ended"]


def test_informer_with_plain_handlers_and_listers(client: kis.Client) -> None:
    client.create("configmaps", cm("before", app="web"))
    factory = kis.SharedInformerFactory(client, resync=0)
    cms = factory.informer("configmaps")
    seen: list[tuple[str, str]] = []
    threads: set[str] = set()

    def on_add(obj: Any) -> None:
        threads.add(threading.current_thread().name)
        seen.append(("add", obj["metadata"]["name"]))

    def on_update(old: Any, new: Any) -> None:
        seen.append(("update", new["metadata"]["name"]))

    def on_delete(obj: Any) -> None:
        seen.append(("delete", obj["metadata"]["name"]))

    registration = cms.add_event_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)
    cms.add_indexers({"by_app": lambda o: [o["metadata"].get("labels", {}).get("app", "")]})
    factory.start()
    assert factory.wait_for_cache_sync(timeout=30) == {"configmaps": True}
    assert registration.wait_for_sync(timeout=30)
    client.create("configmaps", cm("after", app="web"))
    client.patch("configmaps", "after", {"data": {"v": "2"}}, namespace="default")
    client.delete("configmaps", "before", namespace="default")
    wait_until_sync(lambda: len(seen) == 4, what="four notifications")
    assert seen == [("add", "before"), ("add", "after"), ("update", "after"), ("delete", "before")]
    # plain handlers run in their listener's worker thread, neither the caller's nor the loop's
    assert threads and not threads & {threading.current_thread().name, client.loop._thread.name}
    assert [o["metadata"]["name"] for o in cms.lister().list(namespace="default", label_selector="app=web")] == [
        "after"]
    assert [o["metadata"]["name"] for o in cms.indexer.by_index("by_app", "web")] == ["after"]
    with pytest.raises(ki.NotFound):
        cms.lister().get("before", "default")
    factory.shutdown()
    assert registration.errors == 0


def test_a_blocking_call_from_the_loop_thread_is_refused(client: kis.Client) -> None:
    factory = kis.SharedInformerFactory(client)
    failures: list[BaseException] = []

    async def on_add(obj: Any) -> None:  # runs on the client's loop: a blocking call there would deadlock
        try:
            client.get("configmaps", obj["metadata"]["name"], namespace="default")
        except RuntimeError as exc:
            failures.append(exc)

    factory.informer("configmaps").add_event_handler(on_add=on_add)
    client.create("configmaps", cm("a"))
    factory.start()
    wait_until_sync(lambda: bool(failures), what="the refused call")
    assert "would wait for itself" in str(failures[0])


def test_close_stops_informers_and_joins_the_loop_thread(server_url: str) -> None:
    before = set(_loop_threads())
    client = kis.Client(server_url)
    factory = kis.SharedInformerFactory(client)
    informer = factory.informer("configmaps")
    factory.start()
    assert factory.wait_for_cache_sync(timeout=30)
    assert len(set(_loop_threads()) - before) == 1
    client.close()
    assert set(_loop_threads()) == before
    assert informer.aio.is_stopped
    with pytest.raises(RuntimeError, match="closed"):
        client.get("configmaps", "a", namespace="default")
    client.close()  # idempotent


def _copy_to_secret(client: kis.Client) -> Any:
    def reconcile(request: ki.Request) -> ki.Result:
        try:
            source = client.get("configmaps", request.name, namespace=request.namespace)
        except ki.NotFound:
            return ki.Result()
        secret = {"apiVersion": "v1", "kind": "Secret",
                  "metadata": {"name": request.name, "namespace": request.namespace},
                  "stringData": dict(source.get("data") or {})}
        client.patch("secrets", request.name, secret, "apply", namespace=request.namespace,
                     field_manager="copier", force=True)
        return ki.Result()

    return reconcile


def test_manager_runs_until_stopped_from_another_thread(client: kis.Client) -> None:
    mgr = kis.Manager(client)
    recorder = mgr.event_recorder("copier")
    copy = _copy_to_secret(client)

    def reconcile(request: ki.Request) -> ki.Result:
        result = copy(request)
        recorder.event(client.get("configmaps", request.name, namespace=request.namespace), "Normal", "Copied", "ok")
        return result

    mgr.controller(reconcile, name="copier").for_("configmaps")
    client.create("configmaps", cm("web"))
    runner = threading.Thread(target=mgr.run)
    runner.start()

    def copied() -> bool:
        try:
            return client.get("secrets", "web", namespace="default")["data"] == {"v": "MQ=="}
        except ki.NotFound:
            return False

    wait_until_sync(copied, timeout=30, what="the secret")
    assert mgr.ready()
    mgr.stop()
    runner.join(30)
    assert not runner.is_alive()
    # recorded from the reconciler's worker thread, flushed when run() ended
    assert [e["reason"] for e in client.list("events.k8s.io/v1/events", "default").items] == ["Copied"]


def test_manager_run_raises_what_the_async_run_raised(client: kis.Client) -> None:
    mgr = kis.Manager(client)
    mgr.controller(_copy_to_secret(client), name="copier").for_("nonesuches")
    with pytest.raises(ResourceNotFound, match="nonesuches"):
        mgr.run()


SCRIPT = ROOT / "tests" / "integration" / "sync_script.py"


def test_a_plain_script_runs_an_informer_and_a_controller_and_stops_on_sigterm(server_url: str) -> None:
    assert "import asyncio" not in SCRIPT.read_text() and "async " not in SCRIPT.read_text()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-X", "dev", str(SCRIPT), server_url], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # bounded: the script prints "running" once its controller copied the object
            lines.append(line.strip())
            if line.strip() == "running":
                break
        assert lines[-1:] == ["running"], lines
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.split() == ["stopped"], (out, err)
    assert "Traceback" not in err and "was never awaited" not in err and "Task was destroyed" not in err, err


@contextlib.contextmanager
def stub(app: web.Application) -> Iterator[str]:
    """``app`` served on 127.0.0.1 from an event-loop thread of its own; yields its URL."""
    runner = web.AppRunner(app)
    loop = LoopThread("test-kubelet-stub")

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]

    try:
        yield loop.run(start())
    finally:
        loop.run(runner.cleanup())
        loop.close()


def test_pod_logs_whole_and_followed() -> None:
    async def log(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"one\ntwo\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/default/pods/web/log", log)
    with stub(app) as url, kis.Client(url) as client:
        assert client.logs("web", "default") == "one\ntwo\n"
        with client.logs("web", "default", follow=True) as lines:
            assert list(lines) == ["one", "two"]


def test_exec_and_port_forward_block_their_caller_only() -> None:
    with stub(kubelet(("v5.channel.k8s.io",), [])) as url, kis.Client(url) as client:
        result = client.exec("web", ["cat"], "default", stdin=b"typed\n")
        assert (result.stdout, result.exit_code) == (b"typed\n", 0)
        assert client.exec("web", ["fail", "2"], "default").exit_code == 2
    with stub(forwarding_kubelet([])) as url, kis.Client(url) as client, \
            client.port_forward("web", 7, "default") as forward, \
            socket.create_connection(("127.0.0.1", forward.local_port), timeout=30) as conn:
        conn.sendall(b"ping")
        assert conn.makefile("rb").read(4) == b"ping"  # until 4 bytes (or the end)
