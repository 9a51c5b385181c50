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
    """Everything an inference request carries, independent of the protocol used to send it."""

    model_name: str
    inputs: tuple[InferInput, ...]
    outputs: tuple[RequestedOutput, ...] = ()
    model_version: str = ""
    id: str = ""
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutputTensor:
    """One output of an inference result.

    ``data`` is ``None`` when the server wrote the output into shared memory.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: npt.NDArray[Any] | None = field(default=None, repr=False)
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InferResult:
    """The result of one inference (or one response of a streamed/decoupled inference).

    Output arrays decoded from binary data are views on the received buffer where the datatype
    allows (no copy). ``BYTES`` outputs are object arrays of ``bytes``; see :meth:`as_str`.
    """

    model_name: str
    model_version: str = ""
    id: str = ""
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)
    outputs: tuple[OutputTensor, ...] = ()

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
        tensor = self.output(name)
        if tensor.data is None:
            raise InvalidInputError(
                f"output {name!r} was written to shared memory "
                f"(region {tensor.parameters.get('shared_memory_region')!r}); read it there",
                value=name,
            )
        return tensor.data

    def as_str(self, name: str, encoding: str = "utf-8") -> npt.NDArray[Any]:
        """A ``BYTES`` output decoded to an object array of ``str``."""
        tensor = self.output(name)
        if tensor.datatype != "BYTES":
            raise InvalidInputError(
                f"output {name!r} is {tensor.datatype}, not BYTES: use as_numpy()", value=name
            )
        return to_str_array(self.as_numpy(name), encoding)

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
