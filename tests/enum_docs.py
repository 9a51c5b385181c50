"""A check shared by the wire-enum tests: every member carries a ``#:`` doc comment."""

from __future__ import annotations

import enum
import inspect


def undocumented_members(cls: type[enum.Enum]) -> list[str]:
    """Members of ``cls`` whose definition is not directly preceded by a ``#:`` comment."""
    lines = inspect.getsource(cls).splitlines()
    missing = []
    for name in cls.__members__:
        index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{name} ="))
        if not lines[index - 1].strip().startswith("#:"):
            missing.append(name)
    return missing
