"""Pod volumes written to the host: files, modes, optional sources, tokens and claims."""

from __future__ import annotations

import asyncio
import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest.node.envvars import PodFacts, decode_data
from pyctrl.envtest.node.volumes import (
    VolumeContext,
    VolumeNotReady,
    prepare_volumes,
    refresh_volumes,
    remove_pod_volumes,
)

OBJECTS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("ConfigMap", "ns", "cfg"): {"data": {"redis.conf": "maxmemory 1mb\n", "other": "x"}},
    ("ConfigMap", "ns", "kube-root-ca.crt"): {"data": {"ca.crt": "CERT"}},
    ("Secret", "ns", "creds"): {"data": {"password": base64.b64encode(b"pw").decode()}},
}


async def lookup(kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
    obj = OBJECTS.get((kind, namespace, name))
    return None if obj is None else decode_data(obj, kind)


def prepare(p: dict[str, Any], pod_dir: Path, ctx: VolumeContext) -> dict[str, str]:
    return asyncio.run(prepare_volumes(p, pod_dir, ctx))


def pod(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-0", "namespace": "ns", "uid": "u1", "labels": {"app": "web"}},
        "spec": {"volumes": volumes, "containers": [{"name": "c"}], "serviceAccountName": "default"},
    }


def context(
    p: dict[str, Any], token: str | Exception = "TOKEN", claims: dict[str, str] | None = None
) -> VolumeContext:
    async def request_token(
        namespace: str, sa: str, *, audience: str | None, expiration: int, pod: str, uid: str
    ) -> str:
        assert (namespace, sa, pod, uid) == ("ns", "default", "web-0", "u1")
        if isinstance(token, Exception):
            raise token
        return token

    return VolumeContext(
        facts=PodFacts(p, "127.0.1.1", "127.0.0.1", {"cpu": "2"}),
        lookup=lookup,
        request_token=request_token,
        claim_path=lambda ns, name: (claims or {}).get(f"{ns}/{name}"),
    )


def test_config_map_secret_and_downward_api_files_with_their_modes(tmp_path: Path) -> None:
    p = pod(
        [
            {
                "name": "conf",
                "configMap": {"name": "cfg", "items": [{"key": "redis.conf", "path": "r/redis.conf"}]},
            },
            {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 0o400}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
            {"name": "scratch", "emptyDir": {}},
        ]
    )
    paths = prepare(p, tmp_path, context(p))
    conf = Path(paths["conf"])
    assert (conf / "r" / "redis.conf").read_text() == "maxmemory 1mb\n"
    assert not (conf / "other").exists()
    secret = Path(paths["sec"]) / "password"
    assert secret.read_bytes() == b"pw"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o400
    assert (Path(paths["info"]) / "labels").read_text() == 'app="web"'
    assert Path(paths["scratch"]).is_dir()
    assert list(Path(paths["scratch"]).iterdir()) == []
    remove_pod_volumes(tmp_path)
    assert not (tmp_path / "volumes").exists()


def test_a_changed_secret_is_swapped_in_whole_and_unchanged_volumes_are_left_alone(tmp_path: Path) -> None:
    secrets = {"tls.crt": b"cert-1", "tls.key": b"key-1"}

    async def rotating(kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
        return dict(secrets) if kind == "Secret" else await lookup(kind, namespace, name)

    p = pod(
        [{"name": "tls", "secret": {"secretName": "tls"}}, {"name": "conf", "configMap": {"name": "cfg"}}]
    )
    ctx = context(p)
    ctx = VolumeContext(ctx.facts, rotating, ctx.request_token, ctx.claim_path)
    paths = prepare(p, tmp_path, ctx)
    tls = Path(paths["tls"])
    assert (tls / "tls.crt").is_symlink()
    assert (tls / "..data").is_symlink()
    first = (tls / "..data").resolve()
    assert asyncio.run(refresh_volumes(p, tmp_path, ctx)) == []  # nothing changed: nothing written
    assert (tls / "..data").resolve() == first

    secrets.update({"tls.crt": b"cert-2", "tls.key": b"key-2", "ca.crt": b"ca"})
    assert asyncio.run(refresh_volumes(p, tmp_path, ctx)) == ["tls"]
    assert [(tls / k).read_bytes() for k in ("tls.crt", "tls.key", "ca.crt")] == [b"cert-2", b"key-2", b"ca"]
    assert not first.exists()  # the old generation is gone
    assert sorted(e.name for e in tls.iterdir() if not e.name.startswith("..")) == [
        "ca.crt",
        "tls.crt",
        "tls.key",
    ]

    del secrets["ca.crt"]
    assert asyncio.run(refresh_volumes(p, tmp_path, ctx)) == ["tls"]
    assert not (tls / "ca.crt").exists()
    assert (Path(paths["conf"]) / "redis.conf").read_text() == "maxmemory 1mb\n"


def kube_api_access() -> dict[str, Any]:
    return {
        "name": "kube-api-access-x",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }


def test_the_service_account_volume_has_token_ca_and_namespace(tmp_path: Path) -> None:
    p = pod([kube_api_access()])
    directory = Path((prepare(p, tmp_path, context(p)))["kube-api-access-x"])
    visible = sorted(f.name for f in directory.iterdir() if not f.name.startswith(".."))  # AtomicWriter's
    assert visible == ["ca.crt", "namespace", "token"]
    assert (directory / "token").read_text() == "TOKEN"
    assert (directory / "namespace").read_text() == "ns"


def test_a_failed_token_request_leaves_the_token_out_but_the_pod_can_start(tmp_path: Path) -> None:
    p = pod([kube_api_access()])
    paths = prepare(p, tmp_path, context(p, token=OSError("refused")))
    names = Path(paths["kube-api-access-x"]).iterdir()
    assert sorted(f.name for f in names if not f.name.startswith("..")) == ["ca.crt", "namespace"]


def test_missing_sources_make_the_pod_wait_unless_optional(tmp_path: Path) -> None:
    p = pod([{"name": "conf", "configMap": {"name": "absent"}}])
    with pytest.raises(VolumeNotReady, match='configmap "absent" not found'):
        prepare(p, tmp_path, context(p))
    p = pod([{"name": "conf", "configMap": {"name": "cfg", "items": [{"key": "nope", "path": "x"}]}}])
    with pytest.raises(VolumeNotReady, match='key "nope" not found'):
        prepare(p, tmp_path, context(p))
    p = pod([{"name": "conf", "secret": {"secretName": "absent", "optional": True}}])
    assert Path((prepare(p, tmp_path, context(p)))["conf"]).is_dir()


def test_claims_resolve_to_their_bound_volume_and_wait_while_unbound(tmp_path: Path) -> None:
    p = pod(
        [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ]
    )
    with pytest.raises(VolumeNotReady, match='persistentvolumeclaim "data-web-0" is not bound'):
        prepare(p, tmp_path, context(p))
    claims = {"ns/data-web-0": "/pv/one", "ns/web-0-scratch": "/pv/two"}
    assert prepare(p, tmp_path, context(p, claims=claims)) == {
        "data": "/pv/one",
        "scratch": "/pv/two",
    }


def test_unsupported_volume_types_are_reported(tmp_path: Path) -> None:
    p = pod([{"name": "nfs", "nfs": {"server": "x", "path": "/"}}])
    with pytest.raises(VolumeNotReady, match=r"type \['nfs'\] is not supported"):
        prepare(p, tmp_path, context(p))


def test_host_path_directory_or_create_is_created(tmp_path: Path) -> None:
    target = tmp_path / "host" / "dir"
    p = pod([{"name": "h", "hostPath": {"path": str(target), "type": "DirectoryOrCreate"}}])
    assert prepare(p, tmp_path / "pod", context(p)) == {"h": str(target)}
    assert target.is_dir()


FS_GROUP = 2345


def _group_and_mode(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_gid, stat.S_IMODE(info.st_mode)


def test_fs_group_owns_claims_and_empty_dirs_and_makes_api_files_group_readable(tmp_path: Path) -> None:
    claim = tmp_path / "pv"
    (claim / "sub").mkdir(parents=True)
    (claim / "sub" / "dump.rdb").write_bytes(b"x")
    (claim / "sub" / "dump.rdb").chmod(0o600)
    p = pod(
        [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        ]
    )
    p["spec"]["securityContext"] = {"fsGroup": FS_GROUP}
    paths = prepare(p, tmp_path / "pod", context(p, claims={"ns/data-web-0": str(claim)}))
    assert _group_and_mode(claim) == (FS_GROUP, 0o2775)
    assert _group_and_mode(claim / "sub") == (FS_GROUP, 0o2775)
    assert _group_and_mode(claim / "sub" / "dump.rdb") == (FS_GROUP, 0o660)
    assert _group_and_mode(Path(paths["scratch"])) == (FS_GROUP, 0o2777)
    secret = Path(paths["creds"]) / "password"
    assert _group_and_mode(secret.resolve()) == (FS_GROUP, 0o440)  # 0400 + group read
    assert secret.read_bytes() == b"pw"
    # refreshed with the same content: nothing rewritten (the group bits are part of what is due)
    assert asyncio.run(refresh_volumes(p, tmp_path / "pod", context(p))) == []


def test_without_fs_group_nothing_is_chowned_and_empty_dirs_are_world_writable(tmp_path: Path) -> None:
    claim = tmp_path / "pv"
    claim.mkdir()
    claim.chmod(0o700)
    p = pod(
        [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "scratch", "emptyDir": {}}]
    )
    paths = prepare(p, tmp_path / "pod", context(p, claims={"ns/c": str(claim)}))
    assert _group_and_mode(claim) == (0, 0o700)
    assert _group_and_mode(Path(paths["scratch"])) == (0, 0o777)


def test_on_root_mismatch_skips_a_claim_whose_root_is_already_right(tmp_path: Path) -> None:
    claim = tmp_path / "pv"
    claim.mkdir()
    (claim / "file").write_bytes(b"")
    (claim / "file").chmod(0o600)
    os.chown(claim, -1, FS_GROUP)
    claim.chmod(0o2770)
    p = pod([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}])
    p["spec"]["securityContext"] = {"fsGroup": FS_GROUP, "fsGroupChangePolicy": "OnRootMismatch"}
    prepare(p, tmp_path / "pod", context(p, claims={"ns/c": str(claim)}))
    assert _group_and_mode(claim / "file") == (0, 0o600)  # not walked: the root matched
    p["spec"]["securityContext"] = {"fsGroup": FS_GROUP}  # Always (the default) walks it
    prepare(p, tmp_path / "pod2", context(p, claims={"ns/c": str(claim)}))
    assert _group_and_mode(claim / "file") == (FS_GROUP, 0o660)
