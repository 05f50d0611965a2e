"""The real kubectl against ``kinformer serve``, for the conformance tests.

* :class:`Kubectl` — kubectl with one kubeconfig and a private HOME (its discovery cache private too), run
  blocking (:meth:`Kubectl.run`) or from a coroutine (:meth:`Kubectl.arun`, so an in-process server keeps
  serving meanwhile); every call is bounded by a timeout;
* :func:`serve` — a ``kinformer serve`` subprocess, until its kubeconfig is written; stopped with SIGTERM, which it
  must survive cleanly (exit 0).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KUBECTL = shutil.which("kubectl")
CALL_TIMEOUT = 30.0
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


@dataclass
class Kubectl:
    """Runs kubectl with one kubeconfig and a private HOME (so its discovery cache is private too)."""

    kubeconfig: Path
    home: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env.update({"HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig)})
        return env

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        proc = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=self.env(),
                              timeout=timeout, check=False)
        if check:
            _check(args, proc)
        return proc

    async def arun(self, *args: str, input: str | None = None, check: bool = True,
                   timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """:meth:`run` without blocking the event loop; the process is killed when ``timeout`` passes."""
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, *args, stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env())
        try:
            async with asyncio.timeout(timeout):
                out, err = await proc.communicate(input.encode() if input is not None else None)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        done = subprocess.CompletedProcess([KUBECTL, *args], proc.returncode or 0, out.decode(), err.decode())
        if check:
            _check(args, done)
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply_yaml(self, doc: dict[str, Any] | str, *args: str) -> subprocess.CompletedProcess[str]:
        text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
        return self.run("apply", "-f", "-", *args, input=text)

    def exists(self, *args: str) -> bool:
        proc = self.run("get", *args, "-o", "name", "--ignore-not-found", check=True)
        return bool(proc.stdout.strip())


def _check(args: tuple[str, ...], proc: subprocess.CompletedProcess[str]) -> None:
    if proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")


@dataclass
class Served:
    """A running ``kinformer serve``: its kubeconfig and the lines it printed before it."""

    kubeconfig: Path
    banner: list[str]


@contextmanager
def serve(data: Path, *args: str) -> Iterator[Served]:
    """``kinformer serve --port 0 --data DATA ARGS...``, until it prints its kubeconfig; SIGTERM at the end."""
    log = (data / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "kinformer.cli", "serve", "--port", "0", "--data", str(data),
                             *args], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        yield _wait_started(proc, log)
    finally:
        proc.terminate()
        try:
            code = proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(5)
        log.close()
        assert code == 0, f"kinformer serve did not stop cleanly on SIGTERM (exit {code})"


def _wait_started(proc: subprocess.Popen[str], log: Any) -> Served:
    """Read ``proc``'s banner up to its ``cluster:`` line (printed after ``kubeconfig:``)."""
    deadline = time.monotonic() + START_TIMEOUT
    assert proc.stdout is not None
    banner: list[str] = []
    while not banner or not banner[-1].startswith("cluster:"):
        line = proc.stdout.readline()
        if not line:
            log.seek(0)
            raise AssertionError(f"kinformer serve exited {proc.wait(5)} before it was ready:\n{log.read()}")
        banner.append(line.strip())
        if time.monotonic() > deadline:
            raise AssertionError("kinformer serve did not print its kubeconfig in time")
    kubeconfig = next(line.split(":", 1)[1].strip() for line in banner if line.startswith("kubeconfig:"))
    return Served(Path(kubeconfig), banner)
