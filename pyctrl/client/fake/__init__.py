"""The fake client for users' unit tests (controller-runtime ``pkg/client/fake``).

``FakeClient`` implements the ``Client`` interface in memory; its semantics and limits are listed
in :mod:`pyctrl.client.fake.core`.
"""

from pyctrl.client.fake.client import FakeClient

__all__ = ["FakeClient"]
