"""TODO ext"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from kserve_v2.errors import InvalidInputError, ProtocolError

if TYPE_CHECKING:
    from kserve_v2.messages import InferResult

__all__ = ["Classification", "parse_classification", "read_shared_memory_output"]


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
