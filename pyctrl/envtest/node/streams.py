"""``kubectl exec`` on the local node: the remote-command protocol over WebSocket (kubelet
``cri/streaming/remotecommand`` with the ``k8s.io/streaming`` wsstream channels).

kube-apiserver v1.36 proxies an exec request straight to a kubelet whose Node declares the feature
``ExtendWebSocketsToKubelet`` (``status.declaredFeatures``; feature gates ExtendWebSocketsToKubelet
and NodeDeclaredFeatures, both beta and on); otherwise it would translate kubectl's WebSocket to
SPDY/3.1, which this node does not speak. The node declares it, so kubectl's ``v5.channel.k8s.io``
connection reaches ``serve_exec`` unchanged.

Guarantees:
- subprotocols ``v5.channel.k8s.io`` and ``v4.channel.k8s.io`` (binary frames, first byte the
  channel: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; v5's ``255 <channel>`` half-closes
  stdin);
- the command runs inside the container (``Container.spawn``: its mount/UTS namespaces, root,
  working directory and environment) with stdin piped only when asked;
- when it ends, channel 3 carries a ``metav1.Status``: ``Success``, or ``Failure`` with reason
  ``NonZeroExitCode`` and the exit code as the ``ExitCode`` cause — kubectl exits with that code;
- a client that goes away kills the command (its whole process group); a command that cannot be
  started, a container that is not running and ``tty`` (no terminals here) are reported as a
  ``Failure`` status with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, Protocol

from aiohttp import WSMsgType, web

from pyctrl.envtest.node.runtime import exit_code, kill_group

__all__ = ["ExecTarget", "serve_exec"]

log = logging.getLogger(__name__)

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
_CLOSE = 255


class ExecTarget(Protocol):
    name: str

    async def spawn(self, argv: list[str], *, stdin: bool) -> asyncio.subprocess.Process: ...


def _flag(request: web.Request, name: str, alias: str) -> bool:
    """A boolean query parameter by its kubelet name (``input``) or its apiserver one (``stdin``)."""
    value = request.query.get(name, request.query.get(alias, ""))
    return value.lower() in ("1", "true")


def _status(code: int | None, message: str = "") -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    if code is None:
        return {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


class _Session:
    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self._lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        async with self._lock:
            await self.ws.send_bytes(bytes([channel]) + data)

    async def pump(self, channel: int, stream: asyncio.StreamReader | None, wanted: bool) -> None:
        """Send what the command writes on ``stream`` (read and dropped when not ``wanted``)."""
        if stream is None:
            return
        while chunk := await stream.read(32 * 1024):
            if wanted:
                await self.send(channel, chunk)

    async def feed(self, stdin: asyncio.StreamWriter | None) -> None:
        """Client frames to the command's stdin until the client half-closes it or goes away."""
        async for msg in self.ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            data: bytes = msg.data
            if data[0] == _CLOSE and data[1:] == bytes([STDIN]) and stdin is not None:
                stdin.close()
                stdin = None
            elif data[0] == STDIN and stdin is not None:
                stdin.write(data[1:])
                await stdin.drain()
        if stdin is not None:
            stdin.close()


async def serve_exec(request: web.Request, target: ExecTarget) -> web.WebSocketResponse:
    """Run ``?command=...`` in ``target`` for the WebSocket client of ``request``."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    await ws.prepare(request)
    session = _Session(ws)
    argv = request.query.getall("command", [])
    try:
        if _flag(request, "tty", "tty"):
            raise RuntimeError("a terminal (tty) is not supported by the local node; exec without -t")
        if not argv:
            raise RuntimeError("no command given")
        proc = await target.spawn(argv, stdin=_flag(request, "input", "stdin"))
    except (RuntimeError, OSError) as exc:
        await session.send(ERROR, json.dumps(_status(None, str(exc))).encode())
        await ws.close()
        return ws
    log.info("exec in container %s: %s (pid %d)", target.name, argv, proc.pid)
    feeding = asyncio.create_task(session.feed(proc.stdin))
    try:
        output: asyncio.Future[Any] = asyncio.gather(
            session.pump(STDOUT, proc.stdout, _flag(request, "output", "stdout")),
            session.pump(STDERR, proc.stderr, _flag(request, "error", "stderr")),
        )
        done, _ = await asyncio.wait([output, feeding], return_when=asyncio.FIRST_COMPLETED)
        if output not in done:  # the client went away first
            kill_group(proc.pid)
        await output
        code = exit_code(await proc.wait())
        if not ws.closed:
            await session.send(ERROR, json.dumps(_status(code)).encode())
            await ws.close()
    except (ConnectionError, RuntimeError) as exc:
        log.info("exec in container %s: client gone (%s)", target.name, exc)
    finally:
        if proc.returncode is None:
            kill_group(proc.pid)
        feeding.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, RuntimeError):
            await feeding
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
    return ws
