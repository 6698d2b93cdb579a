"""pyctrl: an asyncio re-implementation of Kubernetes controller-runtime.

Mirrors ``sigs.k8s.io/controller-runtime`` (and the client-go pieces it stands on) with the same
names in snake_case. Sub-packages, one concept each:

- ``pyctrl.workqueue``  -- client-go ``util/workqueue`` (dedup, delaying, rate limiting, priority)
- ``pyctrl.metrics``    -- controller-runtime ``pkg/metrics`` (the shared Prometheus registry)
- ``pyctrl.envtest``    -- controller-runtime ``pkg/envtest`` (a real local control plane for tests)
"""

__version__ = "0.1.0"
