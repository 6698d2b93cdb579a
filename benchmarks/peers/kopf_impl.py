"""The kopf peer: the same controller as the others, written the way kopf is used.

One handler for create, update (of ``spec.value``) and resume sets ``status.observed`` (the mark
followed by ``spec.value``) through
kopf's ``patch.status[...]`` (kopf sends it to the status subresource). Settings, as the benchmark
asks: no posting of k8s Events, no peering (``standalone``), ``execution.max_workers`` = the shared
concurrency (the handler is synchronous, so that pool bounds how many run at once), the namespace
given. Everything else is kopf's default (its progress and diff-base annotations included): that is
what a kopf user runs. kopf is imported at run time so type-checking the repository does not need
the optional ``bench`` extra.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

from benchmarks.peers import parse_args

ITEMS = ("bench.pyctrl.dev", "v1", "items")


def main() -> None:
    args = parse_args("kopf_impl")
    os.environ["KUBECONFIG"] = args.kubeconfig
    kopf: Any = importlib.import_module("kopf")

    @kopf.on.login()  # type: ignore[untyped-decorator]
    def login(**kwargs: Any) -> Any:
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup()  # type: ignore[untyped-decorator]
    def configure(settings: Any, **_: Any) -> None:
        settings.posting.enabled = False
        settings.execution.max_workers = args.concurrency

    @kopf.on.resume(*ITEMS)  # type: ignore[untyped-decorator]
    @kopf.on.create(*ITEMS)  # type: ignore[untyped-decorator]
    @kopf.on.update(*ITEMS, field="spec.value")  # type: ignore[untyped-decorator]
    def observe(spec: Any, status: Any, patch: Any, **_: Any) -> None:
        observed = args.mark + spec.get("value")
        if status.get("observed") != observed:
            patch.status["observed"] = observed

    logging.basicConfig(level=logging.WARNING)
    kopf.run(standalone=True, namespaces=[args.namespace], clusterwide=False)


if __name__ == "__main__":
    main()
