"""Image -> executable mapping and the argv rule (command, args, ENTRYPOINT stand-in)."""

from __future__ import annotations

import shutil

import pytest

from pyctrl.envtest.node.images import DEFAULT_IMAGE_MAP, ImageMap, ImageNotMapped, StartError, resolve_argv

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
REDIS = shutil.which("redis-server", path=ENV["PATH"])
SH = shutil.which("sh", path=ENV["PATH"])


def test_the_default_map_runs_redis_images_with_redis_server() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    for image in ("redis", "redis:7.2", "redis@sha256:abc"):
        assert image_map.executable_for(image) == "redis-server"


def test_the_first_matching_rule_wins() -> None:
    image_map = ImageMap.parse(["docker.io/library/redis*=redis-server", "*/redis*=/opt/other"])
    assert image_map.executable_for("docker.io/library/redis:7") == "redis-server"
    assert image_map.executable_for("quay.io/x/redis:7") == "/opt/other"


def test_an_unmapped_image_raises_image_not_mapped_naming_the_rules() -> None:
    with pytest.raises(ImageNotMapped, match=r"example\.com/nope:1.*redis\*=redis-server"):
        ImageMap.parse(DEFAULT_IMAGE_MAP).executable_for("example.com/nope:1")


@pytest.mark.parametrize("spec", ["no-equals", "=x", "redis*="])
def test_a_malformed_rule_is_rejected(spec: str) -> None:
    with pytest.raises(ValueError, match="PATTERN=EXECUTABLE"):
        ImageMap.parse([spec])


def test_no_command_runs_the_mapped_executable_with_the_args() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    assert resolve_argv(image_map, {"image": "redis:7", "args": ["--port", "7000"]}, ENV) == (
        REDIS,
        ["redis-server", "--port", "7000"],
    )
    assert resolve_argv(image_map, {"image": "redis:7"}, ENV) == (REDIS, ["redis-server"])


def test_a_command_replaces_the_mapped_executable() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    container = {"image": "redis:7", "command": ["sh", "-c"], "args": ["exit 3"]}
    assert resolve_argv(image_map, container, ENV) == (SH, ["sh", "-c", "exit 3"])


def test_args_starting_with_a_program_run_that_program_like_docker_entrypoint() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    container = {"image": "redis:7", "args": ["redis-server", "--port", "7000"]}
    assert resolve_argv(image_map, container, ENV) == (REDIS, ["redis-server", "--port", "7000"])


def test_a_command_that_is_not_on_path_is_a_start_error() -> None:
    image_map = ImageMap.parse(DEFAULT_IMAGE_MAP)
    with pytest.raises(
        StartError, match=r'exec: "docker-entrypoint\.sh": executable file not found in \$PATH'
    ):
        resolve_argv(image_map, {"image": "redis:7", "command": ["docker-entrypoint.sh"]}, ENV)


def test_the_image_must_be_mapped_even_when_the_command_exists() -> None:
    with pytest.raises(ImageNotMapped):
        resolve_argv(ImageMap.parse(DEFAULT_IMAGE_MAP), {"image": "busybox", "command": ["sh"]}, ENV)
