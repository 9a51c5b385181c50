"""What the launchers of Python inference servers share (KServe's model server, MLServer).

Such a server runs from its own virtual environment, found like Triton's (an ``env`` argument,
an environment variable, or a directory such as ``.venv-kserve`` in the current directory, its
parents or above this package's checkout); ``bash scripts/setup.sh`` creates them. The
environment is never imported here: :class:`PeerServer` only starts its interpreter as a
subprocess, in its own process group, on free loopback ports, with a temporary working
directory (servers write metrics and caches into it), and waits until HTTP ``GET
/v2/health/ready`` answers 200 and the gRPC port accepts connections. :meth:`PeerServer.stop`
ends the whole process group and removes the directory.

Subclasses (:class:`~kserve_v2.testing.kserve.KServeServer`,
:class:`~kserve_v2.testing.mlserver.MLServerServer`) say which environment they need and which
command starts the server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kserve_v2.errors import KServeError
from kserve_v2.testing.process import (
    HOST,
    ServerProcess,
    StartupLogError,
    end_process_group,
    free_ports,
    no_proxy_opener,
    port_accepts,
    read_from,
    tail,
)

__all__ = [
    "PeerEnvNotFoundError",
    "PeerEnvironment",
    "PeerLaunchError",
    "PeerServer",
    "PeerStartupError",
]

_LOG_TAIL_LINES = 40
# How uvicorn, asyncio and grpc report a port that is already taken.
_PORT_IN_USE = re.compile(r"already in use|address in use|failed to bind", re.IGNORECASE)


class PeerLaunchError(KServeError, RuntimeError):
    """A local test server could not be found, started or used."""


class PeerEnvNotFoundError(PeerLaunchError):
    """The server's virtual environment is missing; the message says how to make it."""


class PeerStartupError(StartupLogError, PeerLaunchError):
    """The server exited or did not become ready in time.

    ``log_tail`` holds the last lines of the server's log, which are also in the message.
    """


@dataclass(frozen=True)
class PeerEnvironment:
    """A server's virtual environment, as found by :meth:`PeerServer.find_env`."""

    root: Path
    """The virtual environment's directory."""
    python: Path
    """Its interpreter."""
    version: str
    """The version of the server's distribution installed there (e.g. ``"0.21.0"``)."""


def _candidate_roots(dirname: str) -> list[Path]:
    """``dirname`` in cwd and its parents, then above this package's checkout."""
    candidates: list[Path] = []
    for base in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (base, *base.parents):
            candidate = directory / dirname
            if candidate not in candidates:
                candidates.append(candidate)
    return candidates


class PeerServer(ServerProcess):
    """A Python inference server on free loopback ports, run from its own environment.

    Nothing runs until :meth:`start` (or ``with``); addresses are on ``127.0.0.1``.

    Args:
        env: the server's virtual environment; see :meth:`find_env`.
        log_file: where to write the server's output; by default a file in the instance's
            temporary directory, deleted by :meth:`stop`. A given file is appended to and kept.
        extra_env: environment variables set for the server, on top of the inherited ones.
        startup_timeout: seconds to wait for readiness.
        stop_grace: seconds :meth:`stop` waits after SIGTERM before it sends SIGKILL.
    """

    name: ClassVar[str] = ""
    """The server's name in messages ("KServe")."""
    distribution: ClassVar[str] = ""
    """The PyPI distribution the environment must hold ("kserve")."""
    env_var: ClassVar[str] = ""
    """The environment variable naming the environment."""
    env_dirname: ClassVar[str] = ""
    """The environment's directory name looked for by default (".venv-kserve")."""
    port_count: ClassVar[int] = 2
    """Ports to allocate: HTTP and gRPC first, then any the server needs besides."""

    host = HOST

    def __init__(
        self,
        *,
        env: str | os.PathLike[str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        startup_timeout: float = 120.0,
        stop_grace: float = 10.0,
    ) -> None:
        self._env_arg = env
        self._log_file = None if log_file is None else Path(log_file).absolute()
        self._extra_env = dict(extra_env or {})
        self.startup_timeout = startup_timeout
        self._stop_grace = stop_grace
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp_dir: Path | None = None
        self._finalizer: weakref.finalize[..., PeerServer] | None = None
        self._ports: tuple[int, ...] | None = None
        self._log_path: Path | None = None
        self._log_start = 0  # where the current run's part of the log begins
        self.environment: PeerEnvironment | None = None
        """The environment the server runs from, once started."""
        self.startup_seconds: float | None = None
        """Seconds the last successful :meth:`start` took, process start to ready."""

    # -- what subclasses provide ---------------------------------------------------------------

    def command(self, env: PeerEnvironment, ports: tuple[int, ...]) -> list[str]:
        """The command line that starts the server on ``ports``."""
        raise NotImplementedError

    def server_env(self, env: PeerEnvironment, ports: tuple[int, ...]) -> dict[str, str]:
        """Environment variables the server needs besides the inherited ones (ports, say)."""
        return {}

    # -- the environment -----------------------------------------------------------------------

    @classmethod
    def setup_hint(cls) -> str:
        return (
            f"create it with `bash scripts/setup.sh` from the kserve-v2 checkout, or point "
            f"{cls.env_var} at a virtual environment with {cls.distribution} installed"
        )

    @classmethod
    def inspect_env(cls, root: Path) -> PeerEnvironment:
        """Check that ``root`` is a usable environment; explain what is wrong if not."""
        if not root.is_dir():
            raise PeerEnvNotFoundError(
                f"{cls.name} server environment {root} does not exist; {cls.setup_hint()}"
            )
        python = root / "bin" / "python"
        if not python.exists():
            raise PeerEnvNotFoundError(f"{root} has no bin/python; {cls.setup_hint()}")
        # The distribution's metadata tells that (and which version) it is installed without
        # running the environment's interpreter.
        normalized = cls.distribution.replace("-", "_")
        found = sorted(root.glob(f"lib/python3.*/site-packages/{normalized}-*.dist-info"))
        if not found:
            raise PeerEnvNotFoundError(
                f"{root} holds no {cls.distribution} installation; {cls.setup_hint()}"
            )
        version = found[-1].name.removeprefix(f"{normalized}-").removesuffix(".dist-info")
        return PeerEnvironment(root=root, python=python, version=version)

    @classmethod
    def find_env(cls, env: str | os.PathLike[str] | None = None) -> PeerEnvironment:
        """Find the server's environment: ``env``, else the environment variable, else the
        first default-named directory in the current directory or its parents, or above this
        package's source.

        Raises:
            PeerEnvNotFoundError: nothing usable was found; the message says how to create it.
        """
        if env is not None:
            return cls.inspect_env(Path(env).absolute())
        from_var = os.environ.get(cls.env_var)
        if from_var:  # an explicit setting that is wrong is an error, not a reason to look on
            return cls.inspect_env(Path(from_var).absolute())
        for candidate in _candidate_roots(cls.env_dirname):
            if candidate.is_dir():
                return cls.inspect_env(candidate)
        raise PeerEnvNotFoundError(
            f"no {cls.name} server environment found (looked for {cls.env_dirname} in "
            f"{Path.cwd()} and the directories above it, and above the kserve_v2 package); "
            f"{cls.setup_hint()}"
        )

    # -- addresses -----------------------------------------------------------------------------

    def _require_ports(self) -> tuple[int, ...]:
        if self._ports is None:
            raise PeerLaunchError(f"the {self.name} server has not been started")
        return self._ports

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP/REST endpoint, e.g. ``http://127.0.0.1:40123`` (no slash)."""
        return f"http://{HOST}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """gRPC target ``127.0.0.1:PORT`` (no scheme)."""
        return f"{HOST}:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        """The file receiving the server's stdout and stderr."""
        if self._log_path is None:
            raise PeerLaunchError(f"the {self.name} server has not been started")
        return self._log_path

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> PeerServer:
        """Start the server and wait until it is ready; returns ``self``.

        Raises:
            PeerEnvNotFoundError: no server environment.
            PeerStartupError: the server exited early or was not ready within
                ``startup_timeout`` seconds; the message quotes the end of its log.
        """
        if self._proc is not None:
            raise PeerLaunchError(f"the {self.name} server is already started")
        env = self.find_env(self._env_arg)
        self.environment = env
        tmp_dir = Path(tempfile.mkdtemp(prefix=f"kserve-v2-{self.distribution}-"))
        self._tmp_dir = tmp_dir
        # Registered at once, so an exception below (or a caller that never calls stop) cannot
        # leak the directory; re-armed with the process once it exists.
        self._finalizer = weakref.finalize(self, _cleanup, None, str(tmp_dir), self._stop_grace)
        try:
            self._log_path = self._log_file or tmp_dir / "server.log"
            # A port can be taken by another process between our probe and the server's bind;
            # that race is retried with fresh ports, anything else is reported at once.
            attempts = 3
            for attempt in range(attempts):
                try:
                    self._launch(env, tmp_dir)
                    return self
                except _PortInUseError:
                    if attempt == attempts - 1:
                        raise self._startup_error(
                            f"could not bind its ports after {attempts} attempts", 0
                        ) from None
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _child_env(self, env: PeerEnvironment, ports: tuple[int, ...]) -> dict[str, str]:
        child = dict(os.environ)
        # The server's interpreter must see its own environment only.
        for name in ("PYTHONHOME", "PYTHONPATH"):
            child.pop(name, None)
        child["PATH"] = os.pathsep.join([str(env.root / "bin"), child.get("PATH", os.defpath)])
        child["VIRTUAL_ENV"] = str(env.root)
        child["PYTHONUNBUFFERED"] = "1"  # the log is read back on failure
        child.update(self.server_env(env, ports))
        child.update(self._extra_env)
        return child

    def _launch(self, env: PeerEnvironment, tmp_dir: Path) -> None:
        ports = tuple(free_ports(self.port_count))
        cmd = self.command(env, ports)
        log_path = self.log_path
        with log_path.open("ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            log_start = log.tell()
            started = time.monotonic()
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._child_env(env, ports),
                cwd=str(tmp_dir),
                # Own process group: stop() reaches worker processes too and nothing else, and
                # a Ctrl-C in the terminal does not hit the server mid-test.
                start_new_session=True,
            )
        self._proc = proc
        self._ports = ports
        assert self._finalizer is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _cleanup, proc, str(tmp_dir), self._stop_grace)
        self._log_start = log_start
        self._wait_ready(proc)
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        """Poll until HTTP says ready and gRPC accepts connections, or the run failed."""
        ready_url = f"{self.http_url}/v2/health/ready"
        opener = no_proxy_opener()
        deadline = time.monotonic() + self.startup_timeout
        interval = 0.05
        http_ready = grpc_ready = False
        while True:
            if not http_ready:
                try:
                    with opener.open(ready_url, timeout=2.0) as response:
                        http_ready = response.status == 200
                except urllib.error.HTTPError as exc:
                    exc.close()  # up but not ready yet (models still loading)
                except (urllib.error.URLError, OSError):
                    pass  # not listening yet
            if not grpc_ready:
                grpc_ready = port_accepts(self.grpc_port)
            if http_ready and grpc_ready:
                return
            try:  # waiting on the process doubles as the poll delay and notices an early exit
                code = proc.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                pass
            else:
                end_process_group(proc, 0.0)  # workers it may have started before it died
                self._proc = None
                if _PORT_IN_USE.search(read_from(self.log_path, self._log_start)):
                    raise _PortInUseError
                raise self._startup_error(f"exited with status {code} during start-up", code)
            interval = min(interval * 1.5, 0.25)
            if time.monotonic() > deadline:
                waiting = [w for w, ok in (("HTTP", http_ready), ("gRPC", grpc_ready)) if not ok]
                raise self._startup_error(
                    f"was not ready within {self.startup_timeout:.0f} s (waiting for "
                    f"{' and '.join(waiting)})",
                    None,
                )

    def _startup_error(self, what: str, code: int | None) -> PeerStartupError:
        this_run = read_from(self.log_path, self._log_start)
        where = self._log_file if self._log_file is not None else "(temporary; pass log_file=)"
        last = tail(this_run, _LOG_TAIL_LINES)
        return PeerStartupError(
            f"the {self.name} server {what}; server log {where}\n"
            f"last {_LOG_TAIL_LINES} lines:\n{last}",
            log_tail=last,
        )

    def __enter__(self) -> PeerServer:
        return self.start()

    def __repr__(self) -> str:
        where = f" http={self.http_url} grpc={self.grpc_url}" if self._ports else ""
        state = "running" if self.is_running() else "stopped"
        return f"<{type(self).__name__} {state}{where}>"


class _PortInUseError(Exception):
    """A chosen port was taken before the server could bind it."""


def _cleanup(proc: subprocess.Popen[bytes] | None, tmp_dir: str, grace: float) -> None:
    try:
        if proc is not None:
            end_process_group(proc, grace)
    finally:  # even when interrupted while waiting for the process
        shutil.rmtree(tmp_dir, ignore_errors=True)
