"""Launcher of a local Triton Inference Server, for tests, the demo and benchmarks.

The server comes from a separate virtual environment (``.venv-triton``) holding
``nvidia-pytriton==0.7.0`` (Triton 2.51, CPU-capable) next to ``numpy<2``; ``bash
scripts/setup.sh`` creates it. The environment is found, in this order, from the ``env``
argument, the ``KSERVE_V2_TRITON_ENV`` environment variable, or a ``.venv-triton`` directory in
the current directory, one of its parents, or the checkout this package was installed from.

Each :class:`TritonServer` gets its own free loopback ports, its own temporary directory (backend
directory, log) and its own process group, so several can run side by side; :meth:`stop`
ends only the processes that instance started and removes its temporary directory.

Example::

    from kserve_v2.testing import TritonServer

    with TritonServer("tests/models") as server:
        print(server.http_url)     # http://127.0.0.1:40123
        print(server.grpc_url)     # 127.0.0.1:40125
        # ... talk to the server ...
    # the server and its Python-backend stubs are gone, the temporary directory removed

    # explicit model control, only one model loaded at start, a protected repository API:
    server = TritonServer(
        "tests/models",
        model_control_mode="explicit",
        load_models=["simple"],
        http_restricted_api=["model-repository:admin-key=secret"],
    )
    server.start()
    try:
        ...
    finally:
        server.stop()
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kserve_v2.errors import KServeError
from kserve_v2.testing.process import (
    HOST,
    ServerProcess,
    StartupLogError,
    end_process_group,
    free_ports,
    no_proxy_opener,
    read_from,
    tail,
)

__all__ = [
    "ENV_VAR",
    "TritonEnvNotFoundError",
    "TritonEnvironment",
    "TritonLaunchError",
    "TritonServer",
    "TritonStartupError",
    "find_triton_env",
]

ENV_VAR = "KSERVE_V2_TRITON_ENV"
"""Environment variable naming the server's virtual environment."""

_DEFAULT_ENV_DIRNAME = ".venv-triton"
_HOST = HOST
_MODEL_CONTROL_MODES = ("none", "poll", "explicit")
_SETUP_HINT = (
    "create it with `bash scripts/setup.sh` from the kserve-v2 checkout, or by hand with "
    "`python3.11 -m venv .venv-triton && .venv-triton/bin/pip install 'numpy<2' && "
    ".venv-triton/bin/pip install --no-deps nvidia-pytriton==0.7.0`, "
    f"or point {ENV_VAR} at such an environment"
)
# Lines of the server log quoted in start-up errors.
_LOG_TAIL_LINES = 40
_ERROR_LINES = 15
# glog error lines ("E1130 06:46:54.815294 ..."), "error: ..." and getopt's complaints.
_ERROR_LINE = re.compile(r"^E\d{4} |error:|unrecognized option|invalid argument", re.IGNORECASE)
# Errors every start on a machine without a GPU logs; they explain nothing.
_CPU_ONLY_NOISE = re.compile(r"NVML|CudaDriverHelper|DCGM|CUDA driver")
# How Triton (and grpc) report a port that is already taken.
_PORT_IN_USE = re.compile(r"already in use|address in use", re.IGNORECASE)

# Triton 2.51 (the server pytriton 0.7.0 ships) has a race in its gRPC stream response writer,
# hit now and then by streams with several requests in flight, with any client, fixed in later
# Tritons. It ends in one of two ways: an assertion aborts the server, or the stream handler's
# cancellation bookkeeping goes wrong (the first line) and the server segfaults.
_KNOWN_ABORT = "ASSERTION FAILED: !byte_buffer->Valid()"
_KNOWN_CANCEL_BUG = "HandleCancellation called even when the context was not cancelled"
_SEGFAULT = "Signal (11) received."
# Where the race's segfault also strikes without logging the cancellation above (seen in
# 2.51 with 40 streams on one connection): the faulting frame's distance from frame 0 (the
# server's signal handler) in the backtrace Triton prints, the same whatever the load address.
_KNOWN_SEGFAULT_SITES = frozenset({0x6F451})
_BACKTRACE_FRAME = re.compile(r"^ *(\d+)# 0x([0-9A-Fa-f]+) in \S*/tritonserver$", re.MULTILINE)


def _known_segfault_site(log: str) -> bool:
    """Whether the backtrace after the log's last segfault has a frame at a known site."""
    frames = _BACKTRACE_FRAME.findall(log[log.rfind(_SEGFAULT) :])
    addresses = {int(index): int(address, 16) for index, address in frames}
    handler = addresses.get(0)
    return handler is not None and any(
        address - handler in _KNOWN_SEGFAULT_SITES for address in addresses.values()
    )


class TritonLaunchError(KServeError, RuntimeError):
    """The local Triton server could not be found, started or used."""


class TritonEnvNotFoundError(TritonLaunchError):
    """No usable server environment (``.venv-triton``) was found; the message says how to make
    one."""


class TritonStartupError(StartupLogError, TritonLaunchError):
    """The server exited or did not become ready in time.

    ``log_tail`` holds the last lines of the server's log, which are also in the message.
    """


@dataclass(frozen=True)
class TritonEnvironment:
    """The paths of one server environment, as found by :func:`find_triton_env`."""

    root: Path
    """The virtual environment's directory."""
    bin_dir: Path
    """Its ``bin`` directory; put first on the server's ``PATH`` (see :class:`TritonServer`)."""
    tritonserver: Path
    """The ``tritonserver`` executable."""
    python_backend: Path
    """The directory holding ``libtriton_python.so`` and ``triton_python_backend_utils.py``."""
    python_stub: Path
    """The ``triton_python_backend_stub`` built for the environment's Python version."""
    libs_dir: Path
    """``nvidia_pytriton.libs``: the shared libraries (CUDA runtime, ...) the binaries link."""
    python_libdir: Path | None = None
    """The directory of the base interpreter's ``libpython3.X.so.1.0`` (which the stub links),
    when that interpreter was built shared; ``None`` leaves it to the system's search path."""


def _inspect_env(root: Path) -> TritonEnvironment:
    """Check that ``root`` is a usable server environment; explain what is wrong if not."""
    if not root.is_dir():
        raise TritonEnvNotFoundError(
            f"Triton server environment {root} does not exist; {_SETUP_HINT}"
        )
    servers = sorted(
        root.glob("lib/python3.*/site-packages/pytriton/tritonserver/bin/tritonserver")
    )
    if not servers:
        raise TritonEnvNotFoundError(
            f"{root} holds no tritonserver (is nvidia-pytriton==0.7.0 installed there?); "
            f"{_SETUP_HINT}"
        )
    tritonserver = servers[-1]
    server_dir = tritonserver.parent.parent
    site_packages = server_dir.parent.parent
    py_version = site_packages.parent.name.removeprefix("python")  # e.g. "3.11"
    bin_dir = root / "bin"
    if not (bin_dir / "python3").exists() and not (bin_dir / "python").exists():
        raise TritonEnvNotFoundError(f"{root} has no bin/python3; {_SETUP_HINT}")
    stub = server_dir / "python_backend_stubs" / py_version / "triton_python_backend_stub"
    backend = server_dir / "backends" / "python"
    libs_dir = site_packages / "nvidia_pytriton.libs"
    for needed in (stub, backend / "libtriton_python.so", libs_dir):
        if not needed.exists():
            raise TritonEnvNotFoundError(f"{needed} is missing; {_SETUP_HINT}")
    # The Python-backend stub silently hands models zeroed input tensors under numpy 2, so a
    # server environment with numpy 2 would produce wrong answers rather than errors.
    numpys = list(site_packages.glob("numpy-*.dist-info"))
    if not numpys:
        raise TritonEnvNotFoundError(f"{root} has no numpy (needs numpy<2); {_SETUP_HINT}")
    for dist_info in numpys:
        version = dist_info.name.removeprefix("numpy-").removesuffix(".dist-info")
        if not version.startswith(("0.", "1.")):
            raise TritonEnvNotFoundError(
                f"{root} has numpy {version}; the Triton Python-backend stub needs numpy<2 "
                f"(it passes zeroed inputs under numpy 2); {_SETUP_HINT}"
            )
    return TritonEnvironment(
        root=root,
        bin_dir=bin_dir,
        tritonserver=tritonserver,
        python_backend=backend,
        python_stub=stub,
        libs_dir=libs_dir,
        python_libdir=_python_libdir(root, py_version),
    )


def _python_libdir(root: Path, py_version: str) -> Path | None:
    """Where the venv's base interpreter keeps its shared libpython, if it has one.

    The stub links ``libpython3.X.so.1.0`` without a path of its own. A distribution's Python
    installs it in the system library path, but an interpreter built elsewhere (pyenv, a prefix
    install) keeps it in ``<prefix>/lib``; without that directory the stub would fail to start,
    or load the system's library of another patch release than the standard library it finds.
    """
    try:
        config = (root / "pyvenv.cfg").read_text("utf-8")
    except OSError:
        return None
    match = re.search(r"^\s*home\s*=\s*(.+?)\s*$", config, re.MULTILINE)
    if match is None:
        return None
    libdir = Path(match.group(1)).parent / "lib"
    return libdir if (libdir / f"libpython{py_version}.so.1.0").exists() else None


def _candidate_roots() -> list[Path]:
    """``.venv-triton`` in cwd and its parents, then next to this package's checkout."""
    candidates: list[Path] = []
    for base in (Path.cwd(), Path(__file__).resolve().parent):
        for directory in (base, *base.parents):
            candidate = directory / _DEFAULT_ENV_DIRNAME
            if candidate not in candidates:
                candidates.append(candidate)
    return candidates


def find_triton_env(env: str | os.PathLike[str] | None = None) -> TritonEnvironment:
    """Find the server environment.

    Args:
        env: the virtual environment's path. When ``None``, ``$KSERVE_V2_TRITON_ENV`` is used,
            else the first ``.venv-triton`` found in the current directory or its parents, or
            above this package's source (an editable install in a checkout).

    Raises:
        TritonEnvNotFoundError: nothing usable was found; the message says how to create it.
    """
    if env is not None:
        return _inspect_env(Path(env).absolute())
    from_var = os.environ.get(ENV_VAR)
    if from_var:
        # An explicit setting that is wrong is an error, not a reason to look elsewhere.
        return _inspect_env(Path(from_var).absolute())
    candidates = _candidate_roots()
    for candidate in candidates:
        if candidate.is_dir():
            return _inspect_env(candidate)
    raise TritonEnvNotFoundError(
        f"no Triton server environment found (looked for {_DEFAULT_ENV_DIRNAME} in "
        f"{Path.cwd()} and the directories above it, and above the kserve_v2 package); "
        f"{_SETUP_HINT}"
    )


def _describe_log(text: str, path: Path | None) -> str:
    """Error lines of a run's log, then its tail, for an exception message.

    Error lines come first because the decisive one is often far from the end: an unknown
    option is followed by the whole usage text, a model's failure by the shutdown.
    """
    errors = [
        line
        for line in text.splitlines()
        if _ERROR_LINE.search(line) and not _CPU_ONLY_NOISE.search(line)
    ][:_ERROR_LINES]
    where = path if path is not None else "(temporary; pass log_file= to keep it)"
    parts = [f"; server log {where}"]
    if errors:
        parts.append("\nerror lines:\n" + "\n".join(errors))
    parts.append(f"\nlast {_LOG_TAIL_LINES} lines:\n{tail(text, _LOG_TAIL_LINES)}")
    return "".join(parts)


def _cleanup(
    proc: subprocess.Popen[bytes] | None, tmp_dir: str, grace: float, shm_prefix: str
) -> None:
    try:
        if proc is not None:
            end_process_group(proc, grace)
    finally:  # even when interrupted while waiting for the process
        shutil.rmtree(tmp_dir, ignore_errors=True)
        # The backend unlinks its shared-memory regions on a clean shutdown, but not when it
        # was killed or crashed; the prefix is unique to this instance, so whatever has it is
        # ours.
        shm = Path("/dev/shm")
        if shm_prefix and shm.is_dir():
            for region in shm.glob(f"{shm_prefix}*"):
                with contextlib.suppress(OSError):
                    region.unlink()


class _PortInUseError(Exception):
    """A chosen port was taken before Triton could bind it."""


class TritonServer(ServerProcess):
    """A local Triton server on free loopback ports; see the module docstring for an example.

    Nothing runs until :meth:`start` (or ``with``). All addresses are on ``127.0.0.1``.

    Args:
        model_repository: the model repository directory.
        env: the server's virtual environment; see :func:`find_triton_env`.
        model_control_mode: ``"none"`` (Triton's default: load everything, no load/unload
            API), ``"poll"`` or ``"explicit"``.
        load_models: with ``"explicit"``, the models to load at start (``"*"`` loads all).
        http_restricted_api: values for ``--http-restricted-api``, e.g.
            ``"model-repository:admin-key=secret"``.
        grpc_restricted_protocol: values for ``--grpc-restricted-protocol``, same form.
        grpc_use_ssl: serve gRPC over TLS (needs ``grpc_server_cert`` and ``grpc_server_key``).
        grpc_use_ssl_mutual: also require client certificates (needs ``grpc_root_cert``).
        grpc_server_cert: PEM file of the server certificate.
        grpc_server_key: PEM file of the server's private key.
        grpc_root_cert: PEM file of the CA that signs client certificates.
        log_verbose: Triton's ``--log-verbose`` level (0 = quiet).
        metrics: serve Prometheus metrics (``metrics_url``); ``False`` passes
            ``--allow-metrics=false``. HTTP cannot be turned off: readiness is checked over it.
        extra_args: further command-line arguments, appended last.
        extra_env: environment variables set for the server, on top of the inherited ones.
        log_file: where to write the server's output; by default a file in the instance's
            temporary directory, deleted by :meth:`stop`. A given file is appended to and kept.
        startup_timeout: seconds to wait for ``GET /v2/health/ready`` to answer 200.
        exit_timeout: Triton's ``--exit-timeout-secs``: how long it lets in-flight requests
            finish after SIGTERM.
        stop_grace: seconds :meth:`stop` waits after SIGTERM before it sends SIGKILL.
    """

    host = _HOST

    def __init__(
        self,
        model_repository: str | os.PathLike[str],
        *,
        env: str | os.PathLike[str] | None = None,
        model_control_mode: str | None = None,
        load_models: Sequence[str] = (),
        http_restricted_api: Sequence[str] = (),
        grpc_restricted_protocol: Sequence[str] = (),
        grpc_use_ssl: bool = False,
        grpc_use_ssl_mutual: bool = False,
        grpc_server_cert: str | os.PathLike[str] | None = None,
        grpc_server_key: str | os.PathLike[str] | None = None,
        grpc_root_cert: str | os.PathLike[str] | None = None,
        log_verbose: int = 0,
        metrics: bool = True,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        startup_timeout: float = 180.0,
        exit_timeout: int = 5,
        stop_grace: float = 15.0,
    ) -> None:
        if model_control_mode is not None and model_control_mode not in _MODEL_CONTROL_MODES:
            raise ValueError(
                f"model_control_mode must be one of {_MODEL_CONTROL_MODES}, "
                f"not {model_control_mode!r}"
            )
        if load_models and model_control_mode != "explicit":
            raise ValueError("load_models needs model_control_mode='explicit'")
        if isinstance(load_models, str) or isinstance(extra_args, str):
            raise TypeError("load_models and extra_args take a sequence of strings, not a str")
        if grpc_use_ssl and (grpc_server_cert is None or grpc_server_key is None):
            raise ValueError("grpc_use_ssl needs grpc_server_cert and grpc_server_key")
        if grpc_use_ssl_mutual and (not grpc_use_ssl or grpc_root_cert is None):
            raise ValueError("grpc_use_ssl_mutual needs grpc_use_ssl and grpc_root_cert")
        repository = Path(model_repository).absolute()
        if not repository.is_dir():
            raise ValueError(f"model repository {repository} is not a directory")
        self.model_repository = repository
        self._env_arg = env
        self._model_control_mode = model_control_mode
        self._load_models = tuple(load_models)
        self._http_restricted_api = tuple(http_restricted_api)
        self._grpc_restricted_protocol = tuple(grpc_restricted_protocol)
        self._grpc_use_ssl = grpc_use_ssl
        self._grpc_use_ssl_mutual = grpc_use_ssl_mutual
        self._grpc_server_cert = grpc_server_cert
        self._grpc_server_key = grpc_server_key
        self._grpc_root_cert = grpc_root_cert
        self._log_verbose = log_verbose
        self._metrics = metrics
        self._extra_args = tuple(extra_args)
        self._extra_env = dict(extra_env or {})
        self._log_file = None if log_file is None else Path(log_file).absolute()
        self.startup_timeout = startup_timeout
        self._exit_timeout = exit_timeout
        self._stop_grace = stop_grace

        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp_dir: Path | None = None
        self._finalizer: weakref.finalize[..., TritonServer] | None = None
        self._ports: tuple[int, int, int] | None = None
        self._log_path: Path | None = None
        self._shm_prefix = ""
        self.startup_seconds: float | None = None
        """Seconds the last successful :meth:`start` took, process start to ready."""

    # -- addresses ------------------------------------------------------------------------------

    def _require_ports(self) -> tuple[int, int, int]:
        if self._ports is None:
            raise TritonLaunchError("the server has not been started")
        return self._ports

    @property
    def metrics_port(self) -> int:
        if not self._metrics:
            raise TritonLaunchError("the server was started with metrics=False")
        return self._require_ports()[2]

    @property
    def http_url(self) -> str:
        """Base URL of the HTTP/REST endpoint, e.g. ``http://127.0.0.1:40123`` (no slash)."""
        return f"http://{_HOST}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """gRPC target ``127.0.0.1:PORT`` (no scheme, as grpcio channels take it)."""
        return f"{_HOST}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """The Prometheus metrics URL, ``http://127.0.0.1:PORT/metrics``."""
        return f"http://{_HOST}:{self.metrics_port}/metrics"

    @property
    def log_path(self) -> Path:
        """The file receiving the server's stdout and stderr."""
        if self._log_path is None:
            raise TritonLaunchError("the server has not been started")
        return self._log_path

    @property
    def pid(self) -> int:
        """Process id of the ``tritonserver`` process (also its process-group id)."""
        if self._proc is None:
            raise TritonLaunchError("the server has not been started")
        return self._proc.pid

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the server process to exit by itself (a crash, say); returns its exit status
        (negative: killed by that signal). Raises :class:`subprocess.TimeoutExpired` on timeout.
        Call :meth:`stop` afterwards all the same, to clean up."""
        if self._proc is None:
            raise TritonLaunchError("the server has not been started")
        return self._proc.wait(timeout)

    def known_crash(self, wait: float = 0.0) -> str | None:
        """What took this start of the server down, if it was Triton 2.51's known gRPC stream
        race, else ``None`` (running fine, never started, or dead of something else).

        The race (fixed in later Tritons) aborts or segfaults the server now and then while
        streams have several requests in flight; test suites restart the server and rerun the
        test that saw it die. ``wait``: seconds to keep looking, for a caller that just saw a
        connection drop: the client can see that a moment before the server's log says why, and
        the process still runs while Triton prints its backtrace.

        Example::

            if (why := server.known_crash(wait=3.0)) is not None:
                server.stop()
                server.start()
        """
        deadline = time.monotonic() + wait
        while True:
            if self._log_path is not None and self._log_path.exists():
                log = self.read_log()
                start = log.rfind("\n$ ")  # each start writes its command line first
                this_run = log[start + 1 :] if start >= 0 else log
                if _KNOWN_ABORT in this_run:
                    return f"Triton 2.51's known gRPC stream race: it aborted ({_KNOWN_ABORT})"
                if _SEGFAULT in this_run and _KNOWN_CANCEL_BUG in this_run:
                    return (
                        "Triton 2.51's known gRPC stream race: it segfaulted after "
                        f"{_KNOWN_CANCEL_BUG!r}"
                    )
                if _SEGFAULT in this_run and _known_segfault_site(this_run):
                    return "Triton 2.51's known gRPC stream race: it segfaulted at its site"
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.1)

    # -- life cycle -----------------------------------------------------------------------------

    def _command(
        self, env: TritonEnvironment, backend_dir: Path, ports: Sequence[int], prefix: str
    ) -> list[str]:
        http_port, grpc_port, metrics_port = ports
        cmd = [
            str(env.tritonserver),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={backend_dir}",
            f"--http-address={_HOST}",
            f"--http-port={http_port}",
            f"--grpc-address={_HOST}",
            f"--grpc-port={grpc_port}",
            f"--log-verbose={self._log_verbose}",
            f"--exit-timeout-secs={self._exit_timeout}",
            f"--backend-config=python,shm-region-prefix-name={prefix}",
        ]
        if self._metrics:
            cmd += [f"--metrics-address={_HOST}", f"--metrics-port={metrics_port}"]
        else:
            cmd.append("--allow-metrics=false")
        if self._model_control_mode is not None:
            cmd.append(f"--model-control-mode={self._model_control_mode}")
        cmd.extend(f"--load-model={name}" for name in self._load_models)
        cmd.extend(f"--http-restricted-api={spec}" for spec in self._http_restricted_api)
        cmd.extend(f"--grpc-restricted-protocol={spec}" for spec in self._grpc_restricted_protocol)
        if self._grpc_use_ssl:
            cmd.append("--grpc-use-ssl=true")
            cmd.append(f"--grpc-server-cert={Path(self._grpc_server_cert or '').absolute()}")
            cmd.append(f"--grpc-server-key={Path(self._grpc_server_key or '').absolute()}")
        if self._grpc_use_ssl_mutual:
            cmd.append("--grpc-use-ssl-mutual=true")
        if self._grpc_root_cert is not None:
            cmd.append(f"--grpc-root-cert={Path(self._grpc_root_cert).absolute()}")
        cmd.extend(self._extra_args)
        return cmd

    def _child_env(self, env: TritonEnvironment) -> dict[str, str]:
        child = dict(os.environ)
        # The stub embeds CPython, which derives its prefix (standard library, site-packages)
        # from the first python on PATH, so the server environment (numpy<2) goes first. This
        # build runs it isolated (sys.flags.isolated: PYTHON* variables and the user site are
        # ignored, so __pycache__ appears next to model.py whatever PYTHONDONTWRITEBYTECODE
        # says); PYTHONHOME and PYTHONPATH are dropped all the same, in case another build
        # honours them and they point at a numpy-2 environment.
        for name in ("PYTHONHOME", "PYTHONPATH"):
            child.pop(name, None)
        child["PATH"] = os.pathsep.join([str(env.bin_dir), child.get("PATH", os.defpath)])
        child["VIRTUAL_ENV"] = str(env.root)
        # The copied stub finds its libraries through an RPATH relative to where pytriton
        # installed it ($ORIGIN/../../../../nvidia_pytriton.libs), which the copy breaks; the
        # library path restores them (pytriton does the same). Appended, so it never overrides.
        # The base interpreter's libpython directory is added for the same reason.
        extra_libs = [str(env.libs_dir)]
        if env.python_libdir is not None:
            extra_libs.append(str(env.python_libdir))
        child["LD_LIBRARY_PATH"] = os.pathsep.join(
            [p for p in (child.get("LD_LIBRARY_PATH"), *extra_libs) if p]
        )
        child.update(self._extra_env)
        return child

    def start(self) -> TritonServer:
        """Start the server and wait until it is ready; returns ``self``.

        Raises:
            TritonEnvNotFoundError: no server environment.
            TritonStartupError: the server exited early or was not ready within
                ``startup_timeout`` seconds; the message quotes the end of its log.
        """
        if self._proc is not None:
            raise TritonLaunchError("the server is already started")
        env = find_triton_env(self._env_arg)
        tmp_dir = Path(tempfile.mkdtemp(prefix="kserve-v2-triton-"))
        # Register clean-up at once, so an exception below (or a caller that never calls stop)
        # cannot leak the directory; the finalizer is re-armed with the process once it exists.
        self._tmp_dir = tmp_dir
        # Stubs talk to the server through named shared-memory regions; a prefix unique to this
        # instance keeps concurrent servers apart and lets clean-up find leftovers.
        self._shm_prefix = f"kserve_v2_{os.getpid()}_{uuid.uuid4().hex[:12]}_"
        self._finalizer = weakref.finalize(
            self, _cleanup, None, str(tmp_dir), self._stop_grace, self._shm_prefix
        )
        try:
            backend_dir = self._prepare_backend_dir(env, tmp_dir)
            self._log_path = self._log_file or tmp_dir / "tritonserver.log"
            # A port can be taken by another process between our probe and Triton's bind; that
            # race is retried with fresh ports, anything else is reported at once.
            attempts = 3
            for attempt in range(attempts):
                try:
                    self._launch(env, backend_dir)
                    return self
                except _PortInUseError:
                    if attempt == attempts - 1:
                        this_run = self.log_path.read_text("utf-8", "replace")
                        raise TritonStartupError(
                            f"tritonserver could not bind its ports after {attempts} attempts"
                            f"{_describe_log(this_run, self._log_file)}",
                            log_tail=tail(this_run, _LOG_TAIL_LINES),
                        ) from None
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare_backend_dir(self, env: TritonEnvironment, tmp_dir: Path) -> Path:
        """A backend directory whose ``python`` backend has the stub next to the library.

        pytriton ships the stub apart (one per Python version) while the backend looks for it
        beside ``libtriton_python.so``; copying both (about 3 MB) keeps the env untouched.
        """
        backend_dir = tmp_dir / "backends"
        python_dir = backend_dir / "python"
        python_dir.mkdir(parents=True)
        for source in sorted(env.python_backend.iterdir()):
            if source.is_file():
                shutil.copy2(source, python_dir / source.name)
        shutil.copy2(env.python_stub, python_dir / env.python_stub.name)
        return backend_dir

    def _launch(self, env: TritonEnvironment, backend_dir: Path) -> None:
        ports = free_ports(3)
        cmd = self._command(env, backend_dir, ports, self._shm_prefix)
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
                env=self._child_env(env),
                cwd=str(backend_dir.parent),
                # Own process group: stop() can reap the stubs too without touching any other
                # process, and a Ctrl-C in the terminal does not hit the server mid-test.
                start_new_session=True,
            )
        self._proc = proc
        self._ports = (ports[0], ports[1], ports[2])
        assert self._finalizer is not None
        assert self._tmp_dir is not None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _cleanup, proc, str(self._tmp_dir), self._stop_grace, self._shm_prefix
        )
        self._wait_ready(proc, log_path, log_start)
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, proc: subprocess.Popen[bytes], log_path: Path, log_start: int) -> None:
        """Poll until HTTP says ready and the metrics endpoint answers, or the run failed.

        Triton starts gRPC, then HTTP, then metrics; a metrics port it cannot bind is only
        logged, not fatal, so the metrics endpoint is waited for too and its failure retried.
        """
        pending = [f"http://{_HOST}:{self.http_port}/v2/health/ready"]
        if self._metrics:
            pending.append(self.metrics_url)
        # No proxy: an inherited http_proxy would otherwise receive requests for 127.0.0.1.
        opener = no_proxy_opener()
        deadline = time.monotonic() + self.startup_timeout
        interval = 0.05
        while True:
            for url in list(pending):
                try:
                    with opener.open(url, timeout=2.0) as response:
                        if response.status == 200:
                            pending.remove(url)
                except urllib.error.HTTPError as exc:
                    exc.close()  # up but not ready yet (e.g. models still loading)
                except (urllib.error.URLError, OSError):
                    pass  # not listening yet
            if not pending:
                return
            # Waiting on the process doubles as the poll delay and notices an early exit at once.
            try:
                code = proc.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                pass
            else:
                self._on_early_exit(proc, code, log_path, log_start)
            # Once only metrics is missing, HTTP is up and the metrics service has been tried or
            # is about to be, so a bind failure of its port is in the log.
            if (
                self._metrics
                and pending == [self.metrics_url]
                and _PORT_IN_USE.search(read_from(log_path, log_start))
            ):
                self._proc = None
                end_process_group(proc, self._stop_grace)
                raise _PortInUseError
            interval = min(interval * 1.5, 0.25)
            if time.monotonic() > deadline:
                this_run = read_from(log_path, log_start)
                raise TritonStartupError(
                    f"tritonserver was not ready within {self.startup_timeout:.0f} s "
                    f"(waiting for {', '.join(pending)}){_describe_log(this_run, self._log_file)}",
                    log_tail=tail(this_run, _LOG_TAIL_LINES),
                )

    def _on_early_exit(
        self, proc: subprocess.Popen[bytes], code: int, log_path: Path, log_start: int
    ) -> None:
        end_process_group(proc, 0.0)  # stubs it may have started before it died
        self._proc = None
        this_run = read_from(log_path, log_start)
        if _PORT_IN_USE.search(this_run):
            raise _PortInUseError
        raise TritonStartupError(
            f"tritonserver exited with status {code} during start-up"
            f"{_describe_log(this_run, self._log_file)}",
            log_tail=tail(this_run, _LOG_TAIL_LINES),
        )

    def __enter__(self) -> TritonServer:
        return self.start()

    def __repr__(self) -> str:
        where = f" http={self.http_url} grpc={self.grpc_url}" if self._ports else ""
        state = "running" if self.is_running() else "stopped"
        return f"<TritonServer {self.model_repository} {state}{where}>"
