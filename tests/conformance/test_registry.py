"""The case registry's invariants: unique ids, real citations, known models, full coverage.

Citations are checked against the verbatim spec copies in ``../shared/specs`` (or
``KSERVE_V2_SPECS``): every quote must appear in the section it names (whitespace and the
``//`` of wrapped proto comments aside), so a report never cites words the spec does not say.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from pathlib import Path

import pytest

import kserve_v2.conformance.cases as cases_package
import kserve_v2.conformance.context as context_module
from kserve_v2.conformance import Case, Level, all_cases
from kserve_v2.conformance.models import MODELS
from kserve_v2.conformance.spec import DOCUMENTS, EXTENSIONS
from kserve_v2.testing.session import in_ci

ROOT = Path(__file__).resolve().parents[2]
SPECS = Path(os.environ.get("KSERVE_V2_SPECS", ROOT.parent / "shared" / "specs"))
MODELS_DIR = ROOT / "conformance" / "models"
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def normalize(text: str) -> str:
    """Whitespace collapsed; line breaks inside wrapped ``//`` comments and ``>`` quotes
    joined."""
    text = re.sub(r"\n[ \t]*(?:(?://|>)[ \t]*)?", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _title(raw: str) -> str:
    return raw.replace("*", "").replace("\\", "").strip()


@functools.cache
def sections(document: str) -> dict[str, list[str]]:
    """Heading title -> the normalized text of each section with that title (a section runs
    to the next heading of the same or a higher level). Headings inside code fences and HTML
    comments do not count."""
    lines = (SPECS / document).read_text(encoding="utf-8").splitlines()
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    in_fence = in_comment = False
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("```"):
            in_fence = not in_fence
            continue
        match = HEADING.match(line)
        if match and not in_fence:
            headings.append((index, len(match.group(1)), _title(match.group(2))))
    found: dict[str, list[str]] = {}
    for position, (start, level, title) in enumerate(headings):
        end = len(lines)
        for later, later_level, _ in headings[position + 1 :]:
            if later_level <= level:
                end = later
                break
        found.setdefault(title, []).append(normalize("\n".join(lines[start + 1 : end])))
    return found


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return all_cases()


@pytest.fixture(scope="module")
def specs_dir() -> Path:
    if not SPECS.is_dir():
        message = f"the spec copies are not at {SPECS} (set KSERVE_V2_SPECS)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return SPECS


def test_at_least_200_cases_with_unique_ids(cases: list[Case]) -> None:
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    assert len(cases) >= 200


def test_every_case_is_complete(cases: list[Case]) -> None:
    for case in cases:
        assert case.title, case.id
        assert case.spec.quote, case.id
        assert case.spec.section, case.id
        assert isinstance(case.level, Level), case.id
        assert case.spec.document in DOCUMENTS, case.id
        assert case.extension is None or case.extension in EXTENSIONS, case.id
        family = case.id.split(".")[0]
        expected = {"rest": ("http",), "grpc": ("grpc",), "cross": ("http", "grpc")}
        if family in expected:
            assert case.protocols == expected[family], case.id
        else:
            assert family == "ext", case.id


def test_every_quote_is_in_its_section(cases: list[Case], specs_dir: Path) -> None:
    problems = []
    for case in cases:
        found = sections(case.spec.document)
        texts = found.get(case.spec.section)
        if texts is None:
            problems.append(f"{case.id}: no section {case.spec.section!r} in {case.spec.document}")
            continue
        quote = normalize(case.spec.quote)
        if not any(quote in text for text in texts):
            problems.append(
                f"{case.id}: quote not in {case.spec.document} § {case.spec.section}: {quote!r}"
            )
    assert not problems, "\n".join(problems)


def test_every_document_is_there(specs_dir: Path) -> None:
    for document in DOCUMENTS:
        assert (specs_dir / document).is_file(), document


def test_models_are_known_and_shipped(cases: list[Case]) -> None:
    used = {m for case in cases for m in case.models}
    assert used <= set(MODELS), used - set(MODELS)
    shipped = {p.name for p in MODELS_DIR.iterdir() if (p / "config.pbtxt").is_file()}
    assert shipped == set(MODELS)
    readme = (ROOT / "conformance" / "README.md").read_text(encoding="utf-8")
    for name in MODELS:
        assert f"`{name}`" in readme, f"{name} is not described in conformance/README.md"


def _case_sources() -> str:
    modules = [m for m in vars(cases_package).values() if inspect.ismodule(m)]
    return "\n".join(inspect.getsource(m) for m in modules)


def test_every_grpc_rpc_is_exercised() -> None:
    proto = (ROOT / "protos" / "grpc_service.proto").read_text(encoding="utf-8")
    rpcs = re.findall(r"^\s*rpc\s+(\w+)\s*\(", proto, flags=re.MULTILINE)
    source = _case_sources()
    assert len(rpcs) >= 20
    for rpc in rpcs:
        if rpc == "ModelStreamInfer":
            assert "stream_rpc(" in source
            assert "ModelStreamInfer" in inspect.getsource(context_module)
            continue
        assert f'"{rpc}"' in source, f"no case calls {rpc}"


#: Each REST endpoint of the core protocol and of the extensions -> how a case names it.
REST_ENDPOINTS = {
    "GET v2": r'"GET", "v2"\)',
    "GET v2/health/live": r"v2/health/live",
    "GET v2/health/ready": r"v2/health/ready",
    "GET v2/models/<m>[/versions/<v>]": r'"v2/models/versioned/versions/2"',
    "GET v2/models/<m>[/versions/<v>]/ready": r"/versions/\{version\}/ready",
    "POST v2/models/<m>[/versions/<v>]/infer": r"versions/987/infer",
    "GET v2/models/<m>[/versions/<v>]/config": r"versions/1/config",
    "GET v2/models[/<m>[/versions/<v>]]/stats": r"versions/2/stats",
    "POST v2/repository/index": r"v2/repository/index",
    "POST v2/repository/models/<m>/load": r"/load",
    "POST v2/repository/models/<m>/unload": r"/unload",
    "GET v2/systemsharedmemory[/region/<r>]/status": r"systemsharedmemory/region/\{_name\(\)\}/st",
    "POST v2/systemsharedmemory/region/<r>/register": r"memory/region/\{region.name\}/register",
    "POST v2/systemsharedmemory[/region/<r>]/unregister": r"v2/systemsharedmemory/unregister",
    "GET v2/cudasharedmemory/status": r"_status\(ctx, \"cuda\"\)",
    "POST v2/cudasharedmemory/region/<r>/register": r"cudasharedmemory/region/\{_name\(\)\}/reg",
    "POST v2/cudasharedmemory/unregister": r"v2/cudasharedmemory/unregister",
    "GET/POST v2[/models/<m>]/trace/setting": r"trace/setting",
    "GET/POST v2/logging": r"v2/logging",
    "POST v2/models/<m>/generate": r'\{model\}/generate"',
    "POST v2/models/<m>/generate_stream": r'"_stream"',
}


@pytest.mark.parametrize("endpoint", sorted(REST_ENDPOINTS))
def test_every_rest_endpoint_is_exercised(endpoint: str) -> None:
    assert re.search(REST_ENDPOINTS[endpoint], _case_sources()), endpoint


def test_every_extension_has_cases(cases: list[Case]) -> None:
    covered = {case.extension for case in cases}
    for name in EXTENSIONS:
        if name == "sequence(string_id)":
            continue  # a sub-feature, exercised by the sequence cases' string ids
        assert name in covered, name
