"""The public surface of tritonclient-shaped modules as text, one line per name or method.

Used by ``test_api.py`` to pin ``kserve_v2.compat`` against ``api.txt`` and, where
tritonclient is installed, to compare the two. Annotations are left out: tritonclient has
none, and what must match is how a program calls (names, parameter kinds, defaults).

Run as a script to print the surface of a package (``python -m tests.compat.surface
kserve_v2.compat``), e.g. to refresh ``api.txt`` after a deliberate change.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

#: The modules, relative to the package (``tritonclient`` or ``kserve_v2.compat``).
MODULES = (
    "http",
    "http.aio",
    "grpc",
    "grpc.aio",
    "utils",
    "utils.shared_memory",
    "utils.cuda_shared_memory",
)

#: Dunder methods that are part of how programs use the classes.
_DUNDERS = frozenset({"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__str__"})


def _default(value: Any) -> str:
    return repr(value)


def signature(obj: Any) -> str:
    """``(a, b=1, *args, c=None)`` without annotations."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    star_done = False
    for param in sig.parameters.values():
        text = param.name
        if param.kind is param.VAR_POSITIONAL:
            text, star_done = f"*{text}", True
        elif param.kind is param.VAR_KEYWORD:
            text = f"**{text}"
        elif param.kind is param.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if param.default is not param.empty:
            text += f"={_default(param.default)}"
        parts.append(text)
    return f"({', '.join(parts)})"


def _public_names(module: ModuleType, package: str) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return sorted(names)
    # No __all__ (some of tritonclient's modules): its own classes and functions.
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith(package)
    )


def _members(cls: type) -> Iterator[str]:
    seen: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # inherited methods count (PluginHost, bases)
        if klass.__module__.startswith(("abc", "builtins")):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") and name not in _DUNDERS:
                continue
            if klass is not cls and name in _DUNDERS and name != "__init__":
                continue
            seen[name] = value
    for name in sorted(seen):
        raw = seen[name]
        if isinstance(raw, property):
            yield f"  property {name}"
            continue
        kind = "static " if isinstance(raw, staticmethod) else ""
        kind = "classmethod " if isinstance(raw, classmethod) else kind
        function = getattr(cls, name)
        if not callable(function):
            yield f"  attribute {name}"
            continue
        asynchronous = inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
        prefix = "async " if asynchronous else ""
        yield f"  {prefix}{kind}def {name}{signature(function)}"


def surface(package: str, modules: tuple[str, ...] = MODULES) -> list[str]:
    """The lines describing ``package``'s tritonclient-shaped modules."""
    lines: list[str] = []
    for relative in modules:
        try:
            module = importlib.import_module(f"{package}.{relative}")
        except (ImportError, RuntimeError) as exc:  # tritonclient's CUDA module needs cuda-python
            lines.append(f"{relative}: not importable ({type(exc).__name__})")
            continue
        for name in _public_names(module, package):
            value = getattr(module, name)
            where = f"{relative}.{name}"
            if inspect.isclass(value):
                bases = [b.__name__ for b in value.__mro__[1:] if b.__name__ != "object"]
                is_exception = issubclass(value, BaseException)
                lines.append(f"class {where}" + (" (exception)" if is_exception else ""))
                lines.extend(_members(value))
                del bases
            elif callable(value):
                lines.append(f"def {where}{signature(value)}")
            else:
                lines.append(f"value {where}")
    return lines


if __name__ == "__main__":
    print("\n".join(surface(sys.argv[1] if len(sys.argv) > 1 else "kserve_v2.compat")))
