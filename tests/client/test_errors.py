"""pyctrl.client.errors: apiserver Status → typed exceptions."""

from __future__ import annotations

import pytest

from pyctrl.client import errors
from pyctrl.client.errors import api_error_from_status


def status(reason: str, code: int, **details: object) -> dict[str, object]:
    return {
        "kind": "Status",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": f"{reason}!",
        "details": details,
    }


@pytest.mark.parametrize(
    ("reason", "code", "cls"),
    [
        ("NotFound", 404, errors.NotFound),
        ("AlreadyExists", 409, errors.AlreadyExists),
        ("Conflict", 409, errors.Conflict),
        ("Invalid", 422, errors.Invalid),
        ("Forbidden", 403, errors.Forbidden),
        ("Unauthorized", 401, errors.Unauthorized),
        ("Gone", 410, errors.Gone),
        ("Expired", 410, errors.Expired),
        ("TooManyRequests", 429, errors.TooManyRequests),
        ("ServerTimeout", 500, errors.ServerTimeout),
        ("Timeout", 504, errors.ServerTimeout),
        ("BadRequest", 400, errors.BadRequest),
        ("MethodNotAllowed", 405, errors.MethodNotAllowed),
        ("InternalError", 500, errors.InternalError),
        ("ServiceUnavailable", 503, errors.ServiceUnavailable),
    ],
)
def test_each_status_reason_maps_to_its_class(reason: str, code: int, cls: type[errors.ApiError]) -> None:
    err = api_error_from_status(status(reason, code), code)
    assert type(err) is cls
    assert err.code == code
    assert err.reason == reason
    assert err.message == f"{reason}!"


def test_the_reason_wins_over_the_http_code() -> None:
    assert type(api_error_from_status(status("AlreadyExists", 409), 409)) is errors.AlreadyExists
    assert type(api_error_from_status(status("Conflict", 409), 409)) is errors.Conflict


def test_an_unknown_reason_falls_back_to_the_class_of_the_code() -> None:
    assert type(api_error_from_status(status("SomethingNew", 404), 404)) is errors.NotFound
    assert type(api_error_from_status(status("SomethingNew", 418), 418)) is errors.ApiError


def test_field_causes_are_carried() -> None:
    causes = [{"reason": "FieldValueInvalid", "message": "must be >= 0", "field": "spec.replicas"}]
    err = api_error_from_status(status("Invalid", 422, causes=causes, name="x"), 422)
    assert err.causes == [errors.StatusCause("FieldValueInvalid", "must be >= 0", "spec.replicas")]
    assert err.details["name"] == "x"
    assert "Invalid!" in str(err)
    assert "422" in str(err)


def test_too_many_requests_prefers_the_retry_after_header_then_details() -> None:
    from_header = api_error_from_status(
        status("TooManyRequests", 429, retryAfterSeconds=7), 429, retry_after=3
    )
    from_details = api_error_from_status(status("TooManyRequests", 429, retryAfterSeconds=7), 429)
    assert isinstance(from_header, errors.TooManyRequests)
    assert isinstance(from_details, errors.TooManyRequests)
    assert from_header.retry_after == 3
    assert from_details.retry_after == 7


def test_a_body_that_is_not_a_status_still_yields_the_class_of_the_code() -> None:
    err = api_error_from_status("<html>bad gateway</html>", 503)
    assert type(err) is errors.ServiceUnavailable
    assert "bad gateway" in err.message


def test_the_hierarchy_is_the_documented_one() -> None:
    assert issubclass(errors.Expired, errors.Gone)
    assert issubclass(errors.RequestTimeout, errors.TransportError)
    for cls in (
        errors.ApiError,
        errors.ConfigError,
        errors.TransportError,
        errors.UnknownKind,
        errors.CacheError,
    ):
        assert issubclass(cls, errors.KubernetesError)
    for cls in (errors.CacheNotStarted, errors.CacheSyncTimeout, errors.FieldNotIndexed):
        assert issubclass(cls, errors.CacheError)
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        if isinstance(getattr(errors, name), type) and issubclass(
            getattr(errors, name), errors.KubernetesError
        ):
            assert name in doc, f"{name} missing from the hierarchy tree"
