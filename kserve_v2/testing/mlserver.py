"""Launcher of MLServer (``mlserver`` 1.7.1), for the interoperability tests.

The server comes from its own virtual environment (``.venv-mlserver``; ``bash
scripts/setup.sh`` creates it), found from the ``env`` argument, ``$KSERVE_V2_MLSERVER_ENV``,
or a ``.venv-mlserver`` directory in the current directory, its parents or above this
package's checkout. The launcher runs ``mlserver start <model_repository>`` from that
environment (``settings.json`` and ``*/model-settings.json`` there, as MLServer reads them)
with the ports given through MLServer's environment settings, bound to 127.0.0.1; it never
imports ``mlserver`` itself.

Example::

    from kserve_v2.testing import MLServerServer

    with MLServerServer("tests/peers/mlserver_models") as server:
        print(server.http_url)     # http://127.0.0.1:40123
        print(server.grpc_url)     # 127.0.0.1:40125
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kserve_v2.testing.peer import PeerEnvironment, PeerServer
from kserve_v2.testing.process import HOST

__all__ = ["MLSERVER_ENV_VAR", "MLServerServer"]

MLSERVER_ENV_VAR = "KSERVE_V2_MLSERVER_ENV"
"""Environment variable naming MLServer's virtual environment."""


class MLServerServer(PeerServer):
    """MLServer serving ``model_repository`` on free loopback ports.

    Args:
        model_repository: a directory MLServer can start on (``mlserver start DIR``): an
            optional ``settings.json`` and one ``model-settings.json`` per model below it.
        **options: those of :class:`~kserve_v2.testing.peer.PeerServer`.
    """

    name = "MLServer"
    distribution = "mlserver"
    env_var = MLSERVER_ENV_VAR
    env_dirname = ".venv-mlserver"
    port_count = 3  # HTTP, gRPC and MLServer's separate metrics server

    def __init__(self, model_repository: str | os.PathLike[str], **options: Any) -> None:
        repository = Path(model_repository).absolute()
        if not repository.is_dir():
            raise ValueError(f"model repository {repository} is not a directory")
        self.model_repository = repository
        settings = repository / "settings.json"
        if settings.is_file():
            given = json.loads(settings.read_text("utf-8"))
            taken = [k for k in ("host", "http_port", "grpc_port", "metrics_port") if k in given]
            if taken:
                raise ValueError(
                    f"{settings} sets {', '.join(taken)}: the launcher chooses those (loopback, "
                    "free ports); remove them"
                )
        super().__init__(**options)

    @property
    def metrics_url(self) -> str:
        """MLServer's Prometheus endpoint (a server of its own)."""
        return f"http://{HOST}:{self._require_ports()[2]}/metrics"

    def command(self, env: PeerEnvironment, ports: tuple[int, ...]) -> list[str]:
        return [str(env.root / "bin" / "mlserver"), "start", str(self.model_repository)]

    def server_env(self, env: PeerEnvironment, ports: tuple[int, ...]) -> dict[str, str]:
        http_port, grpc_port, metrics_port = ports[:3]
        # MLServer reads settings.json first and its MLSERVER_* environment variables only for
        # what the file leaves unset, so the repository's settings.json must not set these.
        return {
            "MLSERVER_HOST": HOST,
            "MLSERVER_HTTP_PORT": str(http_port),
            "MLSERVER_GRPC_PORT": str(grpc_port),
            "MLSERVER_METRICS_PORT": str(metrics_port),
        }
