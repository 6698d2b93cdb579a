"""The node's kubelet API through the apiserver: ``kubectl logs`` (the current and the previous
instance of a container, --tail, -c, -f), ``kubectl exec`` (output, stdin, exit codes), what the
node refuses, and who may call the kubelet API."""

from __future__ import annotations

import json
import queue
import shlex
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pyctrl.envtest import Environment, poll_until
from tests.node.helpers import kubectl

pytestmark = pytest.mark.controlplane

# Each instance says which one it is (counted in an emptyDir, which outlives container restarts);
# the first exits 1, so the pod has a previous instance.
MAIN = (
    "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; "
    'echo "instance $n"; echo "second line"; [ $n -ge 2 ] || exit 1; exec sleep 3600'
)
TICKER = 'i=0; while true; do echo "tick $i"; i=$((i+1)); sleep 0.3; done'


@pytest.fixture
def talker(envtest: Environment, namespace: str) -> str:
    """A pod whose container ``main`` restarted once and whose ``ticker`` prints all along."""
    pod = {
        "metadata": {"name": "talker"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "redis:7",
                    "command": ["sh", "-c", MAIN],
                    "volumeMounts": [{"name": "state", "mountPath": "/state"}],
                },
                {
                    "name": "ticker",
                    "image": "redis:7",
                    "command": ["sh", "-c", TICKER],
                    "env": [{"name": "GREETING", "value": "hello from ticker"}],
                },
            ],
            "volumes": [{"name": "state", "emptyDir": {}}],
        },
    }
    envtest.http.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)

    def second_instance_runs() -> bool:
        status = envtest.http.get(f"/api/v1/namespaces/{namespace}/pods/talker").get("status", {})
        main = [s for s in status.get("containerStatuses") or [] if s["name"] == "main"]
        return bool(main) and main[0]["restartCount"] == 1 and "running" in main[0]["state"]

    poll_until("main's second instance running", second_instance_runs, 60)
    return "talker"


def test_kubectl_logs_shows_the_current_and_the_previous_instance(
    envtest: Environment, namespace: str, talker: str
) -> None:
    def logs(*args: str) -> str:
        done = kubectl(envtest, "logs", "-n", namespace, talker, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert logs("-c", "main") == "instance 2\nsecond line\n"
    assert logs("-c", "main", "--previous") == "instance 1\nsecond line\n"
    assert logs("-c", "main", "--tail", "1") == "second line\n"
    assert logs("-c", "main", "--previous", "--tail", "1") == "second line\n"
    assert logs("-c", "main", "--limit-bytes", "8") == "instance"
    assert logs("-c", "ticker", "--tail", "1").startswith("tick ")


def test_kubectl_logs_follow_streams_what_the_container_writes(
    envtest: Environment, namespace: str, talker: str
) -> None:
    assert envtest.bin_dir is not None
    argv = [str(envtest.bin_dir / "kubectl"), f"--kubeconfig={envtest.kubeconfig_path}"]
    argv += ["logs", "-f", "-n", namespace, talker, "-c", "ticker", "--tail", "1"]
    lines: queue.Queue[str] = queue.Queue()

    def read(stream: Any) -> None:
        for line in stream:
            lines.put(line)

    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        threading.Thread(target=read, args=(proc.stdout,), daemon=True).start()
        try:
            seen = [lines.get(timeout=30) for _ in range(4)]  # the last line, then three new ones
        finally:
            proc.kill()
    ticks = [int(line.split()[1]) for line in seen]
    assert ticks == list(range(ticks[0], ticks[0] + 4))


def test_kubectl_logs_errors_are_clear(envtest: Environment, namespace: str, talker: str) -> None:
    no_previous = kubectl(envtest, "logs", "-n", namespace, talker, "-c", "ticker", "--previous")
    assert no_previous.returncode != 0
    assert 'previous terminated container "ticker" in pod "talker" not found' in no_previous.stderr
    since = kubectl(envtest, "logs", "-n", namespace, talker, "-c", "ticker", "--since=1h")
    assert since.returncode != 0
    assert "sinceSeconds is not supported by the local node's logs" in since.stderr
    attach = kubectl(envtest, "attach", "-n", namespace, talker, "-c", "ticker")
    assert attach.returncode != 0
    assert "attach is not supported by the local node" in attach.stderr


def test_kubectl_exec_runs_in_the_container_with_its_environment_stdin_and_exit_code(
    envtest: Environment, namespace: str, talker: str
) -> None:
    script = 'echo "$GREETING on $(hostname)"; ls /state >&2; exit 3'
    done = kubectl(envtest, "exec", "-n", namespace, talker, "-c", "ticker", "--", "sh", "-c", script)
    assert done.returncode == 3
    assert done.stdout == f"hello from ticker on {talker}\n"
    assert "ls: cannot access '/state'" in done.stderr  # the other container's mount is not here
    main = kubectl(envtest, "exec", "-n", namespace, talker, "-c", "main", "--", "cat", "/state/n")
    assert (main.returncode, main.stdout) == (0, "2\n")
    assert envtest.bin_dir is not None
    argv = [str(envtest.bin_dir / "kubectl"), f"--kubeconfig={envtest.kubeconfig_path}"]
    argv += ["exec", "-i", "-n", namespace, talker, "-c", "main", "--", "wc", "-l"]
    piped = subprocess.run(argv, input="a\nb\nc\n", capture_output=True, text=True, timeout=60, check=False)
    assert (piped.returncode, piped.stdout.strip()) == (0, "3")
    missing = kubectl(envtest, "exec", "-n", namespace, talker, "-c", "main", "--", "no-such-program")
    assert missing.returncode == 127
    assert "no-such-program" in missing.stderr


def test_kubectl_exec_with_a_terminal(envtest: Environment, namespace: str, talker: str) -> None:
    assert envtest.bin_dir is not None
    argv = [str(envtest.bin_dir / "kubectl"), f"--kubeconfig={envtest.kubeconfig_path}"]
    argv += ["exec", "-it", "-n", namespace, talker, "-c", "main", "--"]
    argv += ["sh", "-c", 'tty; echo "TERM=$TERM"; exit 7']
    # kubectl asks for a terminal only when its own stdin is one: script(1) gives it a pty.
    done = subprocess.run(
        ["script", "-qec", shlex.join(argv), "/dev/null"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 7, done.stdout + done.stderr
    assert "/dev/pts/" in done.stdout  # the command's stdin is a terminal
    assert "TERM=xterm" in done.stdout


def _kubelet_url(envtest: Environment, path: str) -> str:
    node = envtest.http.get("/api/v1/nodes/local-node")
    [ip] = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    return f"https://{ip}:{node['status']['daemonEndpoints']['kubeletEndpoint']['Port']}{path}"


def _get(url: str, ctx: ssl.SSLContext) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_kubelet_api_wants_a_client_certificate_from_the_cluster_ca_with_rights_on_the_node(
    envtest: Environment, namespace: str, talker: str, tmp_path: Path
) -> None:
    url = _kubelet_url(envtest, f"/containerLogs/{namespace}/{talker}/main")
    anonymous = ssl.create_default_context(cafile=str(envtest.pki.ca_cert))  # verifies the node's cert
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        _get(url, anonymous)

    def with_cert(user: str, groups: tuple[str, ...]) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(envtest.pki.ca_cert))
        cert, key = envtest.pki.client_cert(user, groups)
        ctx.load_cert_chain(str(cert), str(key))
        return ctx

    status, body = _get(url, with_cert("nobody", ()))
    assert status == 403
    assert "user=nobody" in body
    assert "subresource=proxy" in body
    status, body = _get(url, with_cert("root", ("system:masters",)))
    assert (status, body) == (200, "instance 2\nsecond line\n")
    status, listing = _get(_kubelet_url(envtest, "/pods"), with_cert("root", ("system:masters",)))
    assert status == 200
    pods: list[dict[str, Any]] = json.loads(listing)["items"]
    assert f"{namespace}/{talker}" in {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
