"""The KServe and MLServer launchers (kserve_v2.testing.peer, .kserve, .mlserver).

Most tests run a stand-in server: a fake environment whose interpreter is this one and whose
``site-packages`` holds an empty ``kserve-*.dist-info``, running a small stdlib script that
serves ``/v2/health/ready`` and listens on the gRPC port. The last two start the real servers
(their environments from ``bash scripts/setup.sh``).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kserve_v2.testing import (
    KSERVE_ENV_VAR,
    KServeServer,
    MLServerServer,
    PeerEnvNotFoundError,
    PeerLaunchError,
    PeerStartupError,
)
from kserve_v2.testing import peer as peer_module
from kserve_v2.testing.process import free_ports, group_has_live_members
from kserve_v2.testing.session import in_ci

# A stand-in for a model server: HTTP ready on --http_port, a listener on --grpc_port, and a
# child process (its pid logged) that only the process-group clean-up can end.
FAKE_SERVER = textwrap.dedent(
    """
    import argparse, http.server, socket, subprocess, sys, threading

    parser = argparse.ArgumentParser()
    parser.add_argument("--http_port", type=int)
    parser.add_argument("--grpc_port", type=int)
    args = parser.parse_args()

    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    grpc = socket.socket()
    grpc.bind(("127.0.0.1", args.grpc_port))
    grpc.listen()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print(f"child pid {child.pid}", flush=True)
    http.server.HTTPServer(("127.0.0.1", args.http_port), Ready).serve_forever()
    """
)


def fake_env(root: Path, distribution: str = "kserve") -> Path:
    """A directory that passes for a server environment: bin/python is this interpreter."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    site = root / "lib" / "python3.11" / "site-packages"
    (site / f"{distribution}-9.9.9.dist-info").mkdir(parents=True)
    return root


def write_script(tmp_path: Path, source: str) -> Path:
    script = tmp_path / "server.py"
    script.write_text(source)
    return script


def test_a_missing_environment_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(PeerEnvNotFoundError, match=r"does not exist.*scripts/setup\.sh"):
        KServeServer.find_env(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PeerEnvNotFoundError, match="has no bin/python"):
        KServeServer.find_env(tmp_path / "empty")
    env = fake_env(tmp_path / "mlserver-env", distribution="mlserver")
    with pytest.raises(PeerEnvNotFoundError, match="holds no kserve installation"):
        KServeServer.find_env(env)
    assert MLServerServer.find_env(env).version == "9.9.9"


def test_the_environment_variable_names_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv(KSERVE_ENV_VAR, str(env))
    found = KServeServer.find_env()
    assert (found.root, found.python, found.version) == (env, env / "bin" / "python", "9.9.9")
    monkeypatch.setenv(KSERVE_ENV_VAR, str(tmp_path / "wrong"))
    with pytest.raises(PeerEnvNotFoundError, match="wrong"):  # no fallback to another one
        KServeServer.find_env()


def test_arguments_are_checked_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a file"):
        KServeServer(tmp_path / "missing.py")
    with pytest.raises(ValueError, match="is not a directory"):
        MLServerServer(tmp_path / "missing")
    (tmp_path / "settings.json").write_text('{"http_port": 8080, "debug": false}')
    with pytest.raises(ValueError, match="sets http_port"):
        MLServerServer(tmp_path)
    server = KServeServer(write_script(tmp_path, FAKE_SERVER))
    with pytest.raises(PeerLaunchError, match="not been started"):
        server.http_url  # noqa: B018


def test_start_wait_ready_and_stop_everything(tmp_path: Path) -> None:
    env = fake_env(tmp_path / "env")
    log_file = tmp_path / "server.log"
    server = KServeServer(write_script(tmp_path, FAKE_SERVER), env=env, log_file=log_file)
    with server:
        assert server.is_running()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", server.http_url)
        assert re.fullmatch(r"127\.0\.0\.1:\d+", server.grpc_url)
        assert server.environment is not None
        assert server.environment.root == env
        with urllib.request.urlopen(f"{server.http_url}/v2/health/ready") as response:
            assert response.status == 200
        pgid = server._proc.pid  # type: ignore[union-attr]
        tmp_dir = server._tmp_dir
        assert tmp_dir is not None
        assert tmp_dir.is_dir()
        assert server.startup_seconds is not None
        assert "--http_port=" in server.read_log()  # the command line opens the log
    assert not server.is_running()
    assert not group_has_live_members(pgid)  # the child too
    assert not tmp_dir.exists()
    assert "child pid" in log_file.read_text()  # a given log file is kept
    server.stop()  # again: harmless


def test_a_server_that_exits_during_start_up_quotes_its_log(tmp_path: Path) -> None:
    script = write_script(tmp_path, "print('model failed to load: boom')\nraise SystemExit(3)\n")
    server = KServeServer(script, env=fake_env(tmp_path / "env"))
    with pytest.raises(PeerStartupError, match="exited with status 3") as info:
        server.start()
    assert "model failed to load: boom" in info.value.log_tail
    assert "model failed to load: boom" in info.value.message
    assert not server.is_running()


def test_a_server_that_never_gets_ready_times_out(tmp_path: Path) -> None:
    script = write_script(tmp_path, "import time\nprint('loading', flush=True)\ntime.sleep(60)\n")
    server = KServeServer(script, env=fake_env(tmp_path / "env"), startup_timeout=1.0)
    with pytest.raises(PeerStartupError, match=r"not ready within 1 s.*HTTP and gRPC") as info:
        server.start()
    assert "loading" in info.value.log_tail


def test_a_port_taken_before_the_server_binds_it_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    calls: list[list[int]] = []

    def racy_ports(count: int) -> list[int]:
        ports = free_ports(count)
        if not calls:  # the first choice loses the race for its gRPC port
            ports[1] = taken.getsockname()[1]
        calls.append(ports)
        return ports

    monkeypatch.setattr(peer_module, "free_ports", racy_ports)
    server = KServeServer(write_script(tmp_path, FAKE_SERVER), env=fake_env(tmp_path / "env"))
    try:
        with server:
            assert len(calls) == 2
            assert server.grpc_port == calls[1][1]
    finally:
        taken.close()


# -- the real servers ---------------------------------------------------------------------------

PEERS = Path(__file__).resolve().parent.parent / "peers"


def _real(cls: Any, *args: Any) -> Any:
    try:
        cls.find_env()
    except PeerEnvNotFoundError as exc:
        if in_ci():
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    return cls(*args)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: _real(KServeServer, PEERS / "kserve_models" / "server.py"),
            marks=[pytest.mark.integration, pytest.mark.kserve],
            id="kserve",
        ),
        pytest.param(
            lambda: _real(MLServerServer, PEERS / "mlserver_models"),
            marks=[pytest.mark.integration, pytest.mark.mlserver],
            id="mlserver",
        ),
    ],
)
def test_the_real_servers_start_on_loopback_and_stop_completely(make: Any) -> None:
    server = make()
    with server:
        for url in (f"{server.http_url}/v2/health/ready", f"{server.http_url}/v2/models/simple"):
            with urllib.request.urlopen(url) as response:
                assert response.status == 200
        pgid = server._proc.pid
        listening = _listening_addresses(pgid)
        assert listening, "the server listens nowhere"
        assert all(host == "127.0.0.1" for host, _ in listening), listening
        assert {server.http_port, server.grpc_port} <= {port for _, port in listening}
    assert not group_has_live_members(pgid)


def _listening_addresses(pgid: int) -> set[tuple[str, int]]:
    """(host, port) of the TCP sockets listening in process group ``pgid`` (Linux /proc)."""
    inodes: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rfind(")") + 2 :].split()[2] != str(pgid):
                continue
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].rsplit(":", 1)
            found.add((_decode_address(address), int(port, 16)))
    return found


def _decode_address(hex_address: str) -> str:
    """/proc/net/tcp's little-endian hex address as text (IPv4, or IPv4 mapped in IPv6)."""
    raw = bytes.fromhex(hex_address)
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
    data = b"".join(words)
    if len(data) == 16 and data[:12] == b"\0" * 10 + b"\xff\xff":
        data = data[12:]
    if len(data) == 4:
        return ".".join(str(b) for b in data)
    return ":".join(data[i : i + 2].hex() for i in range(0, 16, 2))
