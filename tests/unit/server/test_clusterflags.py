"""``kinformer serve``'s node-failure timing flags, named as kube's: parsed into ClusterOptions and the
DefaultTolerationSeconds pair; a bad value or a grace period shorter than a heartbeat exits 2 naming the flag."""

from __future__ import annotations

import argparse

import pytest

from kinformer.cluster import ClusterOptions
from kinformer.server import cli, clusterflags


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kinformer serve")
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_flags_not_given_leave_the_defaults() -> None:
    args = _parse()
    assert clusterflags.server_kwargs(args) == {"cluster_options": ClusterOptions(),
                                                "default_toleration_seconds": (300, 300)}
    assert clusterflags.check(args) is None


def test_go_durations_set_the_node_lifecycle_and_kubelet_timings() -> None:
    args = _parse("--node-monitor-period=500ms", "--node-monitor-grace-period", "1m30s",
                  "--node-startup-grace-period=2m", "--node-status-update-frequency=1.5s",
                  "--default-not-ready-toleration-seconds=0", "--default-unreachable-toleration-seconds", "7")
    kwargs = clusterflags.server_kwargs(args)
    options = kwargs["cluster_options"]
    assert (options.node_monitor_period, options.node_monitor_grace_period, options.node_startup_grace_period,
            options.node_status_update_frequency) == (0.5, 90.0, 120.0, 1.5)
    assert kwargs["default_toleration_seconds"] == (0, 7)


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--node-monitor-grace-period", "8", "invalid duration '8'"),
    ("--node-monitor-period", "0s", "must be greater than 0"),
    ("--node-status-update-frequency", "-1s", "invalid duration"),
    ("--default-unreachable-toleration-seconds", "-1", "whole seconds >= 0"),
    ("--default-not-ready-toleration-seconds", "1.5", "whole seconds >= 0"),
])
def test_bad_values_exit_2_naming_the_flag(flag: str, value: str, says: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(f"{flag}={value}")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and says in err


@pytest.mark.parametrize("flags", [("--node-monitor-grace-period=2s",),
                                   ("--node-status-update-frequency=10s",),
                                   ("--node-startup-grace-period=1s",)])
def test_grace_period_not_longer_than_a_heartbeat_is_refused(flags: tuple[str, ...],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse("--no-tls", "--port", "0", *flags)
    assert cli.main(args) == 2
    assert "must be longer than the simulated kubelet's heartbeat period" in capsys.readouterr().err
