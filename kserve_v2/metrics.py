"""Prometheus metrics in the text exposition format (version 0.0.4), without I/O.

Triton serves its metrics (request counts, latencies, GPU use, ...) in this format on its
metrics port (8002 by default). :func:`parse_metrics` turns such a text into
:class:`MetricFamily` objects by name; :func:`format_metrics` writes them back (tests, test
servers, re-exporting). ``Client.metrics()`` fetches and parses in one call.

The grammar, as Prometheus' own parser reads it:

* ``# HELP name text``: ``text`` escapes ``\\\\`` and ``\\n``;
* ``# TYPE name counter|gauge|histogram|summary|untyped``, before the family's samples;
* other lines starting with ``#`` are comments; empty lines are skipped;
* ``name{label="value",...} value [timestamp]``: label values escape ``\\\\``, ``\\"`` and
  ``\\n``; a trailing comma in the braces is allowed; the value is a float (``NaN``,
  ``+Inf``, ``-Inf`` included), the timestamp an integer of milliseconds since the epoch;
* samples ``name_bucket``, ``name_sum``, ``name_count`` belong to histogram ``name``, and
  ``name_sum``, ``name_count`` to summary ``name``; samples of an undeclared name form an
  ``untyped`` family.

Anything else raises :class:`~kserve_v2.errors.ProtocolError` naming the line.

Example::

    >>> text = '''# HELP nv_inference_count Number of inferences performed
    ... # TYPE nv_inference_count counter
    ... nv_inference_count{model="simple",version="1"} 12
    ... '''
    >>> families = parse_metrics(text)
    >>> families["nv_inference_count"].type
    'counter'
    >>> families["nv_inference_count"].value(model="simple")
    12.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kserve_v2.errors import InvalidInputError, ProtocolError

__all__ = ["METRIC_TYPES", "MetricFamily", "Sample", "format_metrics", "parse_metrics"]

#: The metric types of the text format.
METRIC_TYPES: Final = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})

_METRIC_NAME: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_BLANKS: Final = re.compile(r"[ \t]*")
# Go's strconv.ParseFloat as Prometheus uses it, less hex floats and underscores (which no
# exporter writes): decimal numbers with an optional exponent, Inf/Infinity and NaN.
_FLOAT: Final = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    r"|[nN][aA][nN]",
    re.ASCII,  # \d must not match other scripts' digits, which float() would accept
)
_TIMESTAMP: Final = re.compile(r"-?[0-9]{1,19}")
_SUFFIXES: Final = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
_HELP_ESCAPES: Final = {"\\": "\\", "n": "\n"}
_LABEL_ESCAPES: Final = {"\\": "\\", "n": "\n", '"': '"'}


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample line: the sample's own name (``x_bucket`` for histogram ``x``), its labels,
    value, and optional timestamp (milliseconds since the epoch)."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: int | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every one of ``labels`` is set to the given value on this sample."""
        return all(self.labels.get(key) == value for key, value in labels.items())


@dataclass(frozen=True, slots=True)
class MetricFamily:
    """A metric and all its samples: ``name``, ``type`` (see :data:`METRIC_TYPES`), ``help``.

    Example::

        fam = client.metrics()["nv_inference_request_success"]
        fam.value(model="simple", version="1")      # the one matching sample's value
        fam.total()                                 # summed over every model
    """

    name: str
    type: str = "untyped"
    help: str = ""
    samples: tuple[Sample, ...] = field(default_factory=tuple)

    def find(self, **labels: str) -> list[Sample]:
        """The samples whose labels include all of ``labels``."""
        return [s for s in self.samples if s.matches(labels)]

    def value(self, **labels: str) -> float:
        """The value of the single sample matching ``labels``.

        Raises :class:`InvalidInputError` when none or several match (say which labels would
        single one out).
        """
        found = self.find(**labels)
        if len(found) != 1:
            raise InvalidInputError(
                f"{len(found)} samples of {self.name!r} match {labels!r}; "
                "give labels that select exactly one (or use total())",
                value=labels,
            )
        return found[0].value

    def total(self, **labels: str) -> float:
        """The sum of the values of the samples matching ``labels`` (0.0 when none do)."""
        return math.fsum(s.value for s in self.find(**labels))


class _Builder:
    """A family being parsed: samples are collected in a list and frozen at the end."""

    __slots__ = ("help", "help_seen", "name", "samples", "type", "type_seen")

    def __init__(self, name: str) -> None:
        self.name = name
        self.type = "untyped"
        self.help = ""
        self.help_seen = False
        self.type_seen = False
        self.samples: list[Sample] = []

    def build(self) -> MetricFamily:
        return MetricFamily(self.name, self.type, self.help, tuple(self.samples))


def _error(lineno: int, message: str, line: str) -> ProtocolError:
    return ProtocolError(f"metrics line {lineno}: {message}: {line[:120]!r}", value=line[:200])


def _unescape(text: str, escapes: Mapping[str, str], lineno: int, line: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    pos = 0
    while True:
        slash = text.find("\\", pos)
        if slash < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:slash])
        replacement = escapes.get(text[slash + 1 : slash + 2])
        if replacement is None:
            raise _error(lineno, f"invalid escape sequence {text[slash : slash + 2]!r}", line)
        out.append(replacement)
        pos = slash + 2


def _read_label_value(line: str, pos: int, lineno: int) -> tuple[str, int]:
    """The quoted value starting after the opening quote at ``pos``; returns (value, end)."""
    out: list[str] = []
    end = len(line)
    while pos < end:
        char = line[pos]
        if char == '"':
            return "".join(out), pos + 1
        if char == "\\":
            replacement = _LABEL_ESCAPES.get(line[pos + 1 : pos + 2])
            if replacement is None:
                raise _error(
                    lineno, f"invalid escape sequence {line[pos : pos + 2]!r} in label value", line
                )
            out.append(replacement)
            pos += 2
            continue
        out.append(char)
        pos += 1
    raise _error(lineno, "label value is not closed by a quote", line)


def _skip_blanks(line: str, pos: int) -> int:
    match = _BLANKS.match(line, pos)
    assert match is not None  # [ \t]* always matches
    return match.end()


def _parse_labels(line: str, pos: int, lineno: int) -> tuple[dict[str, str], int]:
    """Labels from the ``{`` at ``pos`` to the matching ``}``; returns (labels, end)."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        pos = _skip_blanks(line, pos)
        if line[pos : pos + 1] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(line, pos)
        if match is None:
            raise _error(lineno, "expected a label name", line)
        label = match.group()
        pos = _skip_blanks(line, match.end())
        if line[pos : pos + 1] != "=":
            raise _error(lineno, f"expected '=' after label {label!r}", line)
        pos = _skip_blanks(line, pos + 1)
        if line[pos : pos + 1] != '"':
            raise _error(lineno, f"expected a quoted value for label {label!r}", line)
        value, pos = _read_label_value(line, pos + 1, lineno)
        if label in labels:
            raise _error(lineno, f"label {label!r} appears twice", line)
        labels[label] = value
        pos = _skip_blanks(line, pos)
        separator = line[pos : pos + 1]
        if separator == ",":
            pos += 1
        elif separator == "}":
            return labels, pos + 1
        else:
            raise _error(lineno, "expected ',' or '}' after a label", line)


def _parse_float(token: str, lineno: int, line: str) -> float:
    if _FLOAT.fullmatch(token) is None:
        raise _error(lineno, f"invalid sample value {token[:40]!r}", line)
    return float(token)


def _parse_sample(line: str, lineno: int) -> Sample:
    match = _METRIC_NAME.match(line)
    if match is None:
        raise _error(lineno, "expected a metric name", line)
    name = match.group()
    pos = _skip_blanks(line, match.end())
    labels: dict[str, str] = {}
    if line[pos : pos + 1] == "{":
        labels, pos = _parse_labels(line, pos, lineno)
    elif pos == match.end() and pos < len(line):
        raise _error(lineno, "expected a blank after the metric name", line)
    tokens = [t for t in re.split(r"[ \t]+", line[pos:]) if t]
    if not 1 <= len(tokens) <= 2:
        raise _error(lineno, "expected a value and an optional timestamp", line)
    value = _parse_float(tokens[0], lineno, line)
    timestamp = None
    if len(tokens) == 2:
        if _TIMESTAMP.fullmatch(tokens[1]) is None:
            raise _error(lineno, f"invalid timestamp {tokens[1][:40]!r}", line)
        timestamp = int(tokens[1])
        if not -(2**63) <= timestamp < 2**63:
            raise _error(lineno, "timestamp outside the int64 range", line)
    return Sample(name, labels, value, timestamp)


def _family_of(name: str, families: dict[str, _Builder]) -> _Builder:
    """The family a sample called ``name`` belongs to, created (untyped) if there is none."""
    for suffixes in _SUFFIXES.values():
        for suffix in suffixes:
            if name.endswith(suffix):
                base = families.get(name[: -len(suffix)])
                if base is not None and suffix in _SUFFIXES.get(base.type, ()):
                    return base
    family = families.get(name)
    if family is None:
        family = families[name] = _Builder(name)
    return family


def _parse_comment(line: str, lineno: int, families: dict[str, _Builder]) -> None:
    pos = _skip_blanks(line, 1)
    keyword = line[pos : pos + 4]
    if keyword not in ("HELP", "TYPE") or line[pos + 4 : pos + 5] not in (" ", "\t", ""):
        return  # an ordinary comment
    pos = _skip_blanks(line, pos + 4)
    match = _METRIC_NAME.match(line, pos)
    if match is None or line[match.end() : match.end() + 1] not in (" ", "\t", ""):
        raise _error(lineno, f"# {keyword} needs a metric name", line)
    name = match.group()
    rest = line[_skip_blanks(line, match.end()) :]
    family = families.get(name)
    if family is None:
        family = families[name] = _Builder(name)
    if keyword == "HELP":
        if family.help_seen:
            raise _error(lineno, f"second HELP line for {name!r}", line)
        family.help_seen = True
        family.help = _unescape(rest, _HELP_ESCAPES, lineno, line)
        return
    kind = rest.rstrip(" \t")
    if kind not in METRIC_TYPES:
        raise _error(lineno, f"unknown metric type {kind[:40]!r}", line)
    if family.type_seen or family.samples:
        raise _error(lineno, f"second TYPE line for {name!r}, or TYPE after its samples", line)
    family.type_seen = True
    family.type = kind


def parse_metrics(text: str | bytes | bytearray | memoryview) -> dict[str, MetricFamily]:
    """Parse a metrics text into families by name (in order of first appearance).

    ``bytes`` are decoded as UTF-8. Malformed input raises
    :class:`~kserve_v2.errors.ProtocolError` with the line number.

    Example::

        >>> fams = parse_metrics('up{job="triton"} 1 1700000000000\\nnan_metric NaN\\n')
        >>> fams["up"].samples[0]
        Sample(name='up', labels={'job': 'triton'}, value=1.0, timestamp=1700000000000)
        >>> fams["nan_metric"].type
        'untyped'
    """
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"metrics are not valid UTF-8: {exc}") from None
    families: dict[str, _Builder] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.lstrip(" \t")
        if not line:
            continue
        if line[0] == "#":
            _parse_comment(line, lineno, families)
            continue
        sample = _parse_sample(line, lineno)
        _family_of(sample.name, families).samples.append(sample)
    return {name: builder.build() for name, builder in families.items()}


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_metrics(families: Iterable[MetricFamily] | Mapping[str, MetricFamily]) -> str:
    """Write families in the text format (the inverse of :func:`parse_metrics`).

    Example::

        >>> fam = MetricFamily("up", "gauge", "Is it up?", (Sample("up", {"job": 'a"b'}, 1.0),))
        >>> print(format_metrics([fam]), end="")
        # HELP up Is it up?
        # TYPE up gauge
        up{job="a\\"b"} 1.0
    """
    items = families.values() if isinstance(families, Mapping) else families
    lines: list[str] = []
    for family in items:
        if family.help:
            text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
            lines.append(f"# HELP {family.name} {text}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sample.labels.items())
            line = f"{sample.name}{{{labels}}}" if labels else sample.name
            line += f" {_format_value(sample.value)}"
            if sample.timestamp is not None:
                line += f" {sample.timestamp}"
            lines.append(line)
    return "".join(f"{line}\n" for line in lines)
