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
- ``tty``: the command runs on a new pseudo-terminal (its controlling terminal, ``TERM=xterm``
  unless the container sets it), stdout carries what it writes there, resize frames set its size;
- a client that goes away kills the command (its whole process group); a command that cannot be
  started or a container that is not running is reported as a ``Failure`` status with the
  reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import struct
import termios
from collections.abc import Coroutine
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

    async def spawn(
        self, argv: list[str], *, stdin: bool, terminal: int | None = None
    ) -> asyncio.subprocess.Process: ...


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
        while True:
            try:
                chunk = await stream.read(32 * 1024)
            except OSError:  # a terminal whose last holder closed it (EIO)
                return
            if not chunk:
                return
            if wanted:
                await self.send(channel, chunk)

    async def feed(self, stdin: Input) -> None:
        """Client frames to the command's stdin (and terminal size) until the client half-closes
        stdin or goes away."""
        async for msg in self.ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            data: bytes = msg.data
            if data[0] == _CLOSE and data[1:] == bytes([STDIN]):
                stdin.close()
            elif data[0] == STDIN:
                await stdin.write(data[1:])
            elif data[0] == RESIZE:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    size = json.loads(data[1:])
                    stdin.resize(int(size["Width"]), int(size["Height"]))
        stdin.close()


class Input:
    """The command's stdin: a pipe, or the leader end of its terminal (which also has a size)."""

    def __init__(self, pipe: asyncio.StreamWriter | None = None, terminal: int | None = None) -> None:
        self.pipe, self.terminal = pipe, terminal

    async def write(self, data: bytes) -> None:
        if self.pipe is not None and not self.pipe.is_closing():
            self.pipe.write(data)
            await self.pipe.drain()
        elif self.terminal is not None:
            await asyncio.to_thread(os.write, self.terminal, data)

    def resize(self, width: int, height: int) -> None:
        if self.terminal is not None:
            fcntl.ioctl(self.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def close(self) -> None:
        """End of input: the pipe is closed (a terminal has no end of its own: EOF is a ^D)."""
        if self.pipe is not None and not self.pipe.is_closing():
            self.pipe.close()

    def release(self) -> None:
        """Close the terminal's leader end once the command is gone."""
        if self.terminal is not None:
            os.close(self.terminal)
            self.terminal = None


async def _terminal_reader(leader: int) -> asyncio.StreamReader:
    """A reader of what the command writes to its terminal (EIO once it closed: the end)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(leader, "rb", 0))
    return reader


async def _spawn(
    request: web.Request, target: ExecTarget, session: _Session, argv: list[str]
) -> tuple[asyncio.subprocess.Process, Input, list[Coroutine[Any, Any, None]]]:
    """Start the command with a terminal (``tty``) or pipes: (process, its stdin, output pumps)."""
    if not argv:
        raise RuntimeError("no command given")
    if not _flag(request, "tty", "tty"):
        proc = await target.spawn(argv, stdin=_flag(request, "input", "stdin"))
        pumps = [
            session.pump(STDOUT, proc.stdout, _flag(request, "output", "stdout")),
            session.pump(STDERR, proc.stderr, _flag(request, "error", "stderr")),
        ]
        return proc, Input(pipe=proc.stdin), pumps
    leader, follower = os.openpty()
    try:
        proc = await target.spawn(argv, stdin=True, terminal=follower)
        reader = await _terminal_reader(os.dup(leader))
    except BaseException:
        os.close(leader)
        raise
    finally:
        os.close(follower)  # the command holds its own copy
    return proc, Input(terminal=leader), [session.pump(STDOUT, reader, True)]


async def serve_exec(request: web.Request, target: ExecTarget) -> web.WebSocketResponse:
    """Run ``?command=...`` in ``target`` for the WebSocket client of ``request``."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS)
    await ws.prepare(request)
    session = _Session(ws)
    argv = request.query.getall("command", [])
    try:
        proc, stdin, outputs = await _spawn(request, target, session, argv)
    except (RuntimeError, OSError) as exc:
        await session.send(ERROR, json.dumps(_status(None, str(exc))).encode())
        await ws.close()
        return ws
    log.info("exec in container %s: %s (pid %d)", target.name, argv, proc.pid)
    feeding = asyncio.create_task(session.feed(stdin))
    try:
        output: asyncio.Future[Any] = asyncio.gather(*outputs)
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
        stdin.release()
    return ws
