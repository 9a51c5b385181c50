"""Run one inference and print its outputs.

Inputs come from --input (a literal, @file.npy, @file.json or @- for stdin); those not given
are generated from the model's metadata (random values, dynamic dimensions from --shape,
default 1; inputs the configuration marks optional, or --omit names, are left out). Outputs
print as a table of shape, datatype and values (elided past 64), as JSON (--json), or are saved
as .npy files (--save DIR).

examples:
  kserve-v2 infer simple                                   # generated inputs
  kserve-v2 infer simple -i INPUT0=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]] --shape INPUT1=1,16
  kserve-v2 infer identity_fp32 -i INPUT0=@x.npy --save out/
  kserve-v2 infer classify -i INPUT0=[0.1,0.7,0.2] --output OUTPUT0:2
  kserve-v2 infer text_model -i text_input='["hi"]' --omit max_tokens --url http://mlserver:8080
  kserve-v2 infer simple --shm --url grpc://localhost:8001 --dump
  echo '[[1,2,3]]' | kserve-v2 infer identity_int32 -i INPUT0=@-
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TYPE_CHECKING, Any

from kserve_v2.cli import _common, _tensors

if TYPE_CHECKING:
    from kserve_v2 import Client, InferInput, InferResult, ModelMetadata, RequestedOutput

__all__ = ["OPTIONS", "add_arguments", "prepare_inputs", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    _tensors.add_request_arguments(parser)
    wire = parser.add_mutually_exclusive_group()
    wire.add_argument(
        "--binary",
        dest="binary",
        action="store_true",
        default=None,
        help="HTTP: tensors in binary form (binary-data extension); by default, binary if the "
        "server advertises it, JSON otherwise",
    )
    wire.add_argument(
        "--json-data",
        dest="binary",
        action="store_false",
        help="HTTP: tensors as JSON arrays in the body instead (--json is the output format)",
    )
    parser.add_argument(
        "--shm",
        action="store_true",
        help="send inputs and receive outputs through system shared memory (the server must "
        "run on this machine)",
    )
    parser.add_argument(
        "--shm-output-size",
        type=int,
        default=1 << 20,
        metavar="BYTES",
        help="--shm: bytes reserved for an output whose size the metadata does not fix "
        "(default 1 MiB)",
    )
    parser.add_argument(
        "--no-metadata",
        action="store_true",
        help="do not ask the model's metadata (then every input must be given, and literals "
        "take JSON's datatype unless :DATATYPE says)",
    )
    parser.add_argument("--save", metavar="DIR", help="save each output as DIR/NAME.npy")


def prepare_inputs(
    args: argparse.Namespace, client: Client, model: str
) -> tuple[list[InferInput], ModelMetadata | None]:
    """The inputs of ``--input``/``--shape`` (plus generated ones) and the model's metadata."""
    specs = [_tensors.parse_input(text) for text in args.input]
    shapes = _tensors.parse_shapes(args.shape)
    omit: list[str] = args.omit
    if getattr(args, "no_metadata", False):
        if not specs:
            raise _common.CLIError("--no-metadata needs every input given with --input")
        if omit:
            raise _common.CLIError("--omit leaves out generated inputs; --no-metadata makes none")
        return _tensors.build_inputs(specs, None, shapes=shapes), None
    from kserve_v2.errors import KServeError

    metadata = client.model_metadata(model, args.model_version)
    _tensors.check_omitted(omit, specs, shapes, metadata)
    skip = list(omit)
    if len(specs) + len(set(omit)) < len(metadata.inputs):
        # No configuration extension (KServe, MLServer): every input left is generated.
        with contextlib.suppress(KServeError):
            skip += _tensors.optional_inputs(client.model_config(model, args.model_version))
    inputs = _tensors.build_inputs(specs, metadata, shapes=shapes, seed=args.seed, skip=skip)
    return inputs, metadata


def _output_sizes(
    metadata: ModelMetadata | None,
    inputs: list[InferInput],
    names: list[str],
    default: int,
) -> dict[str, int]:
    """Bytes to reserve per output: from the metadata's shape (a dynamic first dimension
    takes the inputs' batch size), else ``default``."""
    from kserve_v2.datatypes import DATATYPE_BY_NAME

    batch = inputs[0].shape[0] if inputs and inputs[0].shape else 1
    meta = {t.name: t for t in metadata.outputs} if metadata else {}
    sizes = {}
    for name in names:
        tensor = meta.get(name)
        dt = DATATYPE_BY_NAME.get(tensor.datatype) if tensor else None
        itemsize = dt.itemsize if dt is not None else None
        if tensor is None or itemsize is None:
            sizes[name] = default
            continue
        dims = list(tensor.shape)
        if dims and dims[0] < 0:
            dims[0] = batch
        if any(d < 0 for d in dims):
            sizes[name] = default
            continue
        count = 1
        for d in dims:
            count *= d
        sizes[name] = max(count * itemsize, 1)
    return sizes


def _infer_shm(
    args: argparse.Namespace,
    client: Client,
    inputs: list[InferInput],
    outputs: list[RequestedOutput],
    metadata: ModelMetadata | None,
    kwargs: dict[str, Any],
) -> InferResult:
    """The inference with inputs and outputs in two system shared-memory regions."""
    from dataclasses import replace

    from kserve_v2 import InferInput, RequestedOutput
    from kserve_v2.extensions import read_shared_memory_output
    from kserve_v2.messages import OutputTensor
    from kserve_v2.shm import SystemSharedMemoryRegion

    def aligned(n: int) -> int:
        return (n + 63) // 64 * 64

    names = [o.name for o in outputs] or [t.name for t in (metadata.outputs if metadata else ())]
    if not names:
        raise _common.CLIError("--shm needs --output NAME (or the model's metadata)")
    wire = [memoryview(i.wire_bytes()).nbytes for i in inputs]
    sizes = _output_sizes(metadata, inputs, names, args.shm_output_size)
    tag = f"kserve_v2_cli_{os.getpid()}"
    regions: list[SystemSharedMemoryRegion] = []
    registered: list[SystemSharedMemoryRegion] = []
    try:
        in_region = SystemSharedMemoryRegion.create(f"{tag}_in", max(sum(map(aligned, wire)), 64))
        regions.append(in_region)
        out_region = SystemSharedMemoryRegion.create(
            f"{tag}_out", max(sum(aligned(sizes[n]) for n in names), 64)
        )
        regions.append(out_region)
        placed_inputs, offset = [], 0
        for tensor, nbytes in zip(inputs, wire, strict=True):
            in_region.write(tensor.wire_bytes(), offset)
            placed_inputs.append(
                InferInput(
                    tensor.name,
                    datatype=tensor.datatype,
                    shape=tensor.shape,
                    shared_memory=in_region.placement(nbytes, offset),
                )
            )
            offset += aligned(nbytes)
        classes = {o.name: o.class_count for o in outputs}
        placed_outputs, offset = [], 0
        for name in names:
            placed_outputs.append(
                RequestedOutput(
                    name,
                    class_count=classes.get(name, 0),
                    shared_memory=out_region.placement(sizes[name], offset),
                )
            )
            offset += aligned(sizes[name])
        for region in regions:
            client.register_region(region)
            registered.append(region)
        result = client.infer(args.model, placed_inputs, outputs=placed_outputs, **kwargs)
        filled = []
        for output in result.outputs:
            data = read_shared_memory_output(result, output.name, out_region).copy()
            filled.append(
                OutputTensor(output.name, output.datatype, output.shape, data, output.parameters)
            )
        return replace(result, outputs=tuple(filled))
    finally:
        for region in registered:
            client.unregister_region(region)
        for region in regions:
            region.close()


def run(args: argparse.Namespace) -> int:
    style = _common.Style(_common.wants_color(args, sys.stdout))
    kwargs = _tensors.request_kwargs(args)
    if args.shm_output_size < 1:
        raise _common.CLIError(f"--shm-output-size must be positive, got {args.shm_output_size}")
    if args.save:
        # Before the inference: a directory that cannot be made fails before any work.
        with _common.writing(args.save, "--save"):
            os.makedirs(args.save, exist_ok=True)
    with _common.client(args) as client:
        inputs, metadata = prepare_inputs(args, client, args.model)
        outputs = _tensors.parse_outputs(args.output)
        if args.binary is not None and client.protocol == "http":
            kwargs["binary"] = args.binary
        if args.shm:
            result = _infer_shm(args, client, inputs, outputs, metadata, kwargs)
        else:
            result = client.infer(args.model, inputs, outputs=outputs or None, **kwargs)
    data = _tensors.result_data(result)
    if args.save:
        with _common.writing(args.save, "--save"):
            data["saved"] = _tensors.save_outputs(result, args.save)
    text = _tensors.result_text(result, style=style)
    if args.save:
        text += "\n" + "\n".join(f"saved {path}" for path in data["saved"])
    _common.emit(args, data, text)
    return 0
