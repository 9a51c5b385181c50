"""The conformance suite's models on KServe's Python model server (``kserve`` 0.21).

Run in KServe's environment (``.venv-kserve``) by ``scripts/conformance_peers.sh``, through
:class:`kserve_v2.testing.KServeServer` (``python server.py --http_port N --grpc_port M``);
nothing of the suite imports it. The models are the equivalents of ``conformance/models``
(see ``conformance/README.md``) that KServe can serve:

* ``identity_<type>`` for each datatype KServe has (no BF16), ``simple``, ``failing``,
  ``params_echo``, ``classify`` and ``text_echo``, with the signatures of the README;
* not ``versioned`` (KServe does not implement model versions: its versioned paths answer 501),
  nor ``repeat_decoupled``, ``text_generate`` (no streaming RPC, no decoupled models) or the
  ``sequence_accumulate`` models (no sequence batcher): the cases that need them skip.

What is the server's and what is the model's follows KServe's design. KServe parses the
protocol and decodes tensors (``InferInput.as_numpy``, which also checks that the data fills
the shape); it does not check a request against the model's metadata. Triton makes those checks
from a model's configuration, so these models make them (input and output names, datatype,
rank and fixed dimensions) and raise KServe's :class:`~kserve.errors.InvalidInput`; decoding
errors are left to KServe, so the suite sees how KServe answers them.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

import grpc.aio
import numpy as np
import uvicorn
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.errors import InferenceError, InvalidInput
from kserve.protocol.grpc import server as grpc_server

HOST = "127.0.0.1"
FAILURE = "kserve-v2 test failure: deliberate error"

# Every datatype of the protocol that KServe's numpy codec maps (it has no BF16).
DATATYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
)


def _loopback_only() -> None:
    """Bind both servers to 127.0.0.1: KServe hard-codes ``0.0.0.0`` (uvicorn) and ``[::]``
    (gRPC), and a test server has no business on the machine's other interfaces."""
    config_init = uvicorn.Config.__init__

    def loopback_config(self: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        kwargs["host"] = HOST
        config_init(self, *args, **kwargs)

    uvicorn.Config.__init__ = loopback_config

    class LoopbackGRPC:
        """``grpc.aio`` whose servers turn ``[::]:PORT`` into ``127.0.0.1:PORT``."""

        def __getattr__(self, name: str) -> Any:
            return getattr(grpc.aio, name)

        @staticmethod
        def server(*args: Any, **kwargs: Any) -> Any:
            server = grpc.aio.server(*args, **kwargs)
            add_port = server.add_insecure_port
            server.add_insecure_port = lambda address: add_port(address.replace("[::]", HOST))
            return server

    grpc_server.aio = LoopbackGRPC()


Tensor = tuple[str, str, list[int]]  # name, datatype, shape (-1: variable)


class Conformance(Model):
    """A model with a fixed signature, checked on every request as Triton checks a model's
    configuration."""

    inputs: tuple[Tensor, ...] = ()
    optional: frozenset[str] = frozenset()
    outputs: tuple[Tensor, ...] = ()

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ready = True

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": n, "datatype": d, "shape": s} for n, d, s in self.inputs]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [{"name": n, "datatype": d, "shape": s} for n, d, s in self.outputs]

    def arrays(self, payload: InferRequest) -> dict[str, np.ndarray]:
        """The inputs, checked against the signature and decoded by KServe."""
        declared = {name: (datatype, shape) for name, datatype, shape in self.inputs}
        arrays: dict[str, np.ndarray] = {}
        for tensor in payload.inputs:
            if tensor.name not in declared:
                raise InvalidInput(f"{self.name}: unexpected input {tensor.name!r}")
            datatype, shape = declared[tensor.name]
            if tensor.datatype != datatype:
                raise InvalidInput(
                    f"{self.name}: input {tensor.name!r} must be {datatype}, got {tensor.datatype}"
                )
            given = list(tensor.shape)
            if len(given) != len(shape) or any(
                d not in (-1, g) for d, g in zip(shape, given, strict=True)
            ):
                raise InvalidInput(
                    f"{self.name}: input {tensor.name!r} must have shape {shape}, got {given}"
                )
            array = tensor.as_numpy()
            if datatype == "BYTES":  # JSON strings arrive as str: the model's data is bytes
                out = np.empty(array.shape, dtype=object)
                out.reshape(-1)[:] = [
                    v.encode() if isinstance(v, str) else bytes(v) for v in array.flat
                ]
                array = out
            arrays[tensor.name] = array
        missing = [n for n, _, _ in self.inputs if n not in arrays and n not in self.optional]
        if missing:
            raise InvalidInput(f"{self.name}: missing input(s) {missing}")
        return arrays

    def respond(
        self, payload: InferRequest, results: dict[str, np.ndarray], **kwargs: Any
    ) -> InferResponse:
        """The response with the requested outputs (all by default)."""
        types = {name: datatype for name, datatype, _ in self.outputs}
        wanted = payload.request_outputs
        names = list(results)
        if wanted:  # KServe leaves requested outputs to the model
            names = [o.name for o in wanted]
            unknown = [n for n in names if n not in results]
            if unknown:
                raise InvalidInput(f"{self.name}: unknown output(s) {unknown}")
        outputs = []
        for name in names:
            output = InferOutput(name, list(results[name].shape), types[name])
            # KServe's own way to fill an output (binary_data=True is its default: raw bytes,
            # which its REST encoder turns into JSON unless binary data was asked for).
            output.set_data_from_numpy(results[name])
            outputs.append(output)
        return InferResponse(
            # KServe's response wants an id; its own models make one up when none came.
            response_id=payload.id or str(uuid.uuid4()),
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=payload.use_binary_outputs,
            requested_outputs=wanted,
            **kwargs,
        )


class Identity(Conformance):
    def __init__(self, datatype: str) -> None:
        self.inputs = (("INPUT0", datatype, [-1, -1]),)
        self.outputs = (("OUTPUT0", datatype, [-1, -1]),)
        super().__init__(f"identity_{datatype.lower()}")

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        return self.respond(payload, {"OUTPUT0": self.arrays(payload)["INPUT0"]})


class Simple(Conformance):
    inputs = (("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16]))
    outputs = (("OUTPUT0", "INT32", [-1, 16]), ("OUTPUT1", "INT32", [-1, 16]))

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        arrays = self.arrays(payload)
        a, b = arrays["INPUT0"], arrays["INPUT1"]
        if a.shape != b.shape:
            raise InvalidInput(f"simple: shapes differ: {list(a.shape)} and {list(b.shape)}")
        return self.respond(
            payload, {"OUTPUT0": (a + b).astype(np.int32), "OUTPUT1": (a - b).astype(np.int32)}
        )


class Failing(Conformance):
    inputs = (("INPUT0", "INT32", [-1]),)
    outputs = (("OUTPUT0", "INT32", [-1]),)

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        self.arrays(payload)
        raise InferenceError(FAILURE)  # KServe's error for a failed inference


class Classify(Conformance):
    inputs = (("INPUT0", "FP32", [-1]),)
    outputs = (("OUTPUT0", "FP32", [-1]),)

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        return self.respond(payload, {"OUTPUT0": self.arrays(payload)["INPUT0"]})


def _parameter_value(value: Any) -> Any:
    """A REST parameter as is; a gRPC ``InferParameter`` as the value of its set field (None when
    none of the fields KServe's protocol has is set)."""
    if hasattr(value, "WhichOneof"):
        field = value.WhichOneof("parameter_choice")
        return None if field is None else getattr(value, field)
    return value


class ParamsEcho(Conformance):
    inputs = (("INPUT0", "INT32", [-1]),)
    optional = frozenset({"INPUT0"})
    outputs = (("PARAMS", "BYTES", [1]),)

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        self.arrays(payload)
        received = {k: _parameter_value(v) for k, v in (payload.parameters or {}).items()}
        text = json.dumps(received, sort_keys=True).encode()
        return self.respond(payload, {"PARAMS": np.array([text], dtype=object)})


class TextEcho(Conformance):
    inputs = (("text_input", "BYTES", [1]), ("max_tokens", "INT32", [1]))
    optional = frozenset({"max_tokens"})
    outputs = (("text_output", "BYTES", [1]),)

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        arrays = self.arrays(payload)
        text = bytes(arrays["text_input"].reshape(-1)[0])
        if "max_tokens" in arrays:
            text = b" ".join(text.split()[: int(arrays["max_tokens"].reshape(-1)[0])])
        return self.respond(payload, {"text_output": np.array([text], dtype=object)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http_port", type=int, required=True)
    parser.add_argument("--grpc_port", type=int, required=True)
    args, _ = parser.parse_known_args()
    _loopback_only()
    models: list[Model] = [Identity(datatype) for datatype in DATATYPES]
    models += [
        Simple("simple"),
        Failing("failing"),
        Classify("classify"),
        ParamsEcho("params_echo"),
        TextEcho("text_echo"),
    ]
    ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1).start(models)


if __name__ == "__main__":
    main()
