"""Process and port helpers the test-server launchers share (Triton, KServe, MLServer).

Each launcher runs its server as the leader of a new process group on free loopback ports and
writes its output to a log file; these helpers pick the ports, read the log back, and end the
whole group.

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
from pathlib import Path

__all__ = [
    "HOST",
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
