"""The shared argument checks (kserve_v2.arguments) on their own; every client method is held
to them on both protocols by tests/client/test_bad_arguments.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kserve_v2 import InvalidInputError
from kserve_v2.arguments import (
    build_infer_request,
    check_bool,
    check_compression,
    check_model_name,
    check_query,
    check_region_name,
    check_statistics_target,
    check_timeout,
    check_version,
    cuda_shm_registration,
    header_pairs,
    log_settings_update,
    system_shm_registration,
)


@pytest.mark.parametrize("value", [None, 0.5, 1, 60.0, math.inf])
def test_good_timeouts(value: Any) -> None:
    assert check_timeout(value) == value


@pytest.mark.parametrize("value", [0, -1, -0.5, True, False, "1", math.nan, [1]])
def test_bad_timeouts(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="connect_timeout"):
        check_timeout(value, "connect_timeout")


def test_compressions() -> None:
    assert [check_compression(v) for v in (None, "gzip", "deflate")] == [None, "gzip", "deflate"]
    for bad in ("", "br", "GZIP", "gzip ", 1):
        with pytest.raises(InvalidInputError, match="accept_compression"):
            check_compression(bad, "accept_compression")


def test_header_pairs() -> None:
    assert header_pairs({"A": "1"}) == [("A", "1")]
    assert header_pairs([("A", "1"), ["B", "2"]]) == [("A", "1"), ("B", "2")]  # type: ignore[list-item]
    assert header_pairs([]) == []
    for bad in (5, "A: 1", b"A", [("A",)], [("A", "1", "2")], {"A": 1}, {1: "a"}, [5]):
        with pytest.raises(InvalidInputError):
            header_pairs(bad)


def test_query() -> None:
    check_query({"a": 1})
    check_query([("a", True)])
    for bad in (5, "a=1", [("a",)], {"": 1}, [(1, 2)]):
        with pytest.raises(InvalidInputError):
            check_query(bad)


def test_bools() -> None:
    assert check_bool(True, "x") is True
    for bad in (1, 0, "yes", None):
        with pytest.raises(InvalidInputError, match="ready_only must be a bool"):
            check_bool(bad, "ready_only")


def test_models_and_versions() -> None:
    assert check_model_name("m") == "m"
    for bad in ("", None, 5):
        with pytest.raises(InvalidInputError, match="model name"):
            check_model_name(bad)
    assert [check_version(v) for v in ("", "3", 2, 0)] == ["", "3", "2", "0"]
    for bad in (-1, True, 1.5, None, b"1"):
        with pytest.raises(InvalidInputError, match="model version"):
            check_version(bad)
    assert check_statistics_target("", "") == ("", "")
    assert check_statistics_target("m", 2) == ("m", "2")
    with pytest.raises(InvalidInputError, match="a version needs a model"):
        check_statistics_target("", "1")


def test_regions() -> None:
    assert check_region_name("", required=False) == ""
    with pytest.raises(InvalidInputError, match="non-empty"):
        check_region_name("", required=True)
    with pytest.raises(InvalidInputError, match="every region"):
        check_region_name(None, required=False)
    assert system_shm_registration("r", "/k", 64, 4096) == (
        "r",
        {"key": "/k", "offset": 4096, "byte_size": 64},
    )
    assert cuda_shm_registration("g", bytearray(64), 1, 128) == ("g", bytes(64), 1, 128)
    for bad in (("", "/k", 64, 0), ("r", "k", 64, 0), ("r", "/k", 0, 0), ("r", "/k", 8, -1)):
        with pytest.raises(InvalidInputError):
            system_shm_registration(*bad)
    with pytest.raises(InvalidInputError):
        cuda_shm_registration("g", bytes(8), 0, 64)


def test_log_settings_are_uint32() -> None:
    assert log_settings_update({"log_verbose_level": 2**32 - 1, "log_info": True}) == {
        "log_verbose_level": 2**32 - 1,
        "log_info": True,
    }
    for bad in (-1, 2**32):
        with pytest.raises(InvalidInputError, match="uint32"):
            log_settings_update({"log_verbose_level": bad})


def test_infer_versions_and_sequence_flags() -> None:
    assert build_infer_request("m", {"x": [1]}, version=3).model_version == "3"
    request = build_infer_request("m", {"x": [1]}, sequence_id=7, sequence_end=True)
    assert request.parameters == {
        "sequence_id": 7,
        "sequence_start": False,
        "sequence_end": True,
    }
    for bad in (
        {"version": 1.5},
        {"version": None},
        {"sequence_id": 7, "sequence_start": 1},
        {"sequence_start": "no"},  # not a bool, and no sequence_id either
        {"allow_reserved": 1},
    ):
        with pytest.raises(InvalidInputError):
            build_infer_request("m", {"x": [1]}, **bad)
