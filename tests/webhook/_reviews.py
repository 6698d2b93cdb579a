"""AdmissionReview request bodies for ConfigMaps, as the apiserver sends them."""

from __future__ import annotations

from typing import Any


def configmap_review(operation: str, obj: Any = None, old: Any = None, *, uid: str = "u-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": operation,
            "name": "cm",
            "namespace": "ns",
            "object": obj,
            "oldObject": old,
        },
    }
