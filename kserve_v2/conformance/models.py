"""The models the cases use: names, signatures and behaviour.

Servers that load Triton-style model repositories can serve ``conformance/models`` of the
source tree (Python backend) as it is. Other servers provide equivalents under the same names;
a case whose model is missing is skipped, never failed. ``conformance/README.md`` shows this
table; a test keeps the two, and the repository, in step.

Example::

    >>> from kserve_v2.conformance.models import MODELS
    >>> MODELS["simple"].inputs
    ('INPUT0 INT32 [-1, 16]', 'INPUT1 INT32 [-1, 16]')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["MODELS", "Model"]


@dataclass(frozen=True)
class Model:
    """A model the suite needs: its tensors (``NAME DATATYPE [shape]``, -1 variable) and what
    it computes."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    behaviour: str


_IDENTITY = "OUTPUT0 = INPUT0 (any shape of rank 2, 0-size dimensions included)"
_DATATYPES = (
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
    "BF16",
    "BYTES",
)

MODELS: Final[dict[str, Model]] = {
    m.name: m
    for m in (
        *(
            Model(
                f"identity_{d.lower()}",
                (f"INPUT0 {d} [-1, -1]",),
                (f"OUTPUT0 {d} [-1, -1]",),
                _IDENTITY,
            )
            for d in _DATATYPES
        ),
        Model(
            "simple",
            ("INPUT0 INT32 [-1, 16]", "INPUT1 INT32 [-1, 16]"),
            ("OUTPUT0 INT32 [-1, 16]", "OUTPUT1 INT32 [-1, 16]"),
            "OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1; batched (max batch 8); a "
            "dynamic batcher with 2 priority levels (schedule policy)",
        ),
        Model(
            "versioned",
            ("INPUT0 INT32 [-1]",),
            ("OUTPUT0 INT32 [-1]",),
            "two versions, 1 and 2, both served; OUTPUT0 = INPUT0 + version",
        ),
        Model(
            "classify",
            ("INPUT0 FP32 [-1]",),
            ("OUTPUT0 FP32 [-1]",),
            "OUTPUT0 = INPUT0, labelled cat, dog, bird, fish, horse, cow, sheep, goat, duck, "
            "frog (classification); one input with one variable dimension (raw binary "
            "request)",
        ),
        Model(
            "failing",
            ("INPUT0 INT32 [-1]",),
            ("OUTPUT0 INT32 [-1]",),
            "every request fails with the message 'kserve-v2 test failure: deliberate error'",
        ),
        Model(
            "params_echo",
            ("INPUT0 INT32 [-1] (optional)",),
            ("PARAMS BYTES [1]",),
            "PARAMS = the request's parameters as a JSON object (UTF-8)",
        ),
        Model(
            "repeat_decoupled",
            (
                "IN INT32 [-1]",
                "REPEAT INT32 [1]",
                "DELAY_MS FP32 [1] (optional)",
                "ERROR_AT INT32 [1] (optional)",
            ),
            ("OUT INT32 [-1]", "IDX INT32 [1]"),
            "decoupled: REPEAT responses with OUT = IN and IDX = 0, 1, ...; response "
            "ERROR_AT is an error instead; then the final flag with no response",
        ),
        Model(
            "sequence_accumulate",
            ("INPUT INT32 [1]",),
            ("OUTPUT INT32 [1]",),
            "stateful (sequence batcher, UINT64 correlation ids): OUTPUT = running sum of "
            "INPUT in the sequence, reset by sequence_start",
        ),
        Model(
            "sequence_accumulate_string",
            ("INPUT INT32 [1]",),
            ("OUTPUT INT32 [1]",),
            "as sequence_accumulate, with string correlation ids",
        ),
        Model(
            "text_echo",
            ("text_input BYTES [1]", "max_tokens INT32 [1] (optional)"),
            ("text_output BYTES [1]",),
            "text_output = text_input, cut to the first max_tokens words (generate)",
        ),
        Model(
            "text_generate",
            ("text_input BYTES [1]", "max_tokens INT32 [1] (optional)"),
            ("text_output BYTES [1]",),
            "decoupled: one response per word of text_input, with its leading whitespace "
            "(generate_stream)",
        ),
    )
}
