"""Helpers for testing code against a real inference server.

:class:`TritonServer` starts a local Triton Inference Server (from the ``.venv-triton``
environment made by ``bash scripts/setup.sh``) on free loopback ports; see
:mod:`kserve_v2.testing.triton`.
"""

from __future__ import annotations

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
    "TritonEnvNotFoundError",
    "TritonEnvironment",
    "TritonLaunchError",
    "TritonServer",
    "TritonStartupError",
    "find_triton_env",
]
