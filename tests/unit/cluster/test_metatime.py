"""metav1.Time on the wire: the one formatter and parser the cluster's controllers, nodes and kubelets share."""

from __future__ import annotations

import pytest

from kinformer.cluster.metatime import parse_time, rfc3339


def test_rfc3339_writes_whole_seconds_in_utc() -> None:
    assert rfc3339(1_700_000_000.75) == "2023-11-14T22:13:20Z"


@pytest.mark.parametrize("text", ["2023-11-14T22:13:20Z", "2023-11-14T23:13:20+01:00", "2023-11-14T22:13:20.000000Z"])
def test_parse_time_reads_z_offsets_and_micro_time(text: str) -> None:
    assert parse_time(text) == 1_700_000_000.0


@pytest.mark.parametrize("text", [None, ""])
def test_parse_time_of_a_missing_timestamp_is_none(text: str | None) -> None:
    assert parse_time(text) is None


def test_round_trip() -> None:
    assert parse_time(rfc3339(1_700_000_123.0)) == 1_700_000_123.0
