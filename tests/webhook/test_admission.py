"""pyctrl.webhook.admission: reviews in, responses out, for defaulters and validators."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pyctrl.client.errors import Invalid
from pyctrl.client.objects import ConfigMap
from pyctrl.webhook import (
    AdmissionRequest,
    AdmissionResponse,
    with_custom_defaulter,
    with_custom_validator,
)
from tests.webhook._reviews import configmap_review

V1 = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}


def review(operation: str, obj: Any = None, old: Any = None) -> dict[str, Any]:
    return configmap_review(operation, obj, old)


def cm(**data: str) -> dict[str, Any]:
    # creationTimestamp null, as the apiserver sends a new object: decoding drops it, and that
    # must not turn into a patch
    meta = {"name": "cm", "namespace": "ns", "creationTimestamp": None}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


class Defaulter:
    async def default(self, obj: ConfigMap) -> None:
        obj.data = {"mode": "standalone", **(obj.data or {})}


class Validator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def validate_create(self, obj: ConfigMap) -> list[str] | None:
        self.calls.append(("create", obj))
        if (obj.data or {}).get("mode") == "cluster":
            raise ValueError("mode 'cluster' is not supported")
        return ["mode is not set"] if not obj.data else None

    async def validate_update(self, old: ConfigMap, new: ConfigMap) -> list[str] | None:
        self.calls.append(("update", (old, new)))
        if (old.data or {}).get("mode") != (new.data or {}).get("mode"):
            raise Invalid(
                {
                    "code": 422,
                    "reason": "Invalid",
                    "message": "data.mode is immutable",
                    "details": {"causes": [{"field": "data.mode", "reason": "FieldValueForbidden"}]},
                }
            )
        return None

    async def validate_delete(self, obj: ConfigMap) -> list[str] | None:
        self.calls.append(("delete", obj))
        return None


async def handle(handler: Any, body: dict[str, Any]) -> AdmissionResponse:
    response: AdmissionResponse = await handler.handle(AdmissionRequest.from_review(body))
    return response


async def test_a_defaulter_patches_only_what_it_changed() -> None:
    h = with_custom_defaulter(ConfigMap, Defaulter())
    response = await handle(h, review("CREATE", cm()))
    assert response.allowed
    assert response.patch == [{"op": "add", "path": "/data/mode", "value": "standalone"}]
    answer = response.review("u-1")["response"]
    assert answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == response.patch
    unchanged = await handle(h, review("CREATE", cm(mode="cluster")))
    assert unchanged.allowed
    assert unchanged.patch == []
    assert "patch" not in unchanged.review("u-1")["response"]


async def test_a_defaulter_is_not_called_for_delete_and_undecodable_objects_are_errors() -> None:
    h = with_custom_defaulter(ConfigMap, Defaulter())
    assert (await handle(h, review("DELETE", None, cm()))).allowed
    bad = await handle(h, review("CREATE", {**cm(), "data": {"k": 1}}))
    assert (bad.allowed, bad.code) == (False, 400)
    assert "cannot decode the object as ConfigMap" in bad.message


async def test_a_validator_allows_with_warnings_and_denies_with_the_exception_message() -> None:
    v = Validator()
    h = with_custom_validator(ConfigMap, v)
    ok = await handle(h, review("CREATE", cm()))
    assert (ok.allowed, ok.warnings) == (True, ("mode is not set",))
    assert ok.review("u-1")["response"]["warnings"] == ["mode is not set"]
    no = await handle(h, review("CREATE", cm(mode="cluster")))
    assert (no.allowed, no.code, no.reason, no.message) == (
        False,
        403,
        "Forbidden",
        "mode 'cluster' is not supported",
    )
    status = no.review("u-1")["response"]["status"]
    assert status == {"code": 403, "reason": "Forbidden", "message": "mode 'cluster' is not supported"}


async def test_an_api_error_from_a_validator_keeps_its_code_reason_and_causes() -> None:
    h = with_custom_validator(ConfigMap, Validator())
    no = await handle(h, review("UPDATE", cm(mode="cluster"), cm(mode="standalone")))
    status = no.review("u-1")["response"]["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == "data.mode is immutable"
    assert status["details"]["causes"][0]["field"] == "data.mode"


async def test_update_gets_old_and_new_and_delete_gets_the_old_object() -> None:
    v = Validator()
    h = with_custom_validator(ConfigMap, v)
    assert (await handle(h, review("UPDATE", cm(mode="a", x="2"), cm(mode="a", x="1")))).allowed
    assert (await handle(h, review("DELETE", None, cm(mode="a")))).allowed
    (op1, (old, new)), (op2, deleted) = v.calls
    assert (op1, (old.data or {})["x"], (new.data or {})["x"]) == ("update", "1", "2")
    assert (op2, deleted.data) == ("delete", {"mode": "a"})
    missing = await handle(h, review("DELETE", cm(), None))
    assert (missing.allowed, missing.code) == (False, 400)
    assert "no oldObject" in missing.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "admission.k8s.io/v1"),
        (V1, "no request"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x"}},
            "operation",
        ),
    ],
)
def test_a_malformed_review_is_refused_naming_the_problem(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdmissionRequest.from_review(body)


def test_the_webhook_package_exports_exactly_its_public_names() -> None:
    import pyctrl.webhook

    assert sorted(pyctrl.webhook.__all__) == sorted(set(pyctrl.webhook.__all__))
    for name in pyctrl.webhook.__all__:
        assert getattr(pyctrl.webhook, name) is not None, name
    public = {n for n in dir(pyctrl.webhook) if not n.startswith("_") and n[0].isupper()}
    assert public - {"admission", "server"} <= set(pyctrl.webhook.__all__)
