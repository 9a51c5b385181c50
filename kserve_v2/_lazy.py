"""Lazy re-exports for package ``__init__`` modules (PEP 562 module ``__getattr__``).

A package re-exports names whose modules are costly to import (asyncio, ssl, the CUDA
bindings, the gRPC engine) without importing them: the first read of such a name imports its
module, and the value is then stored in the package, so later reads are plain attribute reads.
Type checkers see the names through ``if TYPE_CHECKING:`` imports, and the hooks are defined
under ``if not TYPE_CHECKING:`` so that a misspelt name is still an error for them.

Example (in a package ``__init__``)::

    if TYPE_CHECKING:
        from kserve_v2.client.sync import Client
    else:
        __getattr__, __dir__ = lazy_exports(globals(), {"Client": "kserve_v2.client.sync"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module whose ``globals()`` is ``namespace``, serving
    each name of ``exports`` (name -> the module defining it) on first use."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later reads find it without calling __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
