"""Protocol messages shared by the REST and gRPC codecs: requests, results, metadata.

Example::

    >>> import numpy as np
    >>> from kserve_v2.messages import InferResult, OutputTensor
    >>> result = InferResult(model_name="m", outputs=(
    ...     OutputTensor(name="y", datatype="FP32", shape=(2,), data=np.ones(2, np.float32)),))
    >>> result.as_numpy("y")
    array([1., 1.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import to_str_array
from kserve_v2.errors import InvalidInputError
from kserve_v2.parameters import ParameterValue
from kserve_v2.tensors import InferInput, RequestedOutput

__all__ = [
    "InferRequest",
    "InferResult",
    "ModelMetadata",
    "OutputTensor",
    "RepositoryModel",
    "ServerMetadata",
    "TensorMetadata",
]


@dataclass(frozen=True, slots=True)
class InferRequest:
    """Everything an inference request carries, independent of the protocol used to send it.

    Two requests are equal when their fields are; the inputs compare as :class:`InferInput`
    does, by identity.
    """

    model_name: str
    inputs: tuple[InferInput, ...]
    outputs: tuple[RequestedOutput, ...] = ()
    model_version: str = ""
    id: str = ""
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)


def _same_array(a: npt.NDArray[Any] | None, b: npt.NDArray[Any] | None) -> bool:
    """Whether two tensors' data hold the same values: same shape, dtype and elements.

    Byte order and memory layout are storage, not value, so they are ignored. NaN equals no
    NaN (numpy's rule), but an array equals itself, as an element does in a Python container.
    """
    if a is b:
        return True
    if a is None or b is None:
        return False
    return (
        a.shape == b.shape
        and a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=")
        and bool(np.array_equal(a, b))
    )


# eq=False: the generated __eq__ would compare ``data`` with ``==``, which gives an array, not a
# bool (ValueError on Python 3.13, whose dataclasses compare field by field; on older ones too
# unless both sides hold the very same array).
@dataclass(frozen=True, slots=True, eq=False)
class OutputTensor:
    """One output of an inference result.

    ``data`` is ``None`` when the server wrote the output into shared memory.

    Two outputs are equal when name, datatype, shape and parameters are, and their data are
    both ``None`` or hold the same values: the same shape, the same dtype (byte order aside)
    and equal elements, as :func:`numpy.array_equal` compares them (so NaN equals no NaN).
    Comparing never raises on the data outputs hold (numbers; ``bytes`` or ``str`` elements).
    Outputs are unhashable, since their data are mutable arrays.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: npt.NDArray[Any] | None = field(default=None, repr=False)
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, OutputTensor) or other.__class__ is not self.__class__:
            return NotImplemented
        return (
            self.name == other.name
            and self.datatype == other.datatype
            and self.shape == other.shape
            and self.parameters == other.parameters
            and _same_array(self.data, other.data)
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class InferResult:
    """The result of one inference (or one response of a streamed/decoupled inference).

    Output arrays decoded from binary data are views on the received buffer where the datatype
    allows (no copy). ``BYTES`` outputs are object arrays of ``bytes``; see :meth:`as_str`.

    Two results are equal when their fields are, outputs compared as :class:`OutputTensor`
    compares them; like their outputs, results are unhashable.
    """

    model_name: str
    model_version: str = ""
    id: str = ""
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)
    outputs: tuple[OutputTensor, ...] = ()

    # Set in the class, it keeps the dataclass from adding a __hash__ of every field, which
    # would fail on the outputs and the parameters dict anyway.
    __hash__ = None  # type: ignore[assignment]

    def output(self, name: str) -> OutputTensor:
        """The output called ``name``; :class:`InvalidInputError` naming the ones there are."""
        for tensor in self.outputs:
            if tensor.name == name:
                return tensor
        names = ", ".join(repr(t.name) for t in self.outputs) or "none"
        raise InvalidInputError(f"result has no output {name!r} (outputs: {names})", value=name)

    def as_numpy(self, name: str) -> npt.NDArray[Any]:
        """The data of output ``name`` as a numpy array.

        Raises :class:`InvalidInputError` if there is no such output, or if it was written to
        shared memory (read it from the region instead).
        """
        for tensor in self.outputs:  # self.output(name), inline: once per output read
            if tensor.name == name:
                if tensor.data is not None:
                    return tensor.data
                break
        tensor = self.output(name)
        if tensor.data is None:
            raise InvalidInputError(
                f"output {name!r} was written to shared memory "
                f"(region {tensor.parameters.get('shared_memory_region')!r}); read it there",
                value=name,
            )
        return tensor.data

    def as_str(self, name: str, encoding: str = "utf-8") -> npt.NDArray[Any]:
        """A ``BYTES`` output decoded to an object array of ``str``.

        An element that is not text in ``encoding`` raises
        :class:`~kserve_v2.InvalidInputError` naming the output and the element's index
        (:meth:`as_numpy` gives the raw ``bytes``)."""
        tensor = self.output(name)
        if tensor.datatype != "BYTES":
            raise InvalidInputError(
                f"output {name!r} is {tensor.datatype}, not BYTES: use as_numpy()", value=name
            )
        return to_str_array(self.as_numpy(name), encoding, name=name)

    def as_dict(self) -> dict[str, npt.NDArray[Any]]:
        """All outputs that carry data, by name."""
        return {t.name: t.data for t in self.outputs if t.data is not None}

    @property
    def final(self) -> bool | None:
        """Triton's ``triton_final_response`` flag of a streamed response (None if absent)."""
        value = self.parameters.get("triton_final_response")
        return value if isinstance(value, bool) else None


# A frozen dataclass's __init__ sets each field through object.__setattr__, most of what a
# small result costs to build (0.9 µs for an OutputTensor). The codecs build these objects
# on every request, so they fill the slots through the slot descriptors instead: the same
# object at half the cost (the classes have no __post_init__ that this would skip).
_new_object = object.__new__
_REQUEST_SETTERS: tuple[Any, ...] = tuple(
    InferRequest.__dict__[f.name].__set__ for f in fields(InferRequest)
)
_OUTPUT_SETTERS: tuple[Any, ...] = tuple(
    OutputTensor.__dict__[f.name].__set__ for f in fields(OutputTensor)
)
_RESULT_SETTERS: tuple[Any, ...] = tuple(
    InferResult.__dict__[f.name].__set__ for f in fields(InferResult)
)


def new_infer_request(
    model_name: str,
    inputs: tuple[InferInput, ...],
    outputs: tuple[RequestedOutput, ...],
    model_version: str,
    id: str,
    parameters: Mapping[str, ParameterValue],
) -> InferRequest:
    """``InferRequest(model_name, inputs, outputs, model_version, id, parameters)``, faster."""
    request = _new_object(InferRequest)
    set_model_name, set_inputs, set_outputs, set_model_version, set_id, set_params = (
        _REQUEST_SETTERS
    )
    set_model_name(request, model_name)
    set_inputs(request, inputs)
    set_outputs(request, outputs)
    set_model_version(request, model_version)
    set_id(request, id)
    set_params(request, parameters)
    return request


def new_output_tensor(
    name: str,
    datatype: str,
    shape: tuple[int, ...],
    data: npt.NDArray[Any] | None,
    parameters: Mapping[str, ParameterValue],
) -> OutputTensor:
    """``OutputTensor(name, datatype, shape, data, parameters)``, faster."""
    tensor = _new_object(OutputTensor)
    set_name, set_datatype, set_shape, set_data, set_parameters = _OUTPUT_SETTERS
    set_name(tensor, name)
    set_datatype(tensor, datatype)
    set_shape(tensor, shape)
    set_data(tensor, data)
    set_parameters(tensor, parameters)
    return tensor


def new_infer_result(
    model_name: str,
    model_version: str,
    id: str,
    parameters: Mapping[str, ParameterValue],
    outputs: tuple[OutputTensor, ...],
) -> InferResult:
    """``InferResult(model_name, model_version, id, parameters, outputs)``, faster."""
    result = _new_object(InferResult)
    set_model_name, set_model_version, set_id, set_parameters, set_outputs = _RESULT_SETTERS
    set_model_name(result, model_name)
    set_model_version(result, model_version)
    set_id(result, id)
    set_parameters(result, parameters)
    set_outputs(result, outputs)
    return result


@dataclass(frozen=True, slots=True)
class TensorMetadata:
    """Name, datatype and shape (``-1`` for variable dimensions) of a model input or output."""

    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """What the server says about itself, including the extensions it supports."""

    name: str
    version: str
    extensions: tuple[str, ...] = ()

    def supports(self, extension: str) -> bool:
        """Whether the server advertises ``extension`` (e.g. ``"binary_tensor_data"``).

        A qualified form such as ``"model_repository(unload_dependents)"`` matches exactly;
        a bare name also matches its qualified forms' base.
        """
        return extension in self.extensions or any(
            ext.split("(", 1)[0] == extension for ext in self.extensions
        )


@dataclass(frozen=True, slots=True)
class ModelMetadata:
    """A model's name, versions, platform and tensor metadata."""

    name: str
    platform: str = ""
    versions: tuple[str, ...] = ()
    inputs: tuple[TensorMetadata, ...] = ()
    outputs: tuple[TensorMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class RepositoryModel:
    """One entry of the model repository index (repository extension).

    ``state`` is e.g. ``"READY"``, ``"UNAVAILABLE"``, ``"LOADING"`` (empty when unknown);
    ``reason`` explains an unavailable state.
    """

    name: str
    version: str = ""
    state: str = ""
    reason: str = ""
