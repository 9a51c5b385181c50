"""The conformance suite's models on MLServer (``mlserver`` 1.7): the custom runtimes.

Run by MLServer in its own environment (``.venv-mlserver``), started by
``scripts/conformance_peers.sh`` through :class:`kserve_v2.testing.MLServerServer` (``mlserver
start`` on this directory, which puts it on ``sys.path``); nothing of the suite imports it. Each
``*/model-settings.json`` names a class here and declares the model's signature, as in
``conformance/README.md``:

* ``identity_<type>`` for each datatype MLServer has (no BF16), ``simple``, ``failing``,
  ``params_echo``, ``classify``, ``text_echo``;
* ``versioned`` in two versions (two model directories, one name), OUTPUT0 = INPUT0 + version;
* ``repeat_decoupled`` and ``text_generate`` as streaming models (:meth:`MLModel.predict_stream`,
  MLServer's ``ModelStreamInfer`` and ``generate_stream``);
* not the ``sequence_accumulate`` models (MLServer has no sequence batcher): their cases skip.

What is the server's and what is the model's follows MLServer's design. MLServer parses the
protocol; the model decodes tensors, with MLServer's own codec (:class:`NumpyCodec`; BYTES
elements are taken as they come, as the codec cannot hold arbitrary byte strings) and any error
of that codec is left to MLServer to report. MLServer checks neither datatypes nor shapes
against the metadata and leaves requested outputs to the model; Triton makes those checks from a
model's configuration, so these models make them (input and output names, datatype, rank and
fixed dimensions) and raise MLServer's :class:`InferenceError` (HTTP 400).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError, MLServerError
from mlserver.types import InferenceRequest, InferenceResponse, RequestInput, ResponseOutput

FAILURE = "kserve-v2 test failure: deliberate error"


def _datatype(tensor: Any) -> str:
    # An enum member after validation, a plain string when MLServer built the object unvalidated
    # (its gRPC converter does).
    return str(getattr(tensor.datatype, "value", tensor.datatype))


def _elements(tensor: RequestInput) -> list[Any]:
    data = getattr(tensor.data, "root", tensor.data)
    return list(data)


class Conformance(MLModel):
    """A model whose signature (its model-settings ``inputs`` and ``outputs``) is checked on
    every request, as Triton checks a model's configuration."""

    optional: ClassVar[frozenset[str]] = frozenset()

    def arrays(self, payload: InferenceRequest) -> dict[str, Any]:
        """The inputs, checked against the signature: numpy arrays decoded by MLServer's
        NumpyCodec, or for BYTES the list of elements as received."""
        declared = {t.name: (_datatype(t), list(t.shape)) for t in self.settings.inputs or []}
        arrays: dict[str, Any] = {}
        for tensor in payload.inputs:
            if tensor.name not in declared:
                raise InferenceError(f"{self.name}: unexpected input {tensor.name!r}")
            datatype, shape = declared[tensor.name]
            if _datatype(tensor) != datatype:
                raise InferenceError(
                    f"{self.name}: input {tensor.name!r} must be {datatype}, got "
                    f"{_datatype(tensor)}"
                )
            given = list(tensor.shape)
            if len(given) != len(shape) or any(
                d not in (-1, g) for d, g in zip(shape, given, strict=True)
            ):
                raise InferenceError(
                    f"{self.name}: input {tensor.name!r} must have shape {shape}, got {given}"
                )
            if datatype == "BYTES":
                arrays[tensor.name] = _elements(tensor)
            else:
                arrays[tensor.name] = NumpyCodec.decode_input(tensor)
        missing = [name for name in declared if name not in arrays and name not in self.optional]
        if missing:
            raise InferenceError(f"{self.name}: missing input(s) {missing}")
        return arrays

    def output(self, name: str, value: Any, shape: list[int] | None = None) -> ResponseOutput:
        """An output of the declared datatype: a numpy array with its own shape (not
        NumpyCodec.encode_output, which adds a dimension to 1-D arrays), or BYTES elements."""
        datatype = next(_datatype(t) for t in self.settings.outputs or [] if t.name == name)
        if isinstance(value, np.ndarray):
            return ResponseOutput(
                name=name,
                shape=list(value.shape),
                datatype=datatype,
                data=value.reshape(-1).tolist(),
            )
        return ResponseOutput(name=name, shape=shape or [len(value)], datatype=datatype, data=value)

    def respond(
        self, payload: InferenceRequest, outputs: list[ResponseOutput], **kwargs: Any
    ) -> InferenceResponse:
        """The response with the requested outputs (all by default)."""
        if payload.outputs:  # MLServer leaves requested outputs to the model
            names = [o.name for o in payload.outputs]
            unknown = [n for n in names if n not in {o.name for o in outputs}]
            if unknown:
                raise InferenceError(f"{self.name}: unknown output(s) {unknown}")
            outputs = [o for o in outputs if o.name in names]
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            outputs=outputs,
            **kwargs,
        )


class Identity(Conformance):
    """OUTPUT0 = INPUT0, of the datatype its model-settings declare."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        value = self.arrays(payload)["INPUT0"]
        shape = next(list(t.shape) for t in payload.inputs if t.name == "INPUT0")
        return self.respond(payload, [self.output("OUTPUT0", value, shape)])


class Simple(Conformance):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = self.arrays(payload)
        a, b = arrays["INPUT0"], arrays["INPUT1"]
        if a.shape != b.shape:
            raise InferenceError(f"simple: shapes differ: {list(a.shape)} and {list(b.shape)}")
        return self.respond(
            payload,
            [
                self.output("OUTPUT0", (a + b).astype(np.int32)),
                self.output("OUTPUT1", (a - b).astype(np.int32)),
            ],
        )


class Versioned(Conformance):
    """OUTPUT0 = INPUT0 + the model's version (from its model-settings)."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        value = self.arrays(payload)["INPUT0"] + int(self.version or 0)
        return self.respond(payload, [self.output("OUTPUT0", value.astype(np.int32))])


class Failing(Conformance):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        self.arrays(payload)
        # MLServer's own error type, with the status of a server-side failure.
        raise MLServerError(FAILURE, status_code=500)


class ParamsEcho(Conformance):
    optional = frozenset({"INPUT0"})

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        self.arrays(payload)
        received: dict[str, Any] = {}
        if payload.parameters is not None:
            # Without the "headers" MLServer adds itself.
            received = payload.parameters.model_dump(exclude_unset=True, exclude={"headers"})
        text = json.dumps(received, sort_keys=True).encode()
        return self.respond(payload, [self.output("PARAMS", [text])])


def _text(arrays: dict[str, Any]) -> bytes:
    value = arrays["text_input"][0]
    return value.encode() if isinstance(value, str) else bytes(value)


class TextEcho(Conformance):
    optional = frozenset({"max_tokens"})

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        arrays = self.arrays(payload)
        text = _text(arrays)
        if "max_tokens" in arrays:
            text = b" ".join(text.split()[: int(arrays["max_tokens"].reshape(-1)[0])])
        return self.respond(payload, [self.output("text_output", [text])])


class TextGenerate(Conformance):
    """Streaming: one response per word of text_input, with its leading whitespace."""

    optional = frozenset({"max_tokens"})

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        raise InferenceError("text_generate answers streams only")

    async def predict_stream(
        self, payloads: AsyncIterator[InferenceRequest]
    ) -> AsyncIterator[InferenceResponse]:
        async for payload in payloads:
            arrays = self.arrays(payload)
            words = _text(arrays).decode("utf-8", "replace").split(" ")
            if "max_tokens" in arrays:
                words = words[: int(arrays["max_tokens"].reshape(-1)[0])]
            for index, word in enumerate(words):
                piece = (word if index == 0 else " " + word).encode()
                yield self.respond(payload, [self.output("text_output", [piece])])


class RepeatDecoupled(Conformance):
    """Streaming: for each request of a stream, REPEAT responses with OUT = IN and IDX = i,
    each after DELAY_MS; response ERROR_AT is an error (which ends MLServer's stream)."""

    optional = frozenset({"DELAY_MS", "ERROR_AT"})

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        raise InferenceError("repeat_decoupled answers streams only (ModelStreamInfer)")

    async def predict_stream(
        self, payloads: AsyncIterator[InferenceRequest]
    ) -> AsyncIterator[InferenceResponse]:
        async for payload in payloads:
            arrays = self.arrays(payload)
            delay = float(arrays["DELAY_MS"].reshape(-1)[0]) if "DELAY_MS" in arrays else 0.0
            error_at = int(arrays["ERROR_AT"].reshape(-1)[0]) if "ERROR_AT" in arrays else -1
            for index in range(int(arrays["REPEAT"].reshape(-1)[0])):
                if delay:
                    await asyncio.sleep(delay / 1000)
                if index == error_at:
                    raise MLServerError(FAILURE, status_code=500)
                yield self.respond(
                    payload,
                    [
                        self.output("OUT", arrays["IN"]),
                        self.output("IDX", np.array([index], np.int32)),
                    ],
                )
