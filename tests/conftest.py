"""Shared test configuration: the kinformer pytest plugin (embedded server fixtures)."""

pytest_plugins = ["kinformer.testing.plugin"]
