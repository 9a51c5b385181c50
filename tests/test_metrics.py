"""The Prometheus text-format parser: golden texts, errors by line, hypothesis round trips."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.metrics import (
    METRIC_TYPES,
    MetricFamily,
    Sample,
    format_metrics,
    parse_metrics,
)

# A piece of what Triton 2.51 serves on its metrics port.
TRITON_TEXT = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="simple",version="1"} 3
nv_inference_request_success{model="classify",version="1"} 0
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="simple",reason="BACKEND",version="1"} 0
nv_inference_request_failure{model="simple",reason="CANCELED",version="1"} 1
# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.25
"""


def test_triton_text() -> None:
    families = parse_metrics(TRITON_TEXT)
    assert list(families) == [
        "nv_inference_request_success",
        "nv_inference_request_failure",
        "nv_cpu_utilization",
    ]
    success = families["nv_inference_request_success"]
    assert success.type == "counter"
    assert success.help == "Number of successful inference requests, all batch sizes"
    assert success.samples[0] == Sample(
        "nv_inference_request_success", {"model": "simple", "version": "1"}, 3.0
    )
    assert success.value(model="simple") == 3.0
    failure = families["nv_inference_request_failure"]
    assert failure.total(model="simple") == 1.0
    assert [s.labels["reason"] for s in failure.find(model="simple")] == ["BACKEND", "CANCELED"]
    assert families["nv_cpu_utilization"].value() == 0.25
    assert parse_metrics(TRITON_TEXT.encode()) == families


def test_value_needs_exactly_one_sample() -> None:
    failure = parse_metrics(TRITON_TEXT)["nv_inference_request_failure"]
    with pytest.raises(InvalidInputError, match="2 samples"):
        failure.value(model="simple")
    with pytest.raises(InvalidInputError, match="0 samples"):
        failure.value(model="nope")
    assert failure.total(model="nope") == 0.0


def test_histogram_and_summary_samples_join_their_family() -> None:
    text = """\
# TYPE latency histogram
latency_bucket{le="0.1"} 1
latency_bucket{le="+Inf"} 3
latency_sum 0.7
latency_count 3
# TYPE rpc summary
rpc{quantile="0.5"} 0.2
rpc_sum 4
rpc_count 9
# TYPE plain counter
plain_count 1
"""
    families = parse_metrics(text)
    assert list(families) == ["latency", "rpc", "plain", "plain_count"]
    assert [s.name for s in families["latency"].samples] == [
        "latency_bucket",
        "latency_bucket",
        "latency_sum",
        "latency_count",
    ]
    assert families["latency"].find(le="+Inf")[0].value == 3.0
    assert [s.name for s in families["rpc"].samples] == ["rpc", "rpc_sum", "rpc_count"]
    # A counter has no _count series: plain_count is a metric of its own.
    assert families["plain"].samples == ()
    assert families["plain_count"].type == "untyped"


def test_values_timestamps_and_escapes() -> None:
    text = (
        "# HELP m a \\\\ backslash\\nand a new line\n"
        'm{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",} NaN 1700000000000\n'
        'm{k="v"} +Inf -5\n'
        'm{k="w"} -Inf\n'
        'm{k="x"} 1.5e-3\n'
        'm{ k = "y" } .5\n'
        '  m{k="z"}\t7\n'
        "# a comment\n"
        "#  TYPE_ is not a keyword\n"
        "\n"
    )
    family = parse_metrics(text)["m"]
    assert family.help == "a \\ backslash\nand a new line"
    first = family.samples[0]
    assert first.labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb"}
    assert math.isnan(first.value)
    assert first.timestamp == 1_700_000_000_000
    assert family.find(k="v")[0] == Sample("m", {"k": "v"}, math.inf, -5)
    assert [s.value for s in family.samples[2:]] == [-math.inf, 0.0015, 0.5, 7.0]


# (case, text, message fragment, line number)
ERRORS: list[tuple[str, str, str, int]] = [
    ("no value", "m\n", "expected a value", 1),
    ("two many tokens", "m 1 2 3\n", "expected a value", 1),
    ("bad value", "m one\n", "invalid sample value", 1),
    ("underscore in value", "m 1_000\n", "invalid sample value", 1),
    ("foreign digits", "m \u0661\n", "invalid sample value", 1),
    ("bad timestamp", "m 1 2.5\n", "invalid timestamp", 1),
    ("huge timestamp", "m 1 99999999999999999999\n", "invalid timestamp", 1),
    ("bad name", "1m 1\n", "expected a metric name", 1),
    ("name glued to value", "m\u00e91\n", "blank after the metric name", 1),
    ("unclosed braces", 'm{a="b" 1\n', "expected ',' or '}'", 1),
    ("unclosed quote", 'm{a="b} 1\n', "not closed", 1),
    ("bad label name", 'm{1a="b"} 1\n', "label name", 1),
    ("no equals", 'm{a "b"} 1\n', "expected '='", 1),
    ("unquoted value", "m{a=b} 1\n", "quoted value", 1),
    ("duplicate label", 'm{a="1",a="2"} 1\n', "appears twice", 1),
    ("bad label escape", 'm{a="\\t"} 1\n', "invalid escape", 1),
    ("bad help escape", "# HELP m tab\\t\n", "invalid escape", 1),
    ("help without name", "# HELP\n", "needs a metric name", 1),
    ("unknown type", "# TYPE m meter\n", "unknown metric type", 1),
    ("second type", "# TYPE m counter\n# TYPE m gauge\n", "second TYPE", 2),
    ("type after samples", "m 1\n# TYPE m gauge\n", "TYPE after its samples", 2),
    ("second help", "# HELP m a\n# HELP m b\n", "second HELP", 2),
    ("error on a later line", "ok 1\n\nbad{\n", "line 3", 3),
]


@pytest.mark.parametrize(
    ("text", "fragment", "line"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_errors_name_the_line(text: str, fragment: str, line: int) -> None:
    with pytest.raises(ProtocolError, match=f"line {line}") as info:
        parse_metrics(text)
    assert fragment in str(info.value)


def test_invalid_utf8() -> None:
    with pytest.raises(ProtocolError, match="UTF-8"):
        parse_metrics(b"m 1\n\xff\n")


def test_format_golden() -> None:
    families = [
        MetricFamily(
            "up",
            "gauge",
            "Is it\nup? \\o/",
            (
                Sample("up", {"job": 'a"b\\c\nd'}, 1.0, 12),
                Sample("up", {}, math.nan),
                Sample("up", {}, -math.inf),
            ),
        ),
        MetricFamily("empty"),
    ]
    assert format_metrics(families) == (
        "# HELP up Is it\\nup? \\\\o/\n"
        "# TYPE up gauge\n"
        'up{job="a\\"b\\\\c\\nd"} 1.0 12\n'
        "up NaN\n"
        "up -Inf\n"
        "# TYPE empty untyped\n"
    )


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Metric names, none ending like a histogram/summary series: with both ``x`` (a histogram) and
# ``x_count`` drawn, the samples of ``x_count`` would rightly join ``x`` on the way back.
METRIC_NAMES = st.builds(
    str.__add__, st.sampled_from(_LETTERS + "_:"), st.text(_LETTERS + "0123456789_:", max_size=10)
).filter(lambda n: not n.endswith(("_bucket", "_sum", "_count")))
# Label names and values (any text: escapes cover backslash, quote and LF).
LABEL_NAMES = st.builds(
    str.__add__, st.sampled_from(_LETTERS + "_"), st.text(_LETTERS + "0123456789_", max_size=8)
)
LABEL_VALUES = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
# Help text: the format cannot keep leading blanks or CR-free line ends other than LF.
HELP_TEXTS = st.text(st.characters(exclude_categories=("Cs",)), max_size=30).filter(
    lambda s: not s.startswith((" ", "\t"))
)
# Sample values, NaN and the infinities included.
VALUES = st.floats(allow_nan=True, allow_infinity=True)
TIMESTAMPS = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)


@st.composite
def families(draw: st.DrawFn) -> list[MetricFamily]:
    """Families whose sample names fit their type, with distinct family names."""
    names = draw(st.lists(METRIC_NAMES, unique=True, max_size=4))
    out = []
    for name in names:
        kind = draw(st.sampled_from(sorted(METRIC_TYPES)))
        suffixes = {"histogram": ["_bucket", "_sum", "_count"], "summary": ["", "_sum", "_count"]}
        sample_names = [name + s for s in suffixes.get(kind, [""])]
        samples = draw(
            st.lists(
                st.builds(
                    Sample,
                    name=st.sampled_from(sample_names),
                    labels=st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=3),
                    value=VALUES,
                    timestamp=TIMESTAMPS,
                ),
                max_size=4,
            )
        )
        out.append(MetricFamily(name, kind, draw(HELP_TEXTS), tuple(samples)))
    return out


def same(a: MetricFamily, b: MetricFamily) -> bool:
    """Equal, with NaN equal to NaN."""

    def key(s: Sample) -> tuple[object, ...]:
        return (s.name, dict(s.labels), "nan" if math.isnan(s.value) else s.value, s.timestamp)

    return (a.name, a.type, a.help, [key(s) for s in a.samples]) == (
        b.name,
        b.type,
        b.help,
        [key(s) for s in b.samples],
    )


@given(families())
@settings(max_examples=200, deadline=None)
def test_round_trip(original: list[MetricFamily]) -> None:
    parsed = parse_metrics(format_metrics(original))
    assert list(parsed) == [f.name for f in original]
    for family in original:
        assert same(parsed[family.name], family)


@given(st.text(max_size=200) | st.binary(max_size=200))
@settings(max_examples=500, deadline=None)
def test_any_input_parses_or_raises_protocol_error(text: str | bytes) -> None:
    try:
        result = parse_metrics(text)
    except ProtocolError:
        return
    for name, family in result.items():
        assert family.name == name
        assert family.type in METRIC_TYPES
        assert all(isinstance(s.value, float) for s in family.samples)


# Lines built from the format's own pieces, so that more of them are nearly valid.
LINE_PIECES = st.lists(
    st.sampled_from(
        [
            "# HELP ",
            "# TYPE ",
            "m",
            "m_sum",
            "{",
            "}",
            "a",
            "=",
            '"',
            "\\",
            ",",
            " ",
            "\t",
            "1",
            "NaN",
            "+Inf",
            "counter",
            "histogram",
            "\n",
            "-",
            ".",
            "e",
        ]
    ),
    max_size=40,
).map("".join)


@given(LINE_PIECES)
@settings(max_examples=500, deadline=None)
def test_near_valid_input_parses_or_raises_protocol_error(text: str) -> None:
    with contextlib.suppress(ProtocolError):
        parse_metrics(text)
