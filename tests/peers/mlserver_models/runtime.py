"""kserve-v2 test models for MLServer (``mlserver`` 1.7.1): the custom runtimes.

Run by MLServer in its own environment (``.venv-mlserver``), never imported by the tests:
:class:`kserve_v2.testing.MLServerServer` starts ``mlserver start`` on this directory, whose
``*/model-settings.json`` name these classes (``"implementation": "runtime.Identity"``;
``mlserver start`` puts this directory on ``sys.path``). The models mirror those of
``tests/models`` (Triton):

* ``identity_<type>`` (:class:`Identity`) for every datatype MLServer knows (no BF16):
  OUTPUT0 = INPUT0 exactly as received (data, shape, datatype), any shape.
* ``simple``: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, INT32 [-1, 16].
* ``params_echo``: PARAMS (BYTES [1]) = the request's parameters as the model received them,
  as JSON (without the ``headers`` MLServer adds itself); the same parameters come back as
  response parameters.
* ``repeat_decoupled`` (streaming, ``ModelStreamInfer`` only): for each request of the stream,
  REPEAT responses with OUT = IN and IDX = [i], like Triton's decoupled model of that name.

``settings.json`` sets ``parallel_workers`` to 0: inference runs in the server process (it
starts faster, and the streaming model runs where the gRPC stream is). MLServer checks neither
datatypes nor shapes against the metadata and leaves requested outputs
to the runtime, so the models do both and raise :class:`InferenceError` (HTTP 400 / gRPC
INVALID_ARGUMENT) with their own message.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from mlserver import MLModel
from mlserver.errors import InferenceError
from mlserver.types import (
    InferenceRequest,
    InferenceResponse,
    Parameters,
    RequestInput,
    ResponseOutput,
)


def _datatype(tensor: Any) -> str:
    # An enum member after validation, a plain string when MLServer built the object unvalidated
    # (its gRPC converter does).
    return str(getattr(tensor.datatype, "value", tensor.datatype))


def _input(payload: InferenceRequest, model: str, name: str, datatype: str) -> RequestInput:
    for tensor in payload.inputs:
        if tensor.name == name:
            if _datatype(tensor) != datatype:
                raise InferenceError(
                    f"{model}: input {name!r} must be {datatype}, got {_datatype(tensor)}"
                )
            return tensor
    raise InferenceError(f"{model}: missing input {name!r}")


def _values(tensor: RequestInput) -> list[Any]:
    data = getattr(tensor.data, "root", tensor.data)
    return list(data)


def _response(
    model: MLModel, payload: InferenceRequest, outputs: list[ResponseOutput], **kwargs: Any
) -> InferenceResponse:
    if payload.outputs:  # MLServer leaves requested outputs to the runtime
        names = {o.name for o in payload.outputs}
        unknown = names - {o.name for o in outputs}
        if unknown:
            raise InferenceError(f"{model.name}: unknown output(s) {sorted(unknown)}")
        outputs = [o for o in outputs if o.name in names]
    return InferenceResponse(model_name=model.name, id=payload.id, outputs=outputs, **kwargs)


class Identity(MLModel):
    """OUTPUT0 = INPUT0; the datatype is the one of the model's metadata (model-settings)."""

    async def load(self) -> bool:
        self._datatype = _datatype(self.settings.inputs[0])
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        tensor = _input(payload, self.name, "INPUT0", self._datatype)
        output = ResponseOutput(
            name="OUTPUT0", shape=tensor.shape, datatype=self._datatype, data=_values(tensor)
        )
        return _response(self, payload, [output])


class Simple(MLModel):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        tensors = [_input(payload, self.name, n, "INT32") for n in ("INPUT0", "INPUT1")]
        for tensor in tensors:
            if len(tensor.shape) != 2 or tensor.shape[1] != 16:
                raise InferenceError(
                    f"simple: input {tensor.name!r} must have shape [-1, 16], "
                    f"got {list(tensor.shape)}"
                )
        a, b = (_values(t) for t in tensors)
        if tensors[0].shape != tensors[1].shape or len(a) != len(b):
            raise InferenceError("simple: INPUT0 and INPUT1 must have the same shape")
        shape = list(tensors[0].shape)
        outputs = [
            ResponseOutput(
                name="OUTPUT0",
                shape=shape,
                datatype="INT32",
                data=[x + y for x, y in zip(a, b, strict=True)],
            ),
            ResponseOutput(
                name="OUTPUT1",
                shape=shape,
                datatype="INT32",
                data=[x - y for x, y in zip(a, b, strict=True)],
            ),
        ]
        return _response(self, payload, outputs)


class ParamsEcho(MLModel):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        received: dict[str, Any] = {}
        if payload.parameters is not None:
            received = payload.parameters.model_dump(exclude_unset=True, exclude={"headers"})
        text = json.dumps(received, sort_keys=True)
        # Bytes: a str fails the gRPC answer when it carries the tensors as typed contents (a
        # request without raw contents), "expected bytes, str found".
        data = [text.encode()]
        output = ResponseOutput(name="PARAMS", shape=[1], datatype="BYTES", data=data)
        return _response(self, payload, [output], parameters=Parameters(**received))


class RepeatDecoupled(MLModel):
    """A streaming model: answers each request of a ``ModelStreamInfer`` stream REPEAT times."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        raise InferenceError("repeat_decoupled answers streams only (ModelStreamInfer)")

    async def predict_stream(
        self, payloads: AsyncIterator[InferenceRequest]
    ) -> AsyncIterator[InferenceResponse]:
        async for payload in payloads:
            data = _values(_input(payload, self.name, "IN", "INT32"))
            repeat = _values(_input(payload, self.name, "REPEAT", "INT32"))[0]
            for index in range(repeat):
                yield InferenceResponse(
                    model_name=self.name,
                    id=payload.id,
                    outputs=[
                        ResponseOutput(name="OUT", shape=[len(data)], datatype="INT32", data=data),
                        ResponseOutput(name="IDX", shape=[1], datatype="INT32", data=[index]),
                    ],
                )
