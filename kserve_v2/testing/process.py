"""Process and port helpers the test-server launchers share (Triton, KServe, MLServer).

Each launcher runs its server as the leader of a new process group on free loopback ports and
writes its output to a log file; these helpers pick the ports, read the log back, and end the
whole group. :class:`ServerProcess` is the launchers' common base (ports, log, ``stop``) and
:class:`StartupLogError` their start-up errors' (the log's tail).

Example::

    from kserve_v2.testing.process import end_process_group, free_ports

    http_port, grpc_port = free_ports(2)
    proc = subprocess.Popen([...], start_new_session=True)
    ...
    end_process_group(proc, grace=10.0)   # SIGTERM, SIGKILL after 10 s, then the whole group
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "HOST",
    "ServerProcess",
    "StartupLogError",
    "end_process_group",
    "free_ports",
    "group_has_live_members",
    "no_proxy_opener",
    "port_accepts",
    "read_from",
    "tail",
]

HOST = "127.0.0.1"
"""The address every test server binds."""


def free_ports(count: int) -> list[int]:
    """Ask the kernel for ``count`` distinct free loopback ports.

    The sockets stay open until all ports are chosen so the kernel cannot hand out the same port
    twice; another process can still take one before the server binds it, which the launchers
    handle by retrying with new ports.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_accepts(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (a gRPC server that is up)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def no_proxy_opener() -> urllib.request.OpenerDirector:
    """A urllib opener that ignores ``http_proxy``: readiness probes go to 127.0.0.1 itself."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def read_from(path: Path, offset: int) -> str:
    """The log written since ``offset`` (the current run's part of an appended log file)."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


def tail(text: str, lines: int = 40) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.splitlines()[-lines:])


def end_process_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the server, SIGKILL it after ``grace`` seconds, then kill whatever is left of the
    process group it leads (worker processes, backend stubs) and wait until it is gone, so that
    no process of this server outlives the call.

    ``proc`` must have been started with ``start_new_session=True``: its group id is its pid
    and the group holds only processes it spawned.
    """
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # After a crash or a SIGKILL the server's children are orphans that would live on.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: wait (briefly) until no member is left running.
    deadline = time.monotonic() + 5.0
    while group_has_live_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # nothing to block on: the children are not our children


def group_has_live_members(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member that is not a zombie."""
    proc_fs = Path("/proc")
    if not proc_fs.is_dir():  # no procfs: kill(0) cannot tell zombies apart; close enough
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc_fs.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # After the parenthesised command name come: state, ppid, pgrp, ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and fields[2] == str(pgid):
            return True
    return False


class StartupLogError(Exception):
    """A server exited or did not become ready in time (each launcher's ``...StartupError``
    puts this first among its bases).

    ``log_tail`` holds the last lines of the server's log, which are also in the message.
    """

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail


class ServerProcess:
    """What the launchers do alike with the server they started: its ports, its log, and
    stopping it (each launcher starts it, and says what ``_require_ports`` and ``log_path``
    raise before it has).

    ``_finalizer`` ends the process group and removes the temporary directory, once: it is
    armed as soon as the directory exists and re-armed with the process.
    """

    _proc: subprocess.Popen[bytes] | None
    _tmp_dir: Path | None
    _finalizer: weakref.finalize[..., Any] | None

    def _require_ports(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def log_path(self) -> Path:
        """The file receiving the server's stdout and stderr."""
        raise NotImplementedError

    @property
    def http_port(self) -> int:
        return self._require_ports()[0]

    @property
    def grpc_port(self) -> int:
        return self._require_ports()[1]

    def is_running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def read_log(self) -> str:
        """The server's output so far."""
        return self.log_path.read_text("utf-8", "replace")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``stop_grace`` seconds, then the rest of
        its process group) and remove the temporary directory. Safe to call more than once."""
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()  # runs the clean-up once: ends the process group, removes the directory
        self._proc = None
        self._tmp_dir = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
