"""The cache tests reuse the client tests' backends (fake and real apiserver)."""

from tests.client.conftest import api, backend, fake_backend, real_backend, restart_apiserver, widget_crd

__all__ = ["api", "backend", "fake_backend", "real_backend", "restart_apiserver", "widget_crd"]
