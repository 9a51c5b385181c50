"""Tensors on the command line: ``--input NAME=VALUE``, generated inputs, ``--output``,
``--param``, and how results are printed or saved.

``VALUE`` is one of

* a literal: JSON (``[[1,2],[3,4]]``, ``3.5``, ``["a","b"]``) or plain text (a one-element
  BYTES tensor), with an optional ``:DATATYPE`` suffix (``[1,2]:FP16``);
* ``@file.npy`` (numpy's format), ``@file.json`` (a literal, or
  ``{"data": ..., "datatype": ..., "shape": ...}``), or ``@-`` (either, from stdin), with the
  same optional suffix (``@x.npy:FP16``).

Without a datatype a literal takes the model's (from its metadata) when known, else JSON's
(integers INT64, numbers FP64, text BYTES). A literal whose shape lacks the model's batch
dimension gets one (``[1,2,3]`` for a ``[-1, 3]`` input becomes ``[[1,2,3]]``).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kserve_v2.cli._common import CLIError, parse_key_values

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from kserve_v2 import InferInput, InferResult, ModelMetadata, RequestedOutput

__all__ = [
    "InputSpec",
    "add_request_arguments",
    "build_inputs",
    "check_omitted",
    "parse_input",
    "parse_outputs",
    "parse_shapes",
    "request_kwargs",
    "result_data",
    "result_text",
    "save_outputs",
]

_NPY_MAGIC = b"\x93NUMPY"


class InputSpec:
    """One ``--input``: the name, the value as loaded (nested lists or an array), and the
    datatype and shape the user named (or None). (A plain class: dataclasses would cost
    ``--help`` an import.)"""

    __slots__ = ("datatype", "name", "shape", "value")

    def __init__(
        self,
        name: str,
        value: Any,
        datatype: str | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.datatype = datatype
        self.shape = shape


# -- arguments ------------------------------------------------------------------------------------


def add_input_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, generated: bool = True
) -> None:
    """``--input``, ``--shape``, and (when inputs not given are ``generated`` from the model's
    metadata; not so offline) ``--seed``."""
    given = (
        "an input: a literal ([[1,2],[3,4]]), @file.npy, @file.json or @- (stdin), each "
        "optionally with :DATATYPE; repeatable"
    )
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=given + ". Inputs not given are generated from the model's metadata (random "
        "values of the right datatype and shape)"
        if generated
        else given + ". Every input must be given",
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2",
        help="the shape of a generated input (fills its dynamic dimensions, default 1), or "
        "a reshape of a given one; repeatable"
        if generated
        else "a reshape of a given input; repeatable",
    )
    if generated:
        parser.add_argument(
            "--seed", type=int, default=0, help="seed of the generated inputs (default 0)"
        )
        parser.add_argument(
            "--omit",
            action="append",
            default=[],
            metavar="NAME",
            help="leave the model's input NAME out instead of generating it: an optional "
            "input on a server that publishes no model configuration (KServe, MLServer); "
            "those Triton's configuration marks optional are left out already; repeatable",
        )


def add_request_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything of one inference request: inputs, outputs, parameters, sequence, priority."""
    add_input_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="NAME[:N]",
        help="ask for this output (default: all); NAME:N asks for the top N classes "
        "(classification extension); repeatable",
    )
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a request parameter (VALUE as JSON when it parses, else text); repeatable",
    )
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")
    parser.add_argument("--request-id", default="", metavar="ID", help="the request's id")
    seq = parser.add_argument_group("sequence and scheduling")
    seq.add_argument(
        "--sequence-id", metavar="ID", help="correlation id of a sequence (integer or text)"
    )
    seq.add_argument("--sequence-start", action="store_true", help="the first request of it")
    seq.add_argument("--sequence-end", action="store_true", help="the last request of it")
    seq.add_argument("--priority", type=int, metavar="N", help="scheduling priority")
    seq.add_argument(
        "--queue-timeout-us", type=int, metavar="US", help="server-side queue timeout (µs)"
    )


def request_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``infer``/``send`` from the request options."""
    kwargs: dict[str, Any] = {
        "version": args.model_version,
        "request_id": args.request_id,
        "priority": args.priority,
        "timeout_us": args.queue_timeout_us,
    }
    params = parse_key_values(args.param, "--param")
    if params:
        kwargs["parameters"] = params
    if args.sequence_id is not None:
        sid: int | str = args.sequence_id
        if isinstance(sid, str) and sid.isdigit():
            sid = int(sid)
        kwargs.update(
            sequence_id=sid, sequence_start=args.sequence_start, sequence_end=args.sequence_end
        )
    elif args.sequence_start or args.sequence_end:
        raise CLIError("--sequence-start/--sequence-end need --sequence-id")
    return kwargs


# -- parsing --------------------------------------------------------------------------------------


def _datatype_suffix(text: str, name: str, *, file: bool = False) -> tuple[str, str | None]:
    """Split ``literal:DATATYPE`` (or ``file:DATATYPE``); the suffix counts only when it names
    a datatype. One that only looks like a datatype (``:INT33``) after a JSON literal or a
    file that exists is refused, not taken for text."""
    import os
    import re

    from kserve_v2.datatypes import DATATYPE_BY_NAME

    head, sep, tail = text.rpartition(":")
    if not sep:
        return text, None
    if tail.upper() in DATATYPE_BY_NAME:
        return head, tail.upper()
    if re.fullmatch(r"[A-Z][A-Z0-9]*", tail):
        if file:
            meant = head == "-" or os.path.isfile(head)
        else:
            try:
                json.loads(head)
                meant = True
            except ValueError:
                meant = False
        if meant:
            raise CLIError(
                f"--input {name}: unknown datatype {tail!r}",
                hint=f"datatypes: {', '.join(DATATYPE_BY_NAME)}",
            )
    return text, None


def _load_bytes(data: bytes, what: str) -> tuple[Any, str | None, tuple[int, ...] | None]:
    """A value from file contents: .npy by its magic, else JSON."""
    import numpy as np

    if data.startswith(_NPY_MAGIC):
        try:
            return np.load(io.BytesIO(data), allow_pickle=False), None, None
        except ValueError as exc:
            raise CLIError(f"{what}: not a readable .npy file ({exc})") from None
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CLIError(f"{what}: neither a .npy file nor JSON ({exc})") from None
    if isinstance(value, dict):
        if "data" not in value:
            raise CLIError(f"{what}: a JSON object needs 'data' (and 'datatype', 'shape')")
        shape = value.get("shape")
        return (
            value["data"],
            str(value["datatype"]).upper() if value.get("datatype") else None,
            tuple(int(d) for d in shape) if isinstance(shape, list) else None,
        )
    return value, None, None


def parse_input(text: str, stdin: Any = None) -> InputSpec:
    """One ``--input NAME=VALUE``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise CLIError(f"--input wants NAME=VALUE, not {text!r}")
    if value.startswith("@"):
        import os

        source, named = value[1:], None
        if not os.path.isfile(source):  # a file's own name may end in ":INT8"
            source, named = _datatype_suffix(source, name, file=True)
        if source == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            data = stream.read()
            what = f"--input {name}=@- (stdin)"
        else:
            try:
                with open(source, "rb") as f:
                    data = f.read()
            except OSError as exc:
                raise CLIError(f"--input {name}: cannot read {source}: {exc.strerror}") from None
            what = f"--input {name}=@{source}"
        loaded, datatype, shape = _load_bytes(data, what)
        return InputSpec(name, loaded, named or datatype, shape)
    literal, datatype = _datatype_suffix(value, name)
    try:
        loaded = json.loads(literal)
    except ValueError:
        loaded = literal  # plain text: a BYTES element
    if isinstance(loaded, str):
        loaded = [loaded]
    return InputSpec(name, loaded, datatype)


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=1,16`` items."""
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) < 0:
            raise CLIError(f"--shape wants NAME=D1,D2,... (non-negative), not {item!r}")
        shapes[name] = shape
    return shapes


def parse_outputs(items: Sequence[str], binary: bool | None = None) -> list[RequestedOutput]:
    """``--output NAME`` or ``NAME:N`` (top N classes)."""
    from kserve_v2 import RequestedOutput

    outputs = []
    for item in items:
        name, sep, count = item.rpartition(":")
        if sep and count.isdigit() and name:
            outputs.append(RequestedOutput(name, class_count=int(count), binary=binary))
        else:
            outputs.append(RequestedOutput(item, binary=binary))
    return outputs


# -- building -------------------------------------------------------------------------------------


def _fit_shape(shape: tuple[int, ...], wanted: Sequence[int]) -> tuple[int, ...] | None:
    """``shape`` with a leading batch dimension of 1 when that makes it fit ``wanted``."""

    def fits(s: tuple[int, ...]) -> bool:
        if len(s) != len(wanted):
            return False
        return all(w < 0 or w == d for d, w in zip(s, wanted, strict=True))

    if fits(shape):
        return shape
    if len(wanted) == len(shape) + 1 and fits((1, *shape)):
        return (1, *shape)
    return None


def _random_array(datatype: str, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    import numpy as np

    from kserve_v2.datatypes import DATATYPE_BY_NAME, Datatype, numpy_dtype

    count = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        words = [f"text-{int(v)}".encode() for v in rng.integers(0, 1000, count)]
        array = np.empty(count, dtype=object)
        array[:] = words
        return array.reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    dt = DATATYPE_BY_NAME.get(datatype)
    if dt is None:
        raise CLIError(f"cannot generate values of datatype {datatype!r}")
    if dt in (Datatype.FP16, Datatype.FP32, Datatype.FP64, Datatype.BF16):
        values = rng.random(shape, dtype=np.float64)
        return values.astype(np.float32) if dt is Datatype.BF16 else values.astype(numpy_dtype(dt))
    return rng.integers(0, 100, shape).astype(numpy_dtype(dt))


def _cast(value: Any, datatype: str, name: str) -> Any:
    """An array given for an input of ``datatype``: cast when no value changes."""
    import numpy as np

    from kserve_v2.datatypes import DATATYPE_BY_NAME, datatype_of, numpy_dtype
    from kserve_v2.errors import KServeError

    if not isinstance(value, np.ndarray) or datatype in ("BYTES", "BF16"):
        return value
    try:
        if datatype_of(value).value == datatype:
            return value
    except KServeError:
        return value
    dt = DATATYPE_BY_NAME.get(datatype)
    if dt is None:
        return value
    cast = value.astype(numpy_dtype(dt))
    if not np.array_equal(cast, value):
        raise CLIError(
            f"--input {name}: the {value.dtype} values do not all fit {datatype}",
            hint=f"convert them to {datatype} first",
        )
    return cast


def build_inputs(
    specs: Sequence[InputSpec],
    metadata: ModelMetadata | None,
    *,
    shapes: dict[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    skip: Sequence[str] = (),
) -> list[InferInput]:
    """The request's inputs: those given, then (with metadata) generated ones for the rest,
    except the inputs named in ``skip`` (optional ones)."""
    import numpy as np

    from kserve_v2 import InferInput
    from kserve_v2.errors import InvalidInputError

    shapes = shapes or {}
    meta = {t.name: t for t in metadata.inputs} if metadata is not None else {}
    given = {s.name for s in specs}
    if metadata is not None:
        unknown = given - set(meta)
        if unknown:
            names = ", ".join(meta) or "none"
            raise CLIError(
                f"model {metadata.name} has no input {', '.join(sorted(unknown))} (inputs: {names})"
            )
        unshaped = set(shapes) - set(meta)
        if unshaped:
            names = ", ".join(meta) or "none"
            raise CLIError(
                f"--shape {', '.join(sorted(unshaped))}: model {metadata.name} has no such "
                f"input (inputs: {names})"
            )
    else:
        unshaped = set(shapes) - given
        if unshaped:
            raise CLIError(f"--shape {', '.join(sorted(unshaped))}: no --input of that name")
    inputs = []
    for spec in specs:
        tensor_meta = meta.get(spec.name)
        datatype = spec.datatype or (tensor_meta.datatype if tensor_meta else None)
        value = spec.value
        try:
            if datatype is not None:
                value = _cast(value, datatype, spec.name)
            probe = InferInput(spec.name, value, datatype=datatype)  # checks the value
        except InvalidInputError as exc:
            if datatype in (None, "BYTES") or not _is_text(spec.value):
                raise
            # "-i INPUT0=1,2,3": not JSON, so taken for one string.
            raise CLIError(
                exc.message,
                hint=f"a literal is JSON, e.g. --input '{spec.name}=[[1,2,3]]' "
                "(text that is not JSON is one BYTES element)",
            ) from None
        shape: tuple[int, ...] | None = shapes.get(spec.name) or spec.shape
        if shape is None and tensor_meta is not None:
            shape = _fit_shape(probe.shape, tensor_meta.shape)
        inputs.append(
            probe
            if shape is None or shape == probe.shape
            else InferInput(spec.name, value, datatype=datatype, shape=shape)
        )
    if metadata is not None:
        rng = np.random.default_rng(seed)
        for tensor in metadata.inputs:
            if tensor.name in given or tensor.name in skip:
                continue
            shape = shapes.get(tensor.name) or tuple(d if d >= 0 else 1 for d in tensor.shape)
            if len(shape) != len(tensor.shape):
                raise CLIError(
                    f"--shape {tensor.name}: {len(shape)} dimensions, the model's input has "
                    f"{len(tensor.shape)} ({list(tensor.shape)})"
                )
            inputs.append(
                InferInput(
                    tensor.name,
                    _random_array(tensor.datatype, shape, rng),
                    datatype=tensor.datatype,
                )
            )
    return inputs


def check_omitted(
    omit: Sequence[str],
    specs: Sequence[InputSpec],
    shapes: dict[str, tuple[int, ...]],
    metadata: ModelMetadata,
) -> None:
    """``--omit`` must name inputs of the model that no ``--input`` or ``--shape`` gives."""
    names = [t.name for t in metadata.inputs]
    unknown = sorted(set(omit) - set(names))
    if unknown:
        raise CLIError(
            f"--omit {', '.join(unknown)}: model {metadata.name} has no such input "
            f"(inputs: {', '.join(names) or 'none'})"
        )
    for option, named in (("--input", {s.name for s in specs}), ("--shape", set(shapes))):
        both = sorted(set(omit) & named)
        if both:
            raise CLIError(f"--omit {', '.join(both)}: also given to {option}")


def _is_text(value: Any) -> bool:
    """Whether ``--input`` took its value for text (one string: it was not JSON)."""
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)


def optional_inputs(config: dict[str, Any] | None) -> list[str]:
    """The names of the inputs a model's configuration marks optional (not generated)."""
    if not config:
        return []
    return [i.get("name", "") for i in config.get("input", []) if i.get("optional")]


# -- results --------------------------------------------------------------------------------------


def output_values(data: npt.NDArray[Any] | None) -> Any:
    """An output's values for JSON: BYTES decoded where UTF-8."""
    if data is None:
        return None
    if data.dtype == object:
        return (
            [
                v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else v
                for v in data.reshape(-1).tolist()
            ]
            if data.ndim <= 1
            else [output_values(row) for row in data]
        )
    return data.tolist()


def result_data(result: InferResult) -> dict[str, Any]:
    """A result as a JSON-friendly dict."""
    return {
        "model_name": result.model_name,
        "model_version": result.model_version,
        "id": result.id,
        "parameters": dict(result.parameters),
        "outputs": [
            {
                "name": t.name,
                "datatype": t.datatype,
                "shape": list(t.shape),
                "data": output_values(t.data),
                **({"parameters": dict(t.parameters)} if t.parameters else {}),
            }
            for t in result.outputs
        ],
    }


def format_values(data: npt.NDArray[Any]) -> str:
    """An array's values, elided past 64 elements; BYTES shown as text where UTF-8."""
    import numpy as np

    if data.dtype == object:
        shown = np.empty(data.shape, dtype=object)
        flat = shown.reshape(-1)
        for i, v in enumerate(data.reshape(-1)):
            if isinstance(v, bytes):
                try:
                    flat[i] = v.decode("utf-8")
                except UnicodeDecodeError:
                    flat[i] = v
            else:
                flat[i] = v
        data = shown
    with np.printoptions(threshold=64, edgeitems=4, linewidth=96, precision=6):
        return np.array2string(data, separator=", ")


def result_text(result: InferResult, *, style: Any = None, title: bool = True) -> str:
    """A result for people: a line about the response, then each output's shape and values."""
    lines = []
    if title:
        head = f"model {result.model_name}"
        if result.model_version:
            head += f" version {result.model_version}"
        if result.id:
            head += f"  id {result.id}"
        lines.append(style(head, "bold") if style else head)
    # Triton's final-response flag is shown by the callers that stream (as "final").
    shown = {k: v for k, v in result.parameters.items() if k != "triton_final_response"}
    if shown:
        lines.append(f"parameters: {', '.join(f'{k}={v}' for k, v in shown.items())}")
    for tensor in result.outputs:
        label = f"{tensor.name}  {tensor.datatype}  {list(tensor.shape)}"
        lines.append(style(label, "cyan") if style else label)
        if tensor.data is None:
            lines.append(f"  (in shared memory: {dict(tensor.parameters)})")
            continue
        lines.extend("  " + line for line in format_values(tensor.data).splitlines())
    return "\n".join(lines)


def save_outputs(result: InferResult, directory: str) -> list[str]:
    """Save each output with data as ``DIRECTORY/NAME.npy``; returns the paths."""
    from pathlib import Path

    import numpy as np

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    written = []
    for tensor in result.outputs:
        if tensor.data is None:
            continue
        data = tensor.data
        if data.dtype == object:  # BYTES: a fixed-width bytes array needs no pickle
            data = np.array([bytes(v) for v in data.reshape(-1)], dtype=bytes).reshape(data.shape)
        target = path / f"{tensor.name.replace('/', '_')}.npy"
        np.save(target, data, allow_pickle=False)
        written.append(str(target))
    return written
