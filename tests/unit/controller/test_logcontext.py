"""Per-reconcile logging: records written in a reconcile carry the controller, the object and a reconcile id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

import kinformer as ki
from kinformer.controller import Controller, Request, Result
from kinformer.controller.logcontext import FIELDS, log_context
from testlib import wait_until
from unit.controller.test_controller import Source, obj, start, stop


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def context(self, message: str) -> list[dict[str, str]]:
        """The context fields of the records whose message contains ``message``."""
        return [{f: getattr(r, f) for f in FIELDS if hasattr(r, f)} for r in self.records
                if message in r.getMessage()]


@pytest.fixture
def capture() -> Iterator[Capture]:
    handler = Capture()
    loggers = [logging.getLogger(n) for n in ("kinformer", "example")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


async def reconcile_objects(name: str, reconcile: object, *objects: dict, until: str = "successes") -> None:
    """Run a controller ``name`` over ``objects`` until each was reconciled once (``until``: the stat counted)."""
    ctrl = Controller(name, reconcile)  # type: ignore[arg-type]
    src = Source()
    ctrl.watch(src)
    task = await start(ctrl)
    try:
        for o in objects:
            await src.add(o)
        await wait_until(lambda: getattr(ctrl.stats, until) >= len(objects))
    finally:
        await stop(task)


async def test_a_reconcile_logger_carries_the_controller_the_object_and_a_reconcile_id(capture: Capture) -> None:
    log = ki.reconcile_logger("example.copier")  # made once, outside any reconcile

    async def reconcile(request: Request) -> Result:
        log.info("reconciling %s", request)
        return Result()

    await reconcile_objects("copier", reconcile, obj("a", "ns1"), obj("b", "ns2"))
    first, second = capture.context("reconciling")
    assert {k: first[k] for k in ("controller", "namespace", "object_name")} == {
        "controller": "copier", "namespace": "ns1", "object_name": "a"}
    assert (second["namespace"], second["object_name"]) == ("ns2", "b")
    assert len(first["reconcile_id"]) == 36 and first["reconcile_id"] != second["reconcile_id"]
    log.info("outside")
    assert capture.context("outside") == [{}]


async def test_the_machinerys_own_lines_carry_the_context(capture: Capture) -> None:
    async def reconcile(request: Request) -> Result:
        raise RuntimeError("boom")

    await reconcile_objects("failing", reconcile, obj("a"), until="errors")
    [failed, *_] = capture.context("reconcile default/a failed")
    assert failed["controller"] == "failing" and failed["object_name"] == "a" and failed["reconcile_id"]
    assert capture.context("controller failing: started") == [{"controller": "failing"}]
    assert capture.context("controller failing: stopped") == [{"controller": "failing"}]


async def test_a_plain_reconciler_logs_with_the_context_from_its_worker_thread(capture: Capture) -> None:
    log = ki.reconcile_logger("example.plain")

    def reconcile(request: Request) -> Result:
        log.info("in a thread")
        return Result()

    await reconcile_objects("plain", reconcile, obj("a"))
    [record] = capture.context("in a thread")
    assert record["controller"] == "plain" and record["object_name"] == "a"


async def test_a_formatter_names_the_fields_and_explicit_extra_wins() -> None:
    log = ki.reconcile_logger("example.format")
    stream = logging.Handler()
    lines: list[str] = []
    stream.emit = lambda record: lines.append(stream.format(record))  # type: ignore[method-assign]
    stream.setFormatter(logging.Formatter("%(name)s %(controller)s %(namespace)s/%(object_name)s %(message)s"))
    log.addHandler(stream)
    try:
        with log_context(controller="c", namespace="ns", object_name="o", reconcile_id="r"):
            await asyncio.sleep(0)
            log.warning("hello")
            log.warning("mine", extra={"namespace": "explicit"})
    finally:
        log.removeHandler(stream)
    assert lines == ["example.format c ns/o hello", "example.format c explicit/o mine"]
