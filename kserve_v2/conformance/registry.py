"""The case registry: every conformance case as data plus one small function.

A case module declares its cases with :func:`case` (a decorator) or builds them in a loop
with :func:`register`; :func:`all_cases` imports the case modules on first use and returns
every case in registration order.

Example::

    from kserve_v2.conformance.registry import case
    from kserve_v2.conformance.spec import OIP_REST, Level, Spec

    @case(
        "rest.infer.id-echo",
        "The request id comes back in the response",
        Spec(OIP_REST, "Inference Request JSON Object",
             "Optional, but if specified this identifier must be returned in the response."),
        Level.MUST,
        protocols=("http",),
        models=("identity_int32",),
    )
    def _(ctx):
        ...
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kserve_v2.conformance.spec import EXTENSIONS, Level, Spec

if TYPE_CHECKING:
    from kserve_v2.conformance.context import Context

__all__ = ["PROTOCOLS", "Case", "CaseFunction", "case", "registered", "register", "select"]

#: The protocols a case may apply to. A case naming both needs both servers (cross-protocol).
PROTOCOLS: Final = ("http", "grpc")

CaseFunction = Callable[["Context"], None]

# Ids are dotted lower-case words: "rest.infer.binary.bytes-trailing-nul".
_ID: Final = re.compile(r"[a-z0-9]+(?:[.-][a-z0-9_()]+)+")

_REGISTRY: dict[str, Case] = {}


@dataclass(frozen=True, slots=True)
class Case:
    """One conformance case.

    Attributes:
        id: unique dotted name; its first word is the protocol family (``rest``, ``grpc``,
            ``cross``) or ``ext`` for the advertisement checks.
        title: one line saying what is checked.
        spec: the sentence the case tests.
        level: how binding that sentence is (see :class:`~kserve_v2.conformance.spec.Level`).
        protocols: ``("http",)``, ``("grpc",)``, or both for cross-protocol cases.
        run: the check; it raises through the context to fail or skip.
        extension: the extension (a key of :data:`~kserve_v2.conformance.spec.EXTENSIONS`)
            the server must advertise for the case to run.
        models: models the case needs; a missing one skips the case.
        note: how the case reads the text, when that is not obvious from the quote.
    """

    id: str
    title: str
    spec: Spec
    level: Level
    protocols: tuple[str, ...]
    run: CaseFunction
    extension: str | None = None
    models: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.id):
            raise ValueError(f"case id {self.id!r} is not a dotted lower-case name")
        if not self.protocols or any(p not in PROTOCOLS for p in self.protocols):
            raise ValueError(f"case {self.id}: protocols must be among {PROTOCOLS}")
        if self.extension is not None and self.extension not in EXTENSIONS:
            raise ValueError(f"case {self.id}: unknown extension {self.extension!r}")
        if not isinstance(self.level, Level):
            raise ValueError(f"case {self.id}: level must be a Level")

    @property
    def section(self) -> str:
        """``document § section``: the unit the summaries count by."""
        return f"{self.spec.document} § {self.spec.section}"


def register(new: Case) -> Case:
    """Add a case; ids must be unique."""
    if new.id in _REGISTRY:
        raise ValueError(f"duplicate conformance case id {new.id!r}")
    _REGISTRY[new.id] = new
    return new


def case(
    id: str,
    title: str,
    spec: Spec,
    level: Level,
    *,
    protocols: Sequence[str],
    extension: str | None = None,
    models: Sequence[str] = (),
    note: str = "",
) -> Callable[[CaseFunction], CaseFunction]:
    """Decorator form of :func:`register`."""

    def decorate(func: CaseFunction) -> CaseFunction:
        register(
            Case(id, title, spec, level, tuple(protocols), func, extension, tuple(models), note)
        )
        return func

    return decorate


def registered() -> list[Case]:
    """The cases registered so far, in registration order (:func:`kserve_v2.conformance.catalog.
    all_cases` loads the case modules first)."""
    return list(_REGISTRY.values())


def select(cases: Iterable[Case], patterns: Sequence[str] = ()) -> list[Case]:
    """The cases whose id matches any pattern: a glob (``rest.infer.*``), or else a substring
    (``binary``). No patterns: all of them."""
    chosen = list(cases)
    if not patterns:
        return chosen

    def matches(case_id: str, pattern: str) -> bool:
        if any(ch in pattern for ch in "*?["):
            return fnmatch.fnmatchcase(case_id, pattern)
        return pattern in case_id

    return [c for c in chosen if any(matches(c.id, p) for p in patterns)]
