"""Conveniences for tests against a running envtest control plane (controller-runtime envtest's
``CRDInstallOptions``, ``WebhookInstallOptions`` and user provisioning).

``Environment`` inherits them; each works through the admin connection (``http``) of a started
environment: identities with client certificates, CRDs applied and waited for, namespaces with
their ServiceAccount, webhook configurations pointed at a local server, etcd compaction.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyctrl.envtest._certs import Pki
from pyctrl.envtest._components import etcd_post
from pyctrl.envtest._http import AdminHTTP, ApiError, poll_until
from pyctrl.envtest._kubeconfig import write_kubeconfig
from pyctrl.envtest._manifests import load_manifests
from pyctrl.envtest._process import free_port
from pyctrl.envtest._webhooks import WebhookInstallOptions, install_webhooks, uninstall_webhooks

__all__ = ["ClusterConveniences"]


class ClusterConveniences:
    """What a started control plane offers tests; the subclass provides the connection."""

    state_dir: Path
    pki: Pki
    ports: dict[str, int]

    @property
    def http(self) -> AdminHTTP:
        raise NotImplementedError

    @property
    def server_url(self) -> str:
        raise NotImplementedError

    @property
    def etcd_url(self) -> str:
        raise NotImplementedError

    def add_user(self, name: str, groups: Iterable[str] = ()) -> Path:
        """A kubeconfig for ``name`` in ``groups`` (no permissions unless RBAC grants some)."""
        cert, key = self.pki.client_cert(name, tuple(groups))
        path = self.state_dir / "users" / f"{cert.stem}.kubeconfig"
        return write_kubeconfig(
            path, server=self.server_url, ca=self.pki.ca_cert, cert=cert, key=key, user=name
        )

    def install_crds(self, paths: Iterable[Path | str], timeout: float = 30.0) -> list[str]:
        """Server-side apply every CRD in the YAML files / directories; wait until Established."""
        names = []
        for doc in load_manifests(paths):
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            name = doc["metadata"]["name"]
            self.http.request(
                "PATCH",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}?fieldManager=envtest&force=true",
                json.dumps(doc).encode(),
                content_type="application/apply-patch+yaml",
            )
            names.append(name)
        for name in names:
            poll_until(f"CRD {name} Established", functools.partial(self._crd_established, name), timeout)
        return names

    def _crd_established(self, name: str) -> bool:
        crd = self.http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    def create_namespace(self, name: str, timeout: float = 60.0) -> None:
        """Create namespace ``name`` and wait for its ``default`` ServiceAccount (Pods need it)."""
        self.http.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

        def has_sa() -> bool:
            try:
                self.http.get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
            except ApiError as exc:
                if exc.code == 404:
                    return False
                raise
            return True

        poll_until(f"ServiceAccount default in namespace {name}", has_sa, timeout)

    def delete_namespace(self, name: str) -> None:
        """Delete namespace ``name`` (the namespace controller removes its contents)."""
        try:
            self.http.request("DELETE", f"/api/v1/namespaces/{name}")
        except ApiError as exc:
            if exc.code != 404:
                raise

    def install_webhooks(
        self,
        configurations: Iterable[Path | str | dict[str, Any]] = (),
        *,
        conversion_crds: Iterable[str] = (),
        port: int | None = None,
    ) -> WebhookInstallOptions:
        """Apply Mutating/ValidatingWebhookConfigurations (YAML files, directories or dicts) with
        their webhooks pointed at a local server on 127.0.0.1:``port`` (a free one by default),
        and point the conversion webhook of the CRDs named in ``conversion_crds`` at its
        ``/convert``; returns the port and the directory with the server's certificate. Undo with
        ``uninstall_webhooks``: a configuration left behind with ``failurePolicy: Fail`` makes
        the apiserver refuse the matching requests once the server is gone."""
        port = port or free_port(avoid=set(self.ports.values()))
        certs = self.state_dir / "webhook-serving"
        return install_webhooks(
            self.http, self.pki, certs, configurations, conversion_crds=conversion_crds, port=port
        )

    def uninstall_webhooks(self, options: WebhookInstallOptions) -> None:
        """Delete the webhook configurations ``install_webhooks`` applied (absent ones are fine) and
        set the conversion of its CRDs back to ``None``."""
        uninstall_webhooks(self.http, options)

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision; return it.

        Alone this does not make the apiserver answer 410 Gone: its watch cache still serves recent
        resourceVersions from memory. Restart the apiserver (``stop_apiserver``/``start_apiserver``)
        and then compact to force a relist on clients watching from an old resourceVersion.
        """
        key = base64.b64encode(b"\0").decode()
        head = etcd_post(self.etcd_url, "/v3/kv/range", {"key": key, "limit": 1})
        revision = int(head["header"]["revision"])
        etcd_post(self.etcd_url, "/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision
