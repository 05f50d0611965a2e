"""The serving process's event loop: uvloop when installed, asyncio's otherwise, chosen per process."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kinformer.server.eventloop import EVENT_LOOPS, loop_factory

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
    uvloop = None


def test_asyncio_choice_is_the_default_loop() -> None:
    assert loop_factory("asyncio") is None


def test_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="one of auto, uvloop, asyncio"):
        loop_factory("trio")
    assert EVENT_LOOPS == ("auto", "uvloop", "asyncio")


@pytest.mark.skipif(uvloop is None, reason="uvloop is not installed")
def test_auto_picks_uvloop_and_leaves_the_policy_alone() -> None:
    policy = asyncio.get_event_loop_policy()
    factory = loop_factory()
    assert factory is uvloop.new_event_loop
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert asyncio.get_event_loop_policy() is policy


def _serve(tmp_path: Path, choice: str) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kinformer.cli", "serve", "--bare", "--no-tls", "--port", "0",
                             "--storage", "memory", "--data", str(tmp_path), "--event-loop", choice],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = loop = ""
    deadline = time.monotonic() + 30
    while not (url and loop) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "listening on" in line:
            url = line.split("listening on", 1)[1].split()[0]
        if line.startswith("event loop:"):
            loop = line.split(":", 1)[1].strip()
    return proc, url, loop


@pytest.mark.parametrize("choice", ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(
    uvloop is None, reason="uvloop is not installed"))])
def test_serve_on_each_loop_serves_watches_and_stops_on_sigterm(tmp_path: Path, choice: str) -> None:
    proc, url, loop = _serve(tmp_path, choice)
    try:
        assert url and loop == choice
        cm = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}).encode()
        req = urllib.request.Request(f"{url}/api/v1/namespaces/default/configmaps", data=cm, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201
        with urllib.request.urlopen(f"{url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0"
                                    "&timeoutSeconds=1", timeout=10) as resp:
            event = json.loads(resp.readline())
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "a")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(15)
    assert code == 0


def test_a_missing_uvloop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from kinformer.server.cli import add_arguments, main

    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    with pytest.raises(ImportError):
        loop_factory("uvloop")
    assert loop_factory("auto") is None
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--no-tls", "--storage", "memory", "--data", str(tmp_path), "--event-loop", "uvloop"])
    assert main(args) == 2
    assert "uvloop is not installed" in capsys.readouterr().err
