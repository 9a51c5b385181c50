"""What the HTTP and gRPC compat modules share: tensors, plugins, errors, infer arguments.

The compat modules are thin: each tritonclient call becomes one call of the native client
(:class:`kserve_v2.Client` / :class:`kserve_v2.AsyncClient`), its arguments translated here
and its result shaped by the protocol's module.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kserve_v2.compat.utils import InferenceServerException, np_to_triton_dtype
from kserve_v2.errors import (
    DeadlineExceededError,
    KServeError,
    ServerError,
    TransportError,
)
from kserve_v2.messages import InferResult as NativeResult
from kserve_v2.tensors import InferInput as NativeInput
from kserve_v2.tensors import RequestedOutput as NativeOutput
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = [
    "InferInputBase",
    "InferRequestedOutputBase",
    "InferResultBase",
    "InferenceServerClientPlugin",
    "PluginHost",
    "Request",
    "callback_failed",
    "INFER_ARGUMENTS",
    "infer_arguments",
    "infer_arguments_of",
    "query_arguments",
    "raw_cuda_handle",
    "translate",
    "translated",
]

_log = logging.getLogger("kserve_v2.compat")


# -- errors -------------------------------------------------------------------------------


def translate(exc: KServeError, protocol: str) -> InferenceServerException:
    """The :class:`InferenceServerException` tritonclient would raise for a native error.

    Over gRPC ``status()`` is ``"StatusCode.<NAME>"``; a client-side deadline reads as
    grpcio's ``"Deadline Exceeded"``. Over HTTP the server's errors carry the HTTP status.
    """
    if isinstance(exc, InferenceServerException):
        return exc
    message = getattr(exc, "message", None)
    if not isinstance(message, str):
        message = str(exc)
    status: str | None = None
    if protocol == "grpc":
        if isinstance(exc, ServerError) and exc.grpc_code is not None:
            status = f"StatusCode.{exc.grpc_code}"
        elif isinstance(exc, DeadlineExceededError):
            status, message = "StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded"
        elif isinstance(exc, TransportError):
            status = "StatusCode.UNAVAILABLE"
    elif isinstance(exc, ServerError) and exc.http_status is not None:
        status = str(exc.http_status)
    # grpcio's debug string has no equivalent: the native error's own text stands in for it.
    details = str(exc) if protocol == "grpc" else None
    error = InferenceServerException(msg=message, status=status, debug_details=details)
    error.__cause__ = exc
    return error


@contextlib.contextmanager
def translated(protocol: str) -> Iterator[None]:
    """Native errors inside the block leave it as :class:`InferenceServerException`."""
    try:
        yield
    except KServeError as exc:
        raise translate(exc, protocol) from exc


def callback_failed(what: str) -> None:
    """Log an exception raised by a user's callback (it must not kill the worker)."""
    _log.exception("kserve_v2.compat: %s raised", what)


# -- plugins ------------------------------------------------------------------------------


class Request:
    """What a plugin sees of a request: its ``headers`` (a dict it may change)."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class InferenceServerClientPlugin(abc.ABC):
    """A plugin called with every :class:`Request` before it is sent (e.g. to add
    authentication headers). Register it with ``client.register_plugin(plugin)``.

    Example::

        class Token(InferenceServerClientPlugin):
            def __call__(self, request):
                request.headers["authorization"] = "Bearer ..."
    """

    @abc.abstractmethod
    def __call__(self, request: Request) -> None:
        """Change ``request.headers`` in place."""


class PluginHost:
    """``register_plugin`` / ``plugin`` / ``unregister_plugin`` of the clients."""

    _plugin: InferenceServerClientPlugin | None = None

    def __init__(self) -> None:
        self._plugin = None

    def register_plugin(self, plugin: InferenceServerClientPlugin) -> None:
        """Call ``plugin`` with every request from now on (replacing a previous one)."""
        self._plugin = plugin

    def plugin(self) -> InferenceServerClientPlugin | None:
        """The registered plugin, or ``None``."""
        return self._plugin

    def unregister_plugin(self) -> None:
        """Stop calling the registered plugin."""
        self._plugin = None

    def _headers(self, headers: Mapping[str, str] | None) -> dict[str, str] | None:
        if self._plugin is None:
            return dict(headers) if headers else None
        request = Request(dict(headers or {}))
        self._plugin(request)
        return request.headers or None


# -- query parameters ----------------------------------------------------------------------


_TAKES_QUERY: dict[tuple[type[Any], str], bool] = {}


def _takes_query(method_name: str, owner: type[Any]) -> bool:
    known = _TAKES_QUERY.get((owner, method_name))
    if known is None:
        signature = inspect.signature(getattr(owner, method_name))
        known = _TAKES_QUERY[owner, method_name] = "query" in signature.parameters
    return known


def query_arguments(method: Callable[..., Any], query_params: Any) -> dict[str, Any]:
    """``{"query": query_params}`` for a native method that takes query parameters.

    Native methods that do not take them yet raise here rather than dropping them.
    """
    if not query_params:
        return {}
    owner: type[Any] = type(getattr(method, "__self__", None))
    if not _takes_query(method.__name__, owner):
        raise InferenceServerException(
            msg=f"query_params are not supported by {method.__name__} in kserve_v2.compat yet"
        )
    return {"query": dict(query_params)}


# -- tensors ------------------------------------------------------------------------------


def _accepts(datatype: str, array: npt.NDArray[Any]) -> bool:
    """Whether ``array``'s dtype may be sent as ``datatype`` (as tritonclient allows)."""
    if datatype == "BYTES":
        return array.dtype.kind in "OSU"
    if datatype == "BF16":
        return array.dtype.kind == "f" or array.dtype.name == "bfloat16"
    return np_to_triton_dtype(array.dtype) == datatype


class InferInputBase:
    """An input of a request: name, shape, datatype, and numpy data or a shared-memory
    placement, either replaceable at any time (so a loop reuses one object).

    The native :class:`kserve_v2.InferInput` it becomes is built once per content and
    reused until the data, shape or placement changes.
    """

    def __init__(self, name: str, shape: Sequence[int], datatype: str) -> None:
        self._name = name
        self._shape = [int(d) for d in shape]
        self._datatype = datatype
        self._data: npt.NDArray[Any] | None = None
        self._binary: bool | None = None
        self._placement: SharedMemoryPlacement | None = None
        self._native: NativeInput | None = None

    def name(self) -> str:
        """The input's name."""
        return self._name

    def datatype(self) -> str:
        """The input's datatype."""
        return self._datatype

    def shape(self) -> list[int]:
        """The input's shape."""
        return self._shape

    def set_shape(self, shape: Sequence[int]) -> InferInputBase:
        """Set the shape (e.g. before ``set_shared_memory``)."""
        self._shape = [int(d) for d in shape]
        self._native = None
        return self

    def _set_data(self, input_tensor: Any, binary: bool | None) -> InferInputBase:
        if not isinstance(input_tensor, np.ndarray):
            raise InferenceServerException(msg="input_tensor must be a numpy array")
        if not _accepts(self._datatype, input_tensor):
            raise InferenceServerException(
                msg=f"got unexpected datatype {np_to_triton_dtype(input_tensor.dtype)} from "
                f"numpy array, expected {self._datatype}."
            )
        if list(input_tensor.shape) != self._shape:
            raise InferenceServerException(
                msg=f"got unexpected numpy array shape [{str(input_tensor.shape)[1:-1]}], "
                f"expected {self._shape}"
            )
        self._data = input_tensor
        self._binary = binary
        self._placement = None
        self._native = None
        return self

    def set_shared_memory(
        self, region_name: str, byte_size: int, offset: int = 0
    ) -> InferInputBase:
        """Take the input's data from a registered shared-memory region (dropping any data
        set before)."""
        with translated("compat"):
            self._placement = SharedMemoryPlacement(region_name, byte_size, offset)
        self._data = None
        self._native = None
        return self

    def unset_shared_memory(self) -> InferInputBase:
        """Forget the shared-memory placement (set data again before the next request)."""
        self._placement = None
        self._native = None
        return self

    def native(self) -> NativeInput:
        """The native input for the current content (built when it changed)."""
        if self._native is None:
            if self._placement is not None:
                self._native = NativeInput(
                    self._name,
                    None,
                    datatype=self._datatype,
                    shape=self._shape,
                    shared_memory=self._placement,
                )
            elif self._data is not None:
                self._native = NativeInput(
                    self._name,
                    self._data,
                    datatype=self._datatype,
                    shape=self._shape,
                    binary=self._binary,
                )
            else:
                raise InferenceServerException(
                    msg=f"input {self._name!r} has no data: call set_data_from_numpy() "
                    "or set_shared_memory() first"
                )
        return self._native

    def __repr__(self) -> str:
        return (
            f"InferInput(name={self._name!r}, shape={self._shape!r}, datatype={self._datatype!r})"
        )


class InferRequestedOutputBase:
    """An output a request asks for, optionally with top-N classification or written to a
    registered shared-memory region."""

    def __init__(self, name: str, class_count: int = 0, binary: bool | None = None) -> None:
        self._name = name
        self._class_count = class_count
        self._binary = binary
        self._placement: SharedMemoryPlacement | None = None
        self._native: NativeOutput | None = None

    def name(self) -> str:
        """The output's name."""
        return self._name

    def set_shared_memory(
        self, region_name: str, byte_size: int, offset: int = 0
    ) -> InferRequestedOutputBase:
        """Have the server write this output into a registered shared-memory region."""
        with translated("compat"):
            self._placement = SharedMemoryPlacement(region_name, byte_size, offset)
        self._native = None
        return self

    def unset_shared_memory(self) -> InferRequestedOutputBase:
        """Receive the output in the response again."""
        self._placement = None
        self._native = None
        return self

    def native(self) -> NativeOutput:
        """The native requested output."""
        if self._native is None:
            with translated("compat"):
                self._native = NativeOutput(
                    self._name,
                    binary=None if self._placement is not None else self._binary,
                    class_count=self._class_count,
                    shared_memory=self._placement,
                )
        return self._native

    @property
    def binary(self) -> bool | None:
        """Whether the output was asked for in binary form (``None``: the default)."""
        return self._binary

    def __repr__(self) -> str:
        return f"InferRequestedOutput(name={self._name!r})"


class InferResultBase:
    """A result's native side, as both protocols' ``InferResult`` read it (each adds
    ``get_response`` / ``get_output`` in its protocol's form)."""

    _result: NativeResult

    @property
    def native(self) -> NativeResult:
        """The native :class:`kserve_v2.InferResult` behind this one."""
        return self._result

    def as_numpy(self, name: str) -> npt.NDArray[Any] | None:
        """Output ``name`` as a numpy array; ``None`` if the result has no such output or
        it was written to shared memory."""
        for tensor in self._result.outputs:
            if tensor.name == name:
                return tensor.data
        return None


# -- infer arguments -----------------------------------------------------------------------


def infer_arguments(
    inputs: Sequence[InferInputBase],
    outputs: Sequence[InferRequestedOutputBase] | None = None,
    model_version: str | int = "",
    request_id: str = "",
    sequence_id: int | str = 0,
    sequence_start: bool = False,
    sequence_end: bool = False,
    priority: int = 0,
    timeout: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The native ``infer`` / ``stream.send`` keywords for tritonclient's infer arguments.

    A zero (or empty) ``sequence_id`` and ``priority`` mean "none", as in tritonclient;
    ``timeout`` is the server-side timeout in microseconds (native ``timeout_us``).
    """
    if isinstance(inputs, InferInputBase) or not all(isinstance(i, InferInputBase) for i in inputs):
        raise InferenceServerException(msg="inputs must be a list of InferInput objects")
    native_outputs = None
    if outputs is not None:
        native_outputs = [output.native() for output in outputs]
    return {
        "inputs": [i.native() for i in inputs],
        "outputs": native_outputs,
        "version": "" if model_version is None else str(model_version),
        "request_id": request_id or "",
        "parameters": dict(parameters) if parameters else None,
        "sequence_id": sequence_id if sequence_id not in (0, "", None) else None,
        "sequence_start": bool(sequence_start),
        "sequence_end": bool(sequence_end),
        "priority": priority or None,
        "timeout_us": timeout,
    }


#: The names of tritonclient's infer arguments (those of :func:`infer_arguments`).
INFER_ARGUMENTS = (
    "inputs",
    "outputs",
    "model_version",
    "request_id",
    "sequence_id",
    "sequence_start",
    "sequence_end",
    "priority",
    "timeout",
    "parameters",
)


def infer_arguments_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`infer_arguments` for the infer arguments found in ``values`` (the ``locals()``
    of a tritonclient method, or a ``stream_infer`` request dict); the others default.

    Example::

        def infer(self, model_name, inputs, model_version="", outputs=None, ...):
            kwargs = infer_arguments_of(locals())
    """
    return infer_arguments(**{key: values[key] for key in INFER_ARGUMENTS if key in values})


def raw_cuda_handle(raw_handle: bytes | str) -> bytes:
    """The 64-byte CUDA IPC handle from tritonclient's base64 form (as
    ``cuda_shared_memory.get_raw_handle`` returns it); the raw 64 bytes pass as they are."""
    if isinstance(raw_handle, str):
        raw_handle = raw_handle.encode("ascii")
    if len(raw_handle) == 64:
        return bytes(raw_handle)
    try:
        return base64.b64decode(raw_handle, validate=True)
    except ValueError:
        raise InferenceServerException(msg="raw_handle is not a base64 CUDA IPC handle") from None
