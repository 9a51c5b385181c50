"""The session's choices that shape every case: the HTTP client's tensor form, and how a
ModelStreamInfer answer that is not a ModelStreamInferResponse is told apart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

from kserve_v2.conformance import Session, Target
from kserve_v2.conformance import context as context_module
from kserve_v2.errors import ServerError
from kserve_v2.grpc.codec import generated
from tests.local_http import JSONHandler, serving


class _Recorder(JSONHandler):
    """Answers GET v2 with the server's extensions, and every POST with 400, noting its
    Content-Type."""

    url = ""
    extensions: ClassVar[list[str]] = []
    content_types: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        meta = {"name": "recorder", "version": "0", "extensions": self.extensions}
        self._send(200, json.dumps(meta).encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.content_types.append(self.headers.get("Content-Type", ""))
        self._send(400, b'{"error":"recorded"}')


@pytest.fixture(params=[["binary_tensor_data"], []], ids=["advertised", "not-advertised"])
def recorder(request: pytest.FixtureRequest) -> Iterator[type[_Recorder]]:
    handler = type("Handler", (_Recorder,), {"extensions": request.param, "content_types": []})
    with serving(handler) as handler.url:
        yield handler


def test_the_http_client_sends_binary_data_only_where_advertised(
    recorder: type[_Recorder],
) -> None:
    with Session(Target(http=recorder.url)) as session, pytest.raises(ServerError):
        session.http_client().infer("m", {"INPUT0": np.ones(2, np.int32)})
    binary = "binary_tensor_data" in recorder.extensions
    expected = "application/octet-stream" if binary else "application/json"
    assert recorder.content_types == [expected]


def test_a_stream_answer_of_another_message_is_told_apart() -> None:
    pb = generated()
    parse = context_module._parse_stream_response
    proper = pb.ModelStreamInferResponse(error_message="")
    proper.infer_response.model_name = "m"
    proper.infer_response.outputs.add(name="OUT")
    message, problem = parse(pb.ModelStreamInferResponse, proper.SerializeToString())
    assert problem is None
    assert message.infer_response.model_name == "m"
    # What MLServer sends: a ModelInferResponse, which protobuf reads as a
    # ModelStreamInferResponse whose error_message is the model's name.
    other = pb.ModelInferResponse(model_name="m", id="x")
    other.outputs.add(name="OUT")
    other.raw_output_contents.append(b"\x01\x00\x00\x00")
    _, problem = parse(pb.ModelStreamInferResponse, other.SerializeToString())
    assert problem == "it carries field numbers [3, 5, 6], which that message does not have"
    _, problem = parse(pb.ModelStreamInferResponse, b"\x12\x01\x31")  # field 2, not a message
    assert problem is not None
    assert problem.startswith("it does not parse as one")
