"""Every conformance case: the case modules register themselves with
:mod:`kserve_v2.conformance.registry` when imported, and this module imports them (kept apart from
the registry, which the case modules import, so that nothing imports in a circle)."""

from __future__ import annotations

from kserve_v2.conformance.registry import Case, registered

__all__ = ["all_cases"]


def all_cases() -> list[Case]:
    """Every case, in registration order (the case modules load on first call)."""
    import kserve_v2.conformance.cases  # noqa: F401  (registers on import)

    return registered()
