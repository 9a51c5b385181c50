"""Triton's protocol extensions: result shapes, and helpers shared by both protocols.

The extension methods of :class:`~kserve_v2.Client` and :class:`~kserve_v2.AsyncClient` return
plain structures shaped like Triton's REST JSON, on HTTP and gRPC alike (gRPC answers are
converted: field names as in the REST JSON, int64 values as ints), so code does not change with
the protocol:

======================================  ==================================================
method                                  result
======================================  ==================================================
``model_config(m)``                     ``dict``: the model configuration
                                        (``{"name": ..., "backend": ..., "input": [...],
                                        "max_batch_size": 8, ...}``)
``model_statistics([m[, v]])``          ``{"model_stats": [{"name", "version",
                                        "inference_count", "execution_count",
                                        "inference_stats": {"success": {"count", "ns"},
                                        ...}, "batch_stats": [...], ...}]}``
``repository_index()``                  ``list[RepositoryModel]`` (name, version, state,
                                        reason)
``system_shared_memory_status()``       ``[{"name", "key", "offset", "byte_size"}, ...]``
``cuda_shared_memory_status()``         ``[{"name", "device_id", "byte_size"}, ...]``
``trace_settings([m])``                 ``{"trace_level": ["OFF"], "trace_rate": "1000",
                                        "trace_count": "-1", "log_frequency": "0",
                                        "trace_file": "", "trace_mode": "triton"}``
                                        (numbers as strings, as Triton sends them)
``log_settings()``                      ``{"log_file": "", "log_info": True,
                                        "log_warning": True, "log_error": True,
                                        "log_verbose_level": 0, "log_format": "default"}``
``generate(m, payload)``                ``{"model_name", "model_version", "text_output",
                                        ...}`` (HTTP only)
``generate_stream(m, payload)``         an iterator of such dicts (HTTP only)
``metrics()``                           ``dict[str, MetricFamily]``
                                        (see :mod:`kserve_v2.metrics`)
======================================  ==================================================

Helpers here:

* :func:`parse_classification`: read the ``"value:index[:label]"`` strings of the
  classification extension (``RequestedOutput(name, class_count=N)``);
* :func:`read_shared_memory_output`: read an output the server wrote to a region, by name;
* :func:`normalize_load_request`, :func:`trace_settings_update`, :func:`log_settings_update`:
  argument checks and normalisation shared by the HTTP and gRPC backends;
* :class:`GenerateStream` / :class:`AsyncGenerateStream`: what ``generate_stream`` returns.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from kserve_v2.errors import InvalidInputError, ProtocolError

if TYPE_CHECKING:
    from kserve_v2.client.base import Backend, Call
    from kserve_v2.messages import InferResult
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

__all__ = [
    "AsyncGenerateStream",
    "Classification",
    "GenerateStream",
    "LogSettingValue",
    "TraceSettingValue",
    "log_settings_update",
    "normalize_load_request",
    "parse_classification",
    "read_shared_memory_output",
    "region_call",
    "trace_settings_update",
]

#: A trace setting as sent: Triton wants strings (or a list of them for ``trace_level``);
#: ``None`` clears a model's setting so the global one applies again.
TraceSettingValue = str | list[str] | None
#: A log setting: ``bool`` (log_info, ...), ``int`` (log_verbose_level) or ``str``.
LogSettingValue = bool | int | str

# Trace settings whose value is a list of strings (the others are single strings).
_LIST_TRACE_SETTINGS = frozenset({"trace_level"})


# ---------------------------------------------------------------------------------------------
# classification


@dataclass(frozen=True, slots=True)
class Classification:
    """One entry of a classification result: the output value (``score``), the class index,
    and its label when the model has a label file."""

    score: float
    index: int
    label: str | None = None


def _classification(raw: object) -> Classification:
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(
                f"classification entry is not UTF-8: {bytes(raw)[:80]!r}", value=raw
            ) from None
    elif isinstance(raw, str):
        text = raw
    else:
        raise ProtocolError(
            f"classification entries must be strings, got {type(raw).__name__}", value=raw
        )
    # The label is everything after the second colon: a label may contain colons itself.
    parts = text.split(":", 2)
    if len(parts) < 2:
        raise ProtocolError(
            f"classification entry {text[:80]!r} is not 'value:index[:label]'", value=text
        )
    value, index = parts[0], parts[1]
    try:
        score = float(value)
    except ValueError:
        raise ProtocolError(f"classification value {value[:40]!r} is not a number") from None
    if not (index.isascii() and index.isdigit()):
        raise ProtocolError(f"classification index {index[:40]!r} is not an integer")
    return Classification(score, int(index), parts[2] if len(parts) == 3 else None)


def parse_classification(values: Any) -> list[list[Classification]]:
    """Parse the output of a classification request into rows of :class:`Classification`.

    ``values`` is the BYTES output (``result.as_numpy(name)``) or any sequence of ``str`` /
    ``bytes``. The last dimension holds the top-N entries of one row, best first; the other
    dimensions (e.g. the batch) are flattened into rows, so a 1-D output gives one row.
    Entries that are not ``"value:index[:label]"`` raise
    :class:`~kserve_v2.errors.ProtocolError`.

    Example::

        >>> parse_classification(["0.9:2:bird", "0.05:0:cat", "0.01:11"])
        [[Classification(score=0.9, index=2, label='bird'), Classification(score=0.05, \
index=0, label='cat'), Classification(score=0.01, index=11, label=None)]]

    With a client::

        result = client.infer("classify", {"INPUT0": scores},
                              outputs=[RequestedOutput("OUTPUT0", class_count=3)])
        top = parse_classification(result.as_numpy("OUTPUT0"))[0][0]
        print(top.label, top.score)
    """
    if isinstance(values, str | bytes):
        values = [values]
    try:
        array = np.asarray(values, dtype=object)
    except ValueError as exc:  # ragged nesting
        raise InvalidInputError(f"cannot read classification values: {exc}") from None
    if array.ndim == 0:
        array = array.reshape(1)
    width = array.shape[-1]
    if width == 0:
        return [[] for _ in range(math.prod(array.shape[:-1]))]
    return [[_classification(item) for item in row] for row in array.reshape(-1, width)]


# ---------------------------------------------------------------------------------------------
# shared memory


class _ReadableRegion(Protocol):
    @property
    def name(self) -> str: ...

    def ndarray(self, dtype: Any, shape: Any, offset: int = 0) -> npt.NDArray[Any]: ...

    def read_bytes_array(
        self, shape: Any, offset: int = 0, byte_size: int | None = None
    ) -> npt.NDArray[Any]: ...


def read_shared_memory_output(
    result: InferResult, name: str, region: _ReadableRegion
) -> npt.NDArray[Any]:
    """The data of output ``name``, which the server wrote into ``region``.

    Uses the output's datatype and shape from the result and the placement the request
    gave it. For a system region the array is a zero-copy view of the mapping (copy it
    before the region is reused); for a CUDA region it is a host copy.

    Example::

        out = RequestedOutput("OUTPUT0", shared_memory=region.placement(64, offset=128))
        result = client.infer("simple", inputs, outputs=[out])
        y = read_shared_memory_output(result, "OUTPUT0", region)
    """
    tensor = result.output(name)
    params = tensor.parameters
    placed_in = params.get("shared_memory_region")
    if tensor.data is not None or placed_in is None:
        raise InvalidInputError(f"output {name!r} was not written to shared memory", value=name)
    if placed_in != region.name:
        raise InvalidInputError(
            f"output {name!r} was written to region {placed_in!r}, not {region.name!r}",
            value=region.name,
        )
    offset = params.get("shared_memory_offset", 0)
    byte_size = params.get("shared_memory_byte_size")
    if type(offset) is not int or (byte_size is not None and type(byte_size) is not int):
        raise ProtocolError(f"output {name!r}: bad shared-memory parameters {dict(params)!r}")
    if tensor.datatype == "BYTES":
        # The placement's size is what the request reserved, not what the tensor filled.
        return region.read_bytes_array(tensor.shape, offset)
    return region.ndarray(tensor.datatype, tensor.shape, offset)


def region_call(
    backend: Backend,
    region: SystemSharedMemoryRegion | CudaSharedMemoryRegion,
    *,
    register: bool,
    **kw: Any,
) -> Call[None]:
    """The register (or unregister) call for a region object, system or CUDA."""
    # Imported here: the facades import this module, and most programs never touch shm.
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

    if isinstance(region, SystemSharedMemoryRegion):
        if not register:
            return backend.unregister_system_shared_memory(region.name, **kw)
        return backend.register_system_shared_memory(
            region.name, region.key, region.byte_size, **kw
        )
    if isinstance(region, CudaSharedMemoryRegion):
        if not register:
            return backend.unregister_cuda_shared_memory(region.name, **kw)
        return backend.register_cuda_shared_memory(
            region.name, region.raw_handle, region.device_id, region.byte_size, **kw
        )
    raise InvalidInputError(
        "region must be a SystemSharedMemoryRegion or CudaSharedMemoryRegion, "
        f"got {type(region).__name__}",
        value=region,
    )


# ---------------------------------------------------------------------------------------------
# model repository, trace and log settings


def normalize_load_request(
    config: str | Mapping[str, Any] | None, files: Mapping[str, Any] | None
) -> tuple[str | None, dict[str, bytes]]:
    """Check ``load_model``'s ``config`` and ``files``; return the config as a JSON string and
    the files keyed ``"file:<version>/<name>"``.

    ``config`` is the model configuration as JSON text or as a mapping (dumped to JSON).
    ``files`` maps paths inside the model directory (``"1/model.py"``, with or without the
    ``"file:"`` prefix of the wire form) to their contents; Triton then loads the model from
    these files only, so a configuration must come with them.

    Example::

        >>> normalize_load_request({"backend": "python"}, {"1/model.py": b"..."})
        ('{"backend":"python"}', {'file:1/model.py': b'...'})
    """
    config_text: str | None
    if config is None:
        config_text = None
    elif isinstance(config, str):
        config_text = config
    elif isinstance(config, Mapping):
        try:
            config_text = json.dumps(config, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"config cannot be encoded as JSON: {exc}") from None
    else:
        raise InvalidInputError(
            f"config must be JSON text or a mapping, got {type(config).__name__}", value=config
        )
    out: dict[str, bytes] = {}
    for key, content in (files or {}).items():
        if not isinstance(key, str):
            raise InvalidInputError(f"file names must be str, got {key!r}", value=key)
        path = key.removeprefix("file:")
        segments = path.split("/")
        if not path or path.startswith("/") or any(s in ("", ".", "..") for s in segments):
            raise InvalidInputError(
                f"file {key!r}: give a relative path inside the model directory, such as "
                "'1/model.py'",
                value=key,
            )
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidInputError(
                f"file {key!r}: contents must be bytes, got {type(content).__name__}",
                value=key,
            )
        out[f"file:{path}"] = bytes(content)
    if out and config_text is None:
        raise InvalidInputError(
            "files need a config: Triton loads a model given as files from those files "
            "alone, and the configuration must be one of them"
        )
    return config_text, out


def trace_settings_update(settings: Mapping[str, Any]) -> dict[str, TraceSettingValue]:
    """Normalise trace settings to what Triton accepts: strings, lists of strings, or None.

    Integers become strings (``trace_rate=100`` -> ``"100"``); ``trace_level`` may be one
    string or a sequence; ``None`` clears a model's setting (the global one applies again).

    Example::

        >>> trace_settings_update({"trace_rate": 100, "trace_level": "TIMESTAMPS"})
        {'trace_rate': '100', 'trace_level': ['TIMESTAMPS']}
    """
    if not isinstance(settings, Mapping):
        raise InvalidInputError("trace settings must be a mapping", value=settings)
    out: dict[str, TraceSettingValue] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"trace setting names must be strings, got {key!r}")
        if value is None:
            out[key] = None
        elif isinstance(value, bool):
            raise InvalidInputError(f"trace setting {key!r}: {value!r} is not a valid value")
        elif isinstance(value, int):
            out[key] = str(value)
        elif isinstance(value, str):
            out[key] = [value] if key in _LIST_TRACE_SETTINGS else value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
        else:
            raise InvalidInputError(
                f"trace setting {key!r}: expected a string, an integer, a list of strings or "
                f"None, got {value!r}",
                value=value,
            )
    return out


def log_settings_update(settings: Mapping[str, Any]) -> dict[str, LogSettingValue]:
    """Check log settings: values are ``bool``, ``int`` or ``str``.

    Example::

        >>> log_settings_update({"log_verbose_level": 1, "log_info": False})
        {'log_verbose_level': 1, 'log_info': False}
    """
    if not isinstance(settings, Mapping):
        raise InvalidInputError("log settings must be a mapping", value=settings)
    out: dict[str, LogSettingValue] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"log setting names must be strings, got {key!r}")
        if not isinstance(value, bool | int | str):
            raise InvalidInputError(
                f"log setting {key!r}: expected a bool, int or str, got {value!r}", value=value
            )
        out[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# generate_stream results


class GenerateStream(Iterator[dict[str, Any]]):
    """The responses of ``Client.generate_stream``, one dict per server-sent event.

    The request is sent when iteration starts. An error the server reports mid-stream raises
    :class:`~kserve_v2.errors.ServerError`. Stopping early is fine: leaving a ``with`` block,
    calling :meth:`close`, or dropping the iterator closes the connection (it is not reused,
    since the rest of the stream was not read).

    Example::

        with client.generate_stream("llm", {"text_input": "Hi", "max_tokens": 8}) as stream:
            for response in stream:
                print(response["text_output"], end="")
    """

    __slots__ = ("_events",)

    def __init__(self, events: Generator[dict[str, Any], None, None]) -> None:
        self._events = events

    def __iter__(self) -> GenerateStream:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._events)

    def close(self) -> None:
        """Stop reading and close the connection (no-op when the stream has ended)."""
        self._events.close()

    def __enter__(self) -> GenerateStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncGenerateStream(AsyncIterator[dict[str, Any]]):
    """The responses of ``AsyncClient.generate_stream``: the async twin of
    :class:`GenerateStream`.

    Example::

        async with client.generate_stream("llm", {"text_input": "Hi"}) as stream:
            async for response in stream:
                print(response["text_output"], end="")
    """

    __slots__ = ("_events",)

    def __init__(self, events: AsyncGenerator[dict[str, Any], None]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncGenerateStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the connection (no-op when the stream has ended)."""
        await self._events.aclose()

    async def __aenter__(self) -> AsyncGenerateStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
