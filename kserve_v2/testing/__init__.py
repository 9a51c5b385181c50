"""Helpers for testing code against a real inference server.

:class:`TritonServer` starts a local Triton Inference Server (from the ``.venv-triton``
environment made by ``bash scripts/setup.sh``) on free loopback ports; see
:mod:`kserve_v2.testing.triton`. :class:`KServeServer` (KServe's Python model server, from
``.venv-kserve``) and :class:`MLServerServer` (from ``.venv-mlserver``) do the same for the
other two servers the interoperability tests run against; see :mod:`kserve_v2.testing.peer`.
"""

from __future__ import annotations

from kserve_v2.testing.kserve import KSERVE_ENV_VAR, KServeServer
from kserve_v2.testing.mlserver import MLSERVER_ENV_VAR, MLServerServer
from kserve_v2.testing.peer import (
    PeerEnvironment,
    PeerEnvNotFoundError,
    PeerLaunchError,
    PeerServer,
    PeerStartupError,
)
from kserve_v2.testing.triton import (
    ENV_VAR,
    TritonEnvironment,
    TritonEnvNotFoundError,
    TritonLaunchError,
    TritonServer,
    TritonStartupError,
    find_triton_env,
)

__all__ = [
    "ENV_VAR",
    "KSERVE_ENV_VAR",
    "KServeServer",
    "MLSERVER_ENV_VAR",
    "MLServerServer",
    "PeerEnvNotFoundError",
    "PeerEnvironment",
    "PeerLaunchError",
    "PeerServer",
    "PeerStartupError",
    "TritonEnvNotFoundError",
    "TritonEnvironment",
    "TritonLaunchError",
    "TritonServer",
    "TritonStartupError",
    "find_triton_env",
]
