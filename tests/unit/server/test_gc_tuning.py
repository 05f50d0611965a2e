"""The server process's collector settings (kinformer serve)."""

from __future__ import annotations

import gc

from kinformer.server.python_gc import SERVER_THRESHOLDS, tune_for_server


def test_tune_for_server_freezes_what_is_alive_and_raises_thresholds():
    before = gc.get_threshold()
    try:
        tune_for_server()
        assert gc.get_threshold() == SERVER_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
