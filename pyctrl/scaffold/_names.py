"""Names the scaffolder accepts, each refused with the rule it breaks (kubebuilder's checks).

- a kind is UpperCamelCase (``Memcached``, ``RedisCluster``): a letter A-Z, then letters and
  digits, at most 63 characters;
- a group is a DNS-1123 label (``cache``): lower-case letters, digits and ``-``, starting and ending
  alphanumeric, at most 63 characters; joined with the domain it makes the API group
  (``cache.example.com``);
- a domain is a DNS-1123 subdomain with at least one dot (``example.com``);
- a version is Kubernetes' ``v<N>[alpha|beta<M>]`` (``v1``, ``v1alpha1``, ``v2beta3``);
- a project name is a DNS-1123 label (it names the chart, the image and the Python package, with
  ``-`` becoming ``_``).

:func:`plural` is kubebuilder's English pluralisation of the lower-cased kind.
"""

from __future__ import annotations

import re

__all__ = [
    "ScaffoldError",
    "check_domain",
    "check_group",
    "check_kind",
    "check_project_name",
    "check_version",
    "plural",
    "snake",
]


class ScaffoldError(ValueError):
    """A command cannot run as asked; the message says what to change."""


_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_MAX_LABEL = 63


def check_kind(kind: str) -> str:
    if not _KIND.match(kind) or len(kind) > _MAX_LABEL:
        raise ScaffoldError(
            f"--kind {kind!r}: a kind must be UpperCamelCase (a letter A-Z, then letters and digits, "
            f"at most {_MAX_LABEL} characters), e.g. Memcached"
        )
    return kind


def _label(flag: str, value: str, example: str) -> str:
    if not _LABEL.match(value) or len(value) > _MAX_LABEL:
        raise ScaffoldError(
            f"{flag} {value!r}: must be a DNS-1123 label (lower-case letters, digits and '-', starting "
            f"and ending with a letter or digit, at most {_MAX_LABEL} characters), e.g. {example}"
        )
    return value


def check_group(group: str) -> str:
    return _label("--group", group, "cache")


def check_project_name(name: str) -> str:
    _label("--project", name, "memcached-operator")
    if not name[0].isalpha():
        raise ScaffoldError(f"--project {name!r}: must start with a letter (it names a Python package)")
    return name


def check_domain(domain: str) -> str:
    parts = domain.split(".")
    if len(parts) < 2 or len(domain) > 253 or not all(_LABEL.match(p) for p in parts):
        raise ScaffoldError(
            f"--domain {domain!r}: must be a DNS-1123 subdomain with at least one dot (lower-case "
            "labels of letters, digits and '-' joined by '.'), e.g. example.com"
        )
    return domain


def check_version(version: str) -> str:
    if not _VERSION.match(version):
        raise ScaffoldError(
            f"--version {version!r}: must be a Kubernetes API version: v<N> optionally followed by "
            "alpha<M> or beta<M>, e.g. v1, v1alpha1, v2beta1"
        )
    return version


def snake(name: str) -> str:
    """``RedisCluster`` → ``redis_cluster``; ``memcached-operator`` → ``memcached_operator``."""
    name = name.replace("-", "_")
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def plural(kind: str) -> str:
    """kubebuilder's plural of a kind: lower-cased, then English rules (``Memcached`` → memcacheds,
    ``Policy`` → policies, ``Ingress`` → ingresses)."""
    lower = kind.lower()
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", lower):
        return lower + "es"
    return lower + "s"
