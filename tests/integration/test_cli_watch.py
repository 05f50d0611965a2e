"""``kinformer watch`` against the embedded server."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import socket

from kinformer.cli.watch import add_arguments, run
from kinformer.client import Client
from kinformer.server import APIServer


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


async def test_watch_prints_initial_list_then_live_deltas() -> None:
    async with APIServer(storage="memory", namespace_defaults=False) as s:
        async with Client(s.url) as c:
            for i in range(3):
                await c.create("configmaps", {"metadata": {"name": f"cm-{i}"}, "data": {}})
            await c.create("configmaps", {"metadata": {"name": "elsewhere", "namespace": "kube-system"}})
        out, err = io.StringIO(), io.StringIO()
        args = parse("cm", "--server", s.url, "-n", "default", "--max-events", "3", "--stats-interval", "0")
        assert await run(args, out, err) == 0, err.getvalue()
        lines = out.getvalue().splitlines()
        assert sorted(line.split()[1] for line in lines) == ["default/cm-0", "default/cm-1", "default/cm-2"]
        assert all(line.startswith("Added") and "(initial list)" in line for line in lines)

        out = io.StringIO()
        args = parse("configmaps", "--server", s.url, "-A", "-o", "json", "--max-events", "4", "--stats-interval", "0")
        assert await run(args, out, err) == 0, err.getvalue()
        docs = [json.loads(line) for line in out.getvalue().splitlines()]
        assert {d["key"] for d in docs} >= {"kube-system/elsewhere", "default/cm-0"}
        assert all(d["type"] == "Added" and d["resourceVersion"] and d["object"]["kind"] == "ConfigMap" for d in docs)


async def test_watch_unknown_resource_fails_cleanly() -> None:
    async with APIServer(storage="memory") as s:
        out, err = io.StringIO(), io.StringIO()
        assert await run(parse("nosuchthings", "--server", s.url), out, err) == 1
        assert "nosuchthings" in err.getvalue()


async def test_unreachable_server_is_one_clear_line() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    out, err = io.StringIO(), io.StringIO()
    assert await run(parse("cm", "--server", url, "--stats-interval", "0"), out, err) == 1
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the API server at {url}"), lines
    assert out.getvalue() == ""


def test_help_states_the_stats_interval() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert "default: 10" in " ".join(p.format_help().split())


async def test_sigterm_stops_cleanly() -> None:
    async with APIServer(storage="memory") as s:
        async with Client(s.url) as c:
            await c.create("configmaps", {"metadata": {"name": "x"}})
        out, err = io.StringIO(), io.StringIO()
        task = asyncio.create_task(run(parse("cm", "--server", s.url, "--stats-interval", "0"), out, err))
        deadline = asyncio.get_running_loop().time() + 20
        while "default/x" not in out.getvalue():
            assert asyncio.get_running_loop().time() < deadline and not task.done(), err.getvalue()
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        assert await asyncio.wait_for(task, 20) == 0


async def test_watch_stats_line_reports_sync_state() -> None:
    async with APIServer(storage="memory", namespace_defaults=False) as s:
        async with Client(s.url) as c:
            await c.create("configmaps", {"metadata": {"name": "one"}, "data": {}})
        out, err = io.StringIO(), io.StringIO()
        args = parse("configmaps", "--server", s.url, "-n", "default", "--stats-interval", "0.05")
        task = asyncio.create_task(run(args, out, err))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while "synced True" not in err.getvalue():
            assert loop.time() < deadline, err.getvalue()
            await asyncio.sleep(0.02)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert "cache 1" in err.getvalue() and "bound method" not in err.getvalue()
        assert "ago, cache at RV " in err.getvalue() and "cache at RV -" not in err.getvalue().splitlines()[-1]
