"""The cluster's frame: which controllers run, and that a server asked for none runs nothing."""

from __future__ import annotations

import pytest

from kinformer.cluster import CONTROLLERS
from kinformer.cluster.cluster import controller_names
from kinformer.server import APIServer


def test_controller_names_true_is_every_controller_and_false_none() -> None:
    assert controller_names(True) == tuple(CONTROLLERS)
    assert controller_names(False) == ()


def test_unknown_controller_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown controllers no-such-controller"):
        controller_names(["no-such-controller"])
    with pytest.raises(ValueError, match="unknown controllers"):
        APIServer(controllers=["no-such-controller"])


def test_negative_node_count_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be >= 0"):
        APIServer(nodes=-1)


async def test_bare_server_has_no_cluster() -> None:
    async with APIServer() as server:
        assert server.cluster is None
