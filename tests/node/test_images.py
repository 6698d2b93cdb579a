"""Image -> executable mapping and the argv rule (command, args, ENTRYPOINT stand-in)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from pyctrl.envtest.node.images import (
    DEFAULT_IMAGE_MAP,
    ImageConfig,
    ImageMap,
    ImageNotMapped,
    StartError,
    resolve_argv,
)

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
REDIS = shutil.which("redis-server", path=ENV["PATH"])
SH = shutil.which("sh", path=ENV["PATH"])


REDIS_IMAGE = ImageMap.parse(DEFAULT_IMAGE_MAP).config_for("redis:7")


def test_the_default_map_runs_redis_images_with_redis_server() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    for image in ("redis", "redis:7.2", "redis@sha256:abc"):
        assert image_map.config_for(image) == ImageConfig(("redis-server",))


def test_the_first_matching_rule_wins() -> None:
    image_map = ImageMap.parse(["docker.io/library/redis*=redis-server", "*/redis*=/opt/other"])
    assert image_map.config_for("docker.io/library/redis:7").entrypoint == ("redis-server",)
    assert image_map.config_for("quay.io/x/redis:7").entrypoint == ("/opt/other",)


def test_a_rule_carries_an_entrypoint_with_arguments_and_env_words_before_it() -> None:
    image_map = ImageMap.parse(["ex.com/app*=PATH=/opt/bin:/bin 'GREETING=hi there' /opt/bin/app --serve"])
    assert image_map.config_for("ex.com/app:1") == ImageConfig(
        ("/opt/bin/app", "--serve"), (("PATH", "/opt/bin:/bin"), ("GREETING", "hi there"))
    )


def test_an_unmapped_image_raises_image_not_mapped_naming_the_rules() -> None:
    with pytest.raises(ImageNotMapped, match=r"example\.com/nope:1.*redis\*=redis-server"):
        ImageMap.parse(DEFAULT_IMAGE_MAP).config_for("example.com/nope:1")


@pytest.mark.parametrize("spec", ["no-equals", "=x", "redis*=", "redis*=A=1 B=2", "x*='unclosed"])
def test_a_malformed_rule_is_rejected(spec: str) -> None:
    with pytest.raises(ValueError, match=r"PATTERN=\[NAME=VALUE \.\.\.\] EXECUTABLE"):
        ImageMap.parse([spec])


def test_no_command_runs_the_mapped_entrypoint_with_the_args() -> None:
    assert resolve_argv(REDIS_IMAGE, {"image": "redis:7", "args": ["--port", "7000"]}, ENV) == (
        REDIS,
        ["redis-server", "--port", "7000"],
    )
    assert resolve_argv(REDIS_IMAGE, {"image": "redis:7"}, ENV) == (REDIS, ["redis-server"])


def test_a_command_replaces_the_mapped_executable() -> None:
    container = {"image": "redis:7", "command": ["sh", "-c"], "args": ["exit 3"]}
    assert resolve_argv(REDIS_IMAGE, container, ENV) == (SH, ["sh", "-c", "exit 3"])


def test_args_starting_with_a_program_run_that_program_like_docker_entrypoint() -> None:
    container = {"image": "redis:7", "args": ["redis-server", "--port", "7000"]}
    assert resolve_argv(REDIS_IMAGE, container, ENV) == (REDIS, ["redis-server", "--port", "7000"])


def test_a_command_that_is_not_on_path_is_a_start_error() -> None:
    with pytest.raises(
        StartError, match=r'exec: "docker-entrypoint\.sh": executable file not found in \$PATH'
    ):
        resolve_argv(REDIS_IMAGE, {"image": "redis:7", "command": ["docker-entrypoint.sh"]}, ENV)


def test_the_image_must_be_mapped_even_when_the_command_exists() -> None:
    with pytest.raises(ImageNotMapped):
        ImageMap.parse(DEFAULT_IMAGE_MAP).config_for("busybox")


def _operator_env(image: ImageConfig) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", **dict(image.env)}  # the image's ENV over the node's base


@pytest.mark.parametrize("image", ["pyctrl/rediscluster-operator:0.1.0", "ghcr.io/x/rediscluster-operator"])
def test_the_operator_image_runs_this_checkouts_entry_point_not_redis_server(image: str) -> None:
    config = ImageMap.parse(DEFAULT_IMAGE_MAP).config_for(image)
    env = _operator_env(config)
    executable, argv = resolve_argv(config, {"image": image, "args": ["--help"]}, env)
    assert argv == [sys.executable, "-m", "examples.rediscluster", "--help"]
    out = subprocess.run(
        [executable, *argv[1:]], env=env, cwd="/", capture_output=True, text=True, timeout=60, check=True
    )
    assert "The RedisCluster operator." in out.stdout


def test_a_command_naming_python_in_the_operator_image_finds_the_images_python() -> None:
    """A Job of the operator image (``command: [python, -m, ...]``) runs the same interpreter."""
    config = ImageMap.parse(DEFAULT_IMAGE_MAP).config_for("pyctrl/rediscluster-operator:0.1.0")
    env = _operator_env(config)
    container = {"image": "x", "command": ["python", "-m", "examples.rediscluster", "--help"]}
    executable, argv = resolve_argv(config, container, env)
    assert argv[0] == "python"
    out = subprocess.run(
        [executable, *argv[1:]], env=env, cwd="/", capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "The RedisCluster operator." in out.stdout
