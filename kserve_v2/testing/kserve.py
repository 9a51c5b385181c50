"""Launcher of KServe's Python model server (``kserve`` 0.21), for the interoperability tests.

The server comes from its own virtual environment (``.venv-kserve``; ``bash scripts/setup.sh``
creates it), found from the ``env`` argument, ``$KSERVE_V2_KSERVE_ENV``, or a ``.venv-kserve``
directory in the current directory, its parents or above this package's checkout. KServe has no
model repository: a Python script builds its models and starts ``kserve.ModelServer``; the
launcher runs that script with the environment's interpreter as ``script --http_port N
--grpc_port M`` and never imports ``kserve`` itself.

Example::

    from kserve_v2.testing import KServeServer

    with KServeServer("tests/peers/kserve_models/server.py") as server:
        print(server.http_url)     # http://127.0.0.1:40123
        print(server.grpc_url)     # 127.0.0.1:40125
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kserve_v2.testing.peer import PeerEnvironment, PeerServer

__all__ = ["KSERVE_ENV_VAR", "KServeServer"]

KSERVE_ENV_VAR = "KSERVE_V2_KSERVE_ENV"
"""Environment variable naming KServe's virtual environment."""


class KServeServer(PeerServer):
    """KServe's model server running ``script`` on free loopback ports.

    Args:
        script: a Python file that registers models with ``kserve.ModelServer`` and starts it,
            taking the ports as ``--http_port`` and ``--grpc_port`` (and binding 127.0.0.1).
        **options: those of :class:`~kserve_v2.testing.peer.PeerServer`.
    """

    name = "KServe"
    distribution = "kserve"
    env_var = KSERVE_ENV_VAR
    env_dirname = ".venv-kserve"

    def __init__(self, script: str | os.PathLike[str], **options: Any) -> None:
        script_path = Path(script).absolute()
        if not script_path.is_file():
            raise ValueError(f"KServe model script {script_path} is not a file")
        self.script = script_path
        super().__init__(**options)

    def command(self, env: PeerEnvironment, ports: tuple[int, ...]) -> list[str]:
        http_port, grpc_port = ports[:2]
        return [
            str(env.python),
            str(self.script),
            f"--http_port={http_port}",
            f"--grpc_port={grpc_port}",
        ]
