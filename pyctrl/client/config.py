"""Connection configuration: where the apiserver is and how to authenticate.

Mirrors client-go ``rest.Config`` plus controller-runtime ``pkg/client/config.GetConfig``.
kubernetes-asyncio's loaders do the parsing and credential work (kubeconfig merging, exec and
auth-provider plugins, in-cluster service account); pyctrl only reads the result. They are imported
on the first load, without kubernetes-asyncio's generated API client (:mod:`pyctrl.client._kubeloader`).

Guarantees:

- :func:`load_config` looks where controller-runtime looks, in this order: the explicit
  ``kubeconfig`` path, ``$KUBECONFIG`` (several paths joined with ``:`` are merged), the in-cluster
  service account, ``~/.kube/config``; the first that exists wins.
- every failure — missing file, malformed YAML, unknown context, no cluster — raises
  :class:`~pyctrl.client.errors.ConfigError` naming the file and the problem; nothing is
  retried and nothing hangs.
- credentials are fetched per request through :meth:`Config.authorization`: the in-cluster token
  file is re-read once a minute (bound service-account tokens rotate), and an exec-plugin token is
  re-obtained when its ``expirationTimestamp`` passes.
- the client-side rate limiter is off (``qps=None``) by default, as in controller-runtime.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from pyctrl.client._kubeloader import loaders
from pyctrl.client.errors import ConfigError

__all__ = ["Config", "load_config", "load_incluster_config", "load_kubeconfig"]

_DEFAULT_KUBECONFIG = Path("~/.kube/config")


class _Credentials(Protocol):
    async def authorization(self) -> str | None: ...


@dataclass
class _StaticCredentials:
    value: str | None

    async def authorization(self) -> str | None:
        return self.value


@dataclass
class _LoaderCredentials:
    """Credentials held in a kubernetes-asyncio ``Configuration``, refreshed by its loader."""

    configuration: Any
    loader: Any = None

    async def authorization(self) -> str | None:
        conf = self.configuration
        hook = getattr(conf, "refresh_api_key_hook", None)
        if hook is not None:  # in-cluster: re-reads the token file when a minute has passed
            hook(conf)
        if self.loader is not None and getattr(self.loader, "_user", None) and "exec" in self.loader._user:
            await self.loader.load_from_exec_plugin()  # no-op until the token expires
            if getattr(self.loader, "token", None):
                conf.api_key["BearerToken"] = self.loader.token
        token = conf.api_key.get("BearerToken")
        return str(token) if token else None


@dataclass
class Config:
    """What the REST client needs: endpoint, TLS material, credentials, timeouts and limits."""

    host: str
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    #: Seconds for one non-watch request (connect + response). ``None``: no limit.
    timeout: float | None = 30.0
    #: Seconds for the TCP connect and TLS handshake of any request, watches included.
    connect_timeout: float = 10.0
    #: Extra attempts for a transiently failing read (see :mod:`pyctrl.client.rest`).
    retries: int = 4
    #: Client-side token bucket: requests per second (``None`` = off) and burst size.
    qps: float | None = None
    burst: int = 10
    user_agent: str = "pyctrl/0.1"
    credentials: _Credentials = field(default_factory=lambda: _StaticCredentials(None), repr=False)

    def __post_init__(self) -> None:
        if not self.host.startswith(("https://", "http://")):
            raise ConfigError(f"apiserver host must be an http(s) URL, got {self.host!r}")
        self.host = self.host.rstrip("/")
        if self.qps is not None and self.qps <= 0:
            raise ConfigError(f"qps must be positive or None, got {self.qps}")
        if self.connect_timeout <= 0:
            raise ConfigError(f"connect_timeout must be positive, got {self.connect_timeout}")
        if self.retries < 0:
            raise ConfigError(f"retries must be >= 0, got {self.retries}")
        if self.burst < 1:
            raise ConfigError(f"burst must be at least 1, got {self.burst}")

    async def authorization(self) -> str | None:
        """The ``Authorization`` header value for the next request (refreshed when due)."""
        return await self.credentials.authorization()

    def with_options(self, **changes: Any) -> Config:
        """A copy with some fields changed, e.g. ``cfg.with_options(qps=20, burst=40)``."""
        return replace(self, **changes)

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for aiohttp (``False`` when verification is disabled or plain HTTP)."""
        if not self.host.startswith("https://"):
            return False
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if not self.verify_ssl:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS material for {self.host}: {exc}") from exc
        return ctx


def _from_configuration(conf: Any, loader: Any = None) -> Config:
    host = str(conf.host or "")
    if not host:
        raise ConfigError("configuration has no apiserver host")
    return Config(
        host=host,
        ca_file=conf.ssl_ca_cert or None,
        cert_file=conf.cert_file or None,
        key_file=conf.key_file or None,
        verify_ssl=bool(conf.verify_ssl),
        tls_server_name=getattr(conf, "tls_server_name", None) or None,
        credentials=_LoaderCredentials(conf, loader),
    )


def _kubeconfig_paths(path: str | os.PathLike[str] | None) -> str:
    if path is not None:
        explicit = Path(path).expanduser()
        if not explicit.is_file():
            raise ConfigError(f"kubeconfig {explicit} does not exist")
        paths = str(explicit)
    else:
        paths = os.environ.get("KUBECONFIG") or str(_DEFAULT_KUBECONFIG.expanduser())
    existing = [Path(p).expanduser() for p in paths.split(os.pathsep) if p and Path(p).expanduser().is_file()]
    if not existing:
        raise ConfigError(f"no kubeconfig found at {paths}")
    for file in existing:
        try:
            doc = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"kubeconfig {file} is not readable YAML: {exc}") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {file} is empty or not a mapping")
    return paths


def _default_kubeconfig() -> Path:
    return _DEFAULT_KUBECONFIG.expanduser()


async def load_kubeconfig(
    path: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> Config:
    """Load a kubeconfig: ``path`` if given, else ``$KUBECONFIG``, else ``~/.kube/config``.

    ``context`` selects a context other than ``current-context``.
    """
    paths = _kubeconfig_paths(path)
    ka = loaders()
    conf = ka.Configuration()
    try:
        merger = ka.kube_config.KubeConfigMerger(paths)
        if merger.config is None or not isinstance(merger.config.value, dict):
            raise ConfigError(f"kubeconfig {paths} is empty or not a mapping")
        if context is None and not merger.config.value.get("current-context"):
            raise ConfigError(f"kubeconfig {paths} has no current-context and no context was given")
        loader = ka.kube_config.KubeConfigLoader(
            config_dict=merger.config, config_base_path=None, active_context=context
        )
        await loader.load_and_set(conf)
    except ConfigError:
        raise
    except ka.ConfigException as exc:
        raise ConfigError(f"kubeconfig {paths}: {exc}") from exc
    except (AssertionError, KeyError, TypeError, AttributeError, ValueError, OSError) as exc:
        what = f"context {context!r}" if context else "the current context"
        raise ConfigError(
            f"kubeconfig {paths}: cannot resolve {what} to a cluster and user ({exc!r})"
        ) from exc
    except Exception as exc:  # yaml errors and plugin failures come in many types
        raise ConfigError(f"kubeconfig {paths}: {exc}") from exc
    return _from_configuration(conf, loader)


async def load_incluster_config(
    *,
    token_file: str | None = None,
    ca_file: str | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Use the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT`` and the mounted token).

    ``token_file`` and ``ca_file`` default to the service-account mount
    (``/var/run/secrets/kubernetes.io/serviceaccount/token`` and ``ca.crt``). The token file is
    re-read at most once a minute, so a rotated token is picked up.
    """
    ka = loaders()
    incluster = ka.incluster_config
    conf = ka.Configuration()
    loader = incluster.InClusterConfigLoader(
        token_filename=incluster.SERVICE_TOKEN_FILENAME if token_file is None else token_file,
        cert_filename=incluster.SERVICE_CERT_FILENAME if ca_file is None else ca_file,
        try_refresh_token=True,
        environ=os.environ if environ is None else environ,
    )
    try:
        loader.load_and_set(conf)
    except ka.ConfigException as exc:
        raise ConfigError(f"not running in a cluster: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"in-cluster configuration: {exc}") from exc
    return _from_configuration(conf)


async def load_config(
    kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> Config:
    """controller-runtime ``GetConfig``: explicit path, ``$KUBECONFIG``, in-cluster, ``~/.kube/config``."""
    if kubeconfig is not None or os.environ.get("KUBECONFIG"):
        return await load_kubeconfig(kubeconfig, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
        return await load_incluster_config()
    return await load_kubeconfig(_default_kubeconfig(), context=context)
