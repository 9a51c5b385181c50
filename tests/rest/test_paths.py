"""REST request targets: every endpoint, versions, base paths, percent-encoding, queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings

from kserve_v2.errors import InvalidInputError
from kserve_v2.rest.paths import RestPaths, with_query
from tests.strategies import NAMES

# (endpoint, call, target without a base path); model "m", version "3" where one is given.
ENDPOINTS: list[tuple[str, Callable[[RestPaths], str], str]] = [
    ("server_metadata", lambda p: p.server_metadata(), "/v2"),
    ("server_live", lambda p: p.server_live(), "/v2/health/live"),
    ("server_ready", lambda p: p.server_ready(), "/v2/health/ready"),
    ("model_metadata", lambda p: p.model_metadata("m"), "/v2/models/m"),
    ("model_metadata_version", lambda p: p.model_metadata("m", "3"), "/v2/models/m/versions/3"),
    ("model_ready", lambda p: p.model_ready("m"), "/v2/models/m/ready"),
    ("model_ready_version", lambda p: p.model_ready("m", "3"), "/v2/models/m/versions/3/ready"),
    ("model_infer", lambda p: p.model_infer("m"), "/v2/models/m/infer"),
    ("model_infer_version", lambda p: p.model_infer("m", "3"), "/v2/models/m/versions/3/infer"),
    ("model_config", lambda p: p.model_config("m"), "/v2/models/m/config"),
    (
        "model_config_version",
        lambda p: p.model_config("m", "3"),
        "/v2/models/m/versions/3/config",
    ),
    ("model_statistics_all", lambda p: p.model_statistics(), "/v2/models/stats"),
    ("model_statistics", lambda p: p.model_statistics("m"), "/v2/models/m/stats"),
    (
        "model_statistics_version",
        lambda p: p.model_statistics("m", "3"),
        "/v2/models/m/versions/3/stats",
    ),
    ("repository_index", lambda p: p.repository_index(), "/v2/repository/index"),
    ("repository_load", lambda p: p.repository_load("m"), "/v2/repository/models/m/load"),
    ("repository_unload", lambda p: p.repository_unload("m"), "/v2/repository/models/m/unload"),
    (
        "system_shm_status",
        lambda p: p.shared_memory("system", "status"),
        "/v2/systemsharedmemory/status",
    ),
    (
        "system_shm_region_status",
        lambda p: p.shared_memory("system", "status", "r"),
        "/v2/systemsharedmemory/region/r/status",
    ),
    (
        "system_shm_register",
        lambda p: p.shared_memory("system", "register", "r"),
        "/v2/systemsharedmemory/region/r/register",
    ),
    (
        "system_shm_unregister_all",
        lambda p: p.shared_memory("system", "unregister"),
        "/v2/systemsharedmemory/unregister",
    ),
    (
        "cuda_shm_status",
        lambda p: p.shared_memory("cuda", "status"),
        "/v2/cudasharedmemory/status",
    ),
    (
        "cuda_shm_register",
        lambda p: p.shared_memory("cuda", "register", "r"),
        "/v2/cudasharedmemory/region/r/register",
    ),
    (
        "cuda_shm_unregister",
        lambda p: p.shared_memory("cuda", "unregister", "r"),
        "/v2/cudasharedmemory/region/r/unregister",
    ),
    ("trace_setting", lambda p: p.trace_setting(), "/v2/trace/setting"),
    ("model_trace_setting", lambda p: p.trace_setting("m"), "/v2/models/m/trace/setting"),
    ("logging", lambda p: p.logging(), "/v2/logging"),
    ("generate", lambda p: p.generate("m"), "/v2/models/m/generate"),
    ("generate_version", lambda p: p.generate("m", "3"), "/v2/models/m/versions/3/generate"),
    ("generate_stream", lambda p: p.generate("m", stream=True), "/v2/models/m/generate_stream"),
]
ENDPOINT_IDS = [name for name, _, _ in ENDPOINTS]


@pytest.mark.parametrize(("endpoint", "call", "target"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_endpoint_target(endpoint: str, call: Callable[[RestPaths], str], target: str) -> None:
    assert call(RestPaths()) == target


@pytest.mark.parametrize(
    "base_path", ["/serving/ns", "serving/ns", "/serving/ns/", "//serving/ns//"]
)
@pytest.mark.parametrize(("endpoint", "call", "target"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_base_path_prefixes_every_endpoint(
    base_path: str, endpoint: str, call: Callable[[RestPaths], str], target: str
) -> None:
    assert call(RestPaths(base_path)) == "/serving/ns" + target


@pytest.mark.parametrize("base_path", ["", "/", "//"])
def test_empty_base_path_adds_nothing(base_path: str) -> None:
    assert RestPaths(base_path).model_infer("m") == "/v2/models/m/infer"


def test_base_path_with_a_space_is_percent_encoded_but_keeps_its_slashes() -> None:
    assert RestPaths("/my gateway/v1").server_live() == "/my%20gateway/v1/v2/health/live"


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("my model", "my%20model"),
        ("a/b", "a%2Fb"),
        ("../admin", "..%2Fadmin"),
        ("modèle", "mod%C3%A8le"),
        ("模型", "%E6%A8%A1%E5%9E%8B"),
        ("q?x#y", "q%3Fx%23y"),
        ("100%", "100%25"),
        ("a+b&c=d", "a%2Bb%26c%3Dd"),
        ("with_under-score.v1~", "with_under-score.v1~"),
    ],
)
def test_odd_model_names_are_one_percent_encoded_segment(name: str, segment: str) -> None:
    paths = RestPaths()
    assert paths.model_infer(name) == f"/v2/models/{segment}/infer"
    assert paths.model_infer(name, "1") == f"/v2/models/{segment}/versions/1/infer"
    assert paths.repository_load(name) == f"/v2/repository/models/{segment}/load"
    assert paths.shared_memory("system", "register", name) == (
        f"/v2/systemsharedmemory/region/{segment}/register"
    )


def test_odd_versions_are_percent_encoded() -> None:
    assert RestPaths().model_ready("m", "1/2 x") == "/v2/models/m/versions/1%2F2%20x/ready"


@settings(max_examples=100, deadline=None)
@given(NAMES, NAMES)
def test_any_model_name_and_version_stay_single_segments(name: str, version: str) -> None:
    target = RestPaths("/base").model_infer(name, version)
    segments = target.split("/")
    assert segments[:4] == ["", "base", "v2", "models"]
    assert segments[5] == "versions"
    assert segments[7] == "infer"
    assert len(segments) == 8
    assert unquote(segments[4]) == name
    assert unquote(segments[6]) == version


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.model_infer(""),
        lambda p: p.model_metadata(None),
        lambda p: p.model_ready(3),
        lambda p: p.repository_load(""),
        lambda p: p.generate(b"m"),
    ],
    ids=["empty", "None", "int", "load-empty", "bytes"],
)
def test_model_name_must_be_a_non_empty_string(call: Callable[[RestPaths], str]) -> None:
    with pytest.raises(InvalidInputError, match="model name"):
        call(RestPaths())


def test_unknown_shared_memory_kind_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="shared-memory kind"):
        RestPaths().shared_memory("gpu", "status")


# ---------------------------------------------------------------------------------------------
# query strings


@pytest.mark.parametrize(
    ("query", "target"),
    [
        (None, "/v2/logging"),
        ({}, "/v2/logging"),
        ([], "/v2/logging"),
        ({"a": 1}, "/v2/logging?a=1"),
        ({"ready": True, "strict": False}, "/v2/logging?ready=true&strict=false"),
        ([("k", "v"), ("k", "w")], "/v2/logging?k=v&k=w"),
        ({"name": "a b/c&d=é"}, "/v2/logging?name=a+b%2Fc%26d%3D%C3%A9"),
        ({"x": 0.5}, "/v2/logging?x=0.5"),
    ],
)
def test_query_strings(query: Any, target: str) -> None:
    assert with_query("/v2/logging", query) == target


def test_query_is_appended_to_an_existing_one() -> None:
    assert with_query("/v2/x?a=1", {"b": 2}) == "/v2/x?a=1&b=2"
