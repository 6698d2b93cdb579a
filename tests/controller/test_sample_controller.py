"""A sample Widget controller on the real control plane: convergence, predicates, error handling,
owned objects, and the idempotence check."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from pyctrl.builder import ControllerBuilder
from pyctrl.client.objects import ConfigMap, Namespace, ObjectMeta
from pyctrl.controllerutil import create_or_update, set_controller_reference
from pyctrl.predicate import generation_changed
from pyctrl.reconcile import Request, Result, TerminalError
from pyctrl.testing import assert_idempotent, eventually
from pyctrl.workqueue import default_controller_rate_limiter

from ._manager import WidgetReconciler, is_ready, new_manager, running
from ._util import RecordingLimiter, Widget, metric, widget

pytestmark = [pytest.mark.controlplane, pytest.mark.usefixtures("widget_crd")]


async def converge_with_barrier(kubeconfig: Path, namespace: str, predicates: list[Any]) -> tuple[int, int]:
    """Create widget a, wait for its status, then create b as a barrier; when b has converged
    every event of a's status write has been through the handler (one informer delivers in
    order, one worker reconciles FIFO). Returns how often a and b were reconciled by then."""
    mgr = await new_manager(kubeconfig, namespace)
    rec = WidgetReconciler(mgr.client)
    ControllerBuilder(mgr).for_(Widget, predicates=predicates).named(f"widget-{namespace}").complete(rec)
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "a", size=2))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "a"), within=30, what="a converged", interval=0.01
        )
        await mgr.api_client.create(widget(namespace, "b"))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "b"), within=30, what="b converged", interval=0.01
        )
        return rec.calls["a"], rec.calls["b"]


async def test_the_sample_controller_converges_and_its_own_status_writes_do_not_retrigger_it(
    kubeconfig: Path, namespace: str
) -> None:
    assert await converge_with_barrier(kubeconfig, namespace, [generation_changed]) == (1, 1)


async def test_without_generation_changed_the_status_write_triggers_exactly_one_more_reconcile(
    kubeconfig: Path, namespace: str
) -> None:
    # the negative control of the test above: the barrier does catch a re-trigger
    a_calls, _ = await converge_with_barrier(kubeconfig, namespace, [])
    assert a_calls == 2


async def test_a_spec_change_is_reconciled_again(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    rec = WidgetReconciler(mgr.client)
    ControllerBuilder(mgr).for_(Widget, predicates=[generation_changed]).named(f"w-{namespace}").complete(rec)
    async with running(mgr):
        created = await mgr.api_client.create(widget(namespace, "a", size=1))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "a"), within=30, what="a converged", interval=0.01
        )
        current = await mgr.api_reader.get(Widget, "a", namespace=namespace)
        current.spec.size = 4
        await mgr.api_client.update(current)
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "a"), within=30, what="a re-converged", interval=0.01
        )
        final = await mgr.api_reader.get(Widget, "a", namespace=namespace)
        assert final.status == {"observedGeneration": 2, "size": 4, "phase": "Ready"}
        assert created.metadata.generation == 1


async def test_a_failing_key_backs_off_exponentially_while_other_keys_flow_and_terminal_errors_stop(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)

    def boom() -> None:
        raise RuntimeError("the backend is down")

    def invalid() -> None:
        raise TerminalError("size 5 is reserved")

    rec = WidgetReconciler(mgr.client, {"bad": boom, "terminal": invalid})
    limiter = RecordingLimiter(default_controller_rate_limiter())
    name = f"errors-{namespace}"
    ctrl = (
        ControllerBuilder(mgr)
        .for_(Widget, predicates=[generation_changed])
        .with_options(rate_limiter=limiter)
        .named(name)
        .complete(rec)
    )
    bad = Request(namespace, "bad")
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "bad"))
        await eventually(
            lambda: ctrl.queue.num_requeues(bad) >= 5, within=30, what="five retries of bad", interval=0.01
        )
        delays = limiter.delays[bad][:5]
        assert delays == [0.005, 0.01, 0.02, 0.04, 0.08]  # 5 ms doubling (controller-runtime default)
        assert metric("controller_runtime_reconcile_errors_total", controller=name) >= 5
        for i in range(3):
            await mgr.api_client.create(widget(namespace, f"good-{i}"))
        for i in range(3):
            await eventually(
                functools.partial(is_ready, mgr.api_reader, namespace, f"good-{i}"),
                within=30,
                what="good",
                interval=0.01,
            )
        assert ctrl.queue.num_requeues(bad) >= 5  # still failing, still backing off
        assert not await is_ready(mgr.api_reader, namespace, "bad")

        await mgr.api_client.create(widget(namespace, "terminal"))
        await eventually(
            lambda: rec.calls["terminal"] == 1, within=30, what="terminal reconciled", interval=0.01
        )
        await mgr.api_client.create(widget(namespace, "barrier"))
        await eventually(
            lambda: is_ready(mgr.api_reader, namespace, "barrier"), within=30, what="barrier", interval=0.01
        )
        assert rec.calls["terminal"] == 1
        assert Request(namespace, "terminal") not in limiter.delays
        assert metric("controller_runtime_terminal_reconcile_errors_total", controller=name) == 1


class ChildReconciler:
    """Keeps a ConfigMap owned by each Widget with data size=<spec.size>."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls = 0

    async def reconcile(self, request: Request) -> Result:
        self.calls += 1
        w = await self.client.get(Widget, request.name, namespace=request.namespace)

        def mutate(cm: ConfigMap) -> None:
            cm.data = {"size": str(w.spec.size)}
            set_controller_reference(w, cm)

        child = ConfigMap(metadata=ObjectMeta(name=f"{request.name}-child", namespace=request.namespace))
        await create_or_update(self.client, child, mutate)
        return Result()


async def child_data(mgr: Any, namespace: str) -> dict[str, str] | None:
    try:
        cm = await mgr.api_reader.get(ConfigMap, "a-child", namespace=namespace)
    except Exception:
        return None
    return dict(cm.data or {})


async def test_a_change_to_an_owned_object_reconciles_its_owner(kubeconfig: Path, namespace: str) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    rec = ChildReconciler(mgr.client)
    ControllerBuilder(mgr).for_(Widget).owns(ConfigMap).named(f"owner-{namespace}").complete(rec)
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "a", size=3))
        await eventually(
            lambda: _eq(child_data(mgr, namespace), {"size": "3"}),
            within=30,
            what="child created",
            interval=0.01,
        )
        tampered = await mgr.api_reader.get(ConfigMap, "a-child", namespace=namespace)
        tampered.data = {"size": "999"}
        await mgr.api_client.update(tampered)
        await eventually(
            lambda: _eq(child_data(mgr, namespace), {"size": "3"}),
            within=30,
            what="child repaired",
            interval=0.01,
        )
        cm = await mgr.api_reader.get(ConfigMap, "a-child", namespace=namespace)
        (ref,) = cm.metadata.owner_references or []
        assert (ref.kind, ref.name, ref.controller) == ("Widget", "a", True)


class RequestRecorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


async def test_an_owned_object_enqueues_its_cluster_scoped_owner_without_a_namespace(
    kubeconfig: Path, namespace: str
) -> None:
    # A ConfigMap controlled by the (cluster-scoped) Namespace it lives in: the request for the
    # owner must be ("", name); ("<namespace>", name) would be a Namespace that cannot exist.
    mgr = await new_manager(kubeconfig, namespace)
    rec = RequestRecorder()
    only_owned_events = [lambda event: False]  # the Namespace's own events are filtered out
    builder = ControllerBuilder(mgr).for_(Namespace, predicates=only_owned_events).owns(ConfigMap)
    builder.named(f"ns-owner-{namespace}").complete(rec)
    async with running(mgr):
        owner = await mgr.api_reader.get(Namespace, namespace)
        cm = ConfigMap(metadata=ObjectMeta(name="owned", namespace=namespace))
        set_controller_reference(owner, cm)
        await mgr.api_client.create(cm)
        await eventually(lambda: rec.requests, within=30, what="a reconcile of the owner", interval=0.01)
        assert rec.requests == [Request("", namespace)]


async def _eq(value: Any, want: Any) -> bool:
    return bool(await value == want)


class Stamper(WidgetReconciler):
    """Not idempotent: stamps an annotation on every run."""

    async def reconcile(self, request: Request) -> Result:
        w = await self.client.get(Widget, request.name, namespace=request.namespace)
        self.calls[request.name] += 1
        w.metadata.annotations = {"last-run": str(self.calls[request.name])}
        await self.client.update(w)
        return Result()


async def test_the_converged_sample_reconciler_makes_zero_writes_and_a_stamping_one_is_caught(
    kubeconfig: Path, namespace: str
) -> None:
    mgr = await new_manager(kubeconfig, namespace)
    rec = WidgetReconciler(mgr.client)
    ControllerBuilder(mgr).for_(Widget, predicates=[generation_changed]).named(f"i-{namespace}").complete(rec)
    async with running(mgr):
        await mgr.api_client.create(widget(namespace, "a", size=2))
        await eventually(
            lambda: is_ready(mgr.client, namespace, "a"),
            within=30,
            what="converged in the cache",
            interval=0.01,
        )
        request = Request(namespace, "a")
        results = await assert_idempotent(rec, request, mgr.client, n=5)
        assert results == [Result()] * 5
        await assert_idempotent(lambda: WidgetReconciler(mgr.client), request, mgr, n=3)
        with pytest.raises(AssertionError, match=r"not idempotent: 2 write\(s\) in 2 runs") as failure:
            await assert_idempotent(Stamper(mgr.api_client), request, mgr.api_client, n=2)
        assert f"run 1: PUT /apis/test.pyctrl.dev/v1/namespaces/{namespace}/widgets/a" in str(failure.value)
