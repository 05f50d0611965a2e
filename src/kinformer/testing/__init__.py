"""Testing support: a pytest plugin with an embedded API server, and a fault-injecting proxy.

Enable the fixtures in a ``conftest.py`` with ``pytest_plugins = ["kinformer.testing"]``.
"""

from kinformer.testing.faultproxy import FaultProxy

__all__ = ["FaultProxy"]
