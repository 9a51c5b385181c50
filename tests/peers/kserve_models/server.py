"""kserve-v2 test models served by KServe's Python model server (``kserve`` 0.21).

Run in the KServe environment (``.venv-kserve``), never imported by the tests themselves:
:class:`kserve_v2.testing.KServeServer` starts it as ``python server.py --http_port N
--grpc_port M``. The models mirror those of ``tests/models`` (Triton):

* ``identity_<type>`` for every datatype KServe knows (no BF16): OUTPUT0 = INPUT0, any shape.
* ``simple``: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, INT32 [-1, 16].
* ``params_echo``: PARAMS (BYTES [1]) = the request's parameters as the model received them,
  as JSON; the same parameters come back as response parameters.

KServe leaves datatype and shape checks to the model, so the models make them and raise
:class:`kserve.errors.InvalidInput` (HTTP 400 / gRPC INVALID_ARGUMENT) with their own message.
KServe's gRPC response ignores requested outputs, so the models keep only the requested ones
themselves (KServe's REST response does so too, by the same list). KServe has no
``ModelStreamInfer``: there is no streaming model here.
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
from kserve.errors import InvalidInput
from kserve.protocol.grpc import server as grpc_server

HOST = "127.0.0.1"

# Every datatype of the protocol that KServe's numpy codec maps (it has no BF16).
DATATYPES = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


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


def _input(payload: InferRequest, name: str, datatype: str) -> np.ndarray:
    tensor = payload.get_input_by_name(name)
    if tensor is None:
        raise InvalidInput(f"{payload.model_name}: missing input {name!r}")
    if tensor.datatype != datatype:
        raise InvalidInput(
            f"{payload.model_name}: input {name!r} must be {datatype}, got {tensor.datatype}"
        )
    array = tensor.as_numpy()
    if datatype == "BYTES":  # JSON strings arrive as str: the model's data is bytes
        out = np.empty(array.shape, dtype=object)
        out.reshape(-1)[:] = [v.encode() if isinstance(v, str) else bytes(v) for v in array.flat]
        return out
    return array


def _output(name: str, datatype: str, array: np.ndarray) -> InferOutput:
    # Given as raw bytes: KServe's gRPC encoder cannot take a numpy array as ``data`` (it tests
    # its truth value), and its REST encoder turns raw bytes into JSON when asked to.
    output = InferOutput(name, list(array.shape), datatype)
    output.set_data_from_numpy(array, binary_data=True)
    return output


def _response(payload: InferRequest, outputs: list[InferOutput], **kwargs: Any) -> InferResponse:
    wanted = payload.request_outputs
    if wanted:  # KServe's REST answer keeps only these, its gRPC answer does not
        names = {o.name for o in wanted}
        unknown = names - {o.name for o in outputs}
        if unknown:
            raise InvalidInput(f"{payload.model_name}: unknown output(s) {sorted(unknown)}")
        outputs = [o for o in outputs if o.name in names]
    return InferResponse(
        # KServe's response model wants an id; its own models make one up when none came.
        response_id=payload.id or str(uuid.uuid4()),
        model_name=payload.model_name,
        infer_outputs=outputs,
        use_binary_outputs=payload.use_binary_outputs,
        requested_outputs=wanted,
        **kwargs,
    )


class Identity(Model):
    def __init__(self, datatype: str) -> None:
        super().__init__(f"identity_{datatype.lower()}")
        self.datatype = datatype
        self.ready = True

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": "INPUT0", "datatype": self.datatype, "shape": [-1, -1]}]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [{"name": "OUTPUT0", "datatype": self.datatype, "shape": [-1, -1]}]

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        array = _input(payload, "INPUT0", self.datatype)
        return _response(payload, [_output("OUTPUT0", self.datatype, array)])


class Simple(Model):
    def __init__(self) -> None:
        super().__init__("simple")
        self.ready = True

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": n, "datatype": "INT32", "shape": [-1, 16]} for n in ("INPUT0", "INPUT1")]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [{"name": n, "datatype": "INT32", "shape": [-1, 16]} for n in ("OUTPUT0", "OUTPUT1")]

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        a = _input(payload, "INPUT0", "INT32")
        b = _input(payload, "INPUT1", "INT32")
        for name, array in (("INPUT0", a), ("INPUT1", b)):
            if array.ndim != 2 or array.shape[1] != 16:
                raise InvalidInput(
                    f"simple: input {name!r} must have shape [-1, 16], got {list(array.shape)}"
                )
        if a.shape != b.shape:
            raise InvalidInput(f"simple: shapes differ: {list(a.shape)} and {list(b.shape)}")
        outputs = [
            _output("OUTPUT0", "INT32", (a + b).astype(np.int32)),
            _output("OUTPUT1", "INT32", (a - b).astype(np.int32)),
        ]
        return _response(payload, outputs)


def _parameter_value(value: Any) -> Any:
    """A REST parameter as is; a gRPC ``InferParameter`` as the value of its set field (None when
    none of the fields KServe's protocol has is set: a field it does not know, say)."""
    if hasattr(value, "WhichOneof"):
        field = value.WhichOneof("parameter_choice")
        return None if field is None else getattr(value, field)
    return value


class ParamsEcho(Model):
    def __init__(self) -> None:
        super().__init__("params_echo")
        self.ready = True

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": "INPUT0", "datatype": "INT32", "shape": [-1]}]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [{"name": "PARAMS", "datatype": "BYTES", "shape": [1]}]

    async def predict(self, payload: InferRequest, headers: Any = None, **_: Any) -> InferResponse:
        received = {k: _parameter_value(v) for k, v in (payload.parameters or {}).items()}
        text = json.dumps(received, sort_keys=True).encode()
        output = _output("PARAMS", "BYTES", np.array([text], dtype=object))
        # Echoed as received: gRPC InferParameters go back as they came.
        echo = {
            k: v for k, v in (payload.parameters or {}).items() if _parameter_value(v) is not None
        }
        return _response(payload, [output], parameters=echo or None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http_port", type=int, required=True)
    parser.add_argument("--grpc_port", type=int, required=True)
    args, _ = parser.parse_known_args()
    _loopback_only()
    models: list[Model] = [Identity(datatype) for datatype in DATATYPES]
    models += [Simple(), ParamsEcho()]
    ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1).start(models)


if __name__ == "__main__":
    main()
