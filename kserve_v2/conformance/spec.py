"""What a conformance case cites: spec documents, sentences, requirement levels, extensions.

The documents are the verbatim copies kept with the project (``../shared/specs`` of a source
checkout, see its README): the Open Inference Protocol (``oip/``) and Triton's protocol
extensions (``triton-extensions/``). A case quotes one sentence of one section; the project's
tests check that every quote really appears in its document (whitespace-insensitive), so a
report never cites words the spec does not say.

Example::

    >>> from kserve_v2.conformance.spec import OIP_REST, Level, Spec
    >>> spec = Spec(OIP_REST, "Inference Request JSON Object",
    ...             "Optional, but if specified this identifier must be returned in the response.")
    >>> spec.url
    'https://github.com/kserve/open-inference-protocol/blob/main/specification/protocol/inference_rest.md'
    >>> Level.MUST.value
    'MUST'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BINARY",
    "CLASSIFICATION",
    "DECOUPLED",
    "DOCUMENTS",
    "EXTENSIONS",
    "GENERATE",
    "LOGGING",
    "MODEL_CONFIG",
    "OIP_GRPC",
    "OIP_REST",
    "PARAMETERS",
    "PROTOCOLS_GUIDE",
    "REPOSITORY",
    "REQUIRED_API",
    "SCHEDULE",
    "SEQUENCE",
    "SHM",
    "STATISTICS",
    "TRACE",
    "TRITON_INDEX",
    "Extension",
    "Level",
    "Spec",
]

OIP_REST: Final = "oip/inference_rest.md"
OIP_GRPC: Final = "oip/inference_grpc.md"
REQUIRED_API: Final = "oip/required_api.md"
TRITON_INDEX: Final = "triton-extensions/README.md"
BINARY: Final = "triton-extensions/extension_binary_data.md"
CLASSIFICATION: Final = "triton-extensions/extension_classification.md"
SCHEDULE: Final = "triton-extensions/extension_schedule_policy.md"
SEQUENCE: Final = "triton-extensions/extension_sequence.md"
SHM: Final = "triton-extensions/extension_shared_memory.md"
MODEL_CONFIG: Final = "triton-extensions/extension_model_configuration.md"
REPOSITORY: Final = "triton-extensions/extension_model_repository.md"
STATISTICS: Final = "triton-extensions/extension_statistics.md"
TRACE: Final = "triton-extensions/extension_trace.md"
LOGGING: Final = "triton-extensions/extension_logging.md"
PARAMETERS: Final = "triton-extensions/extension_parameters.md"
GENERATE: Final = "triton-extensions/extension_generate.md"
PROTOCOLS_GUIDE: Final = "triton-extensions/inference_protocols.md"
DECOUPLED: Final = "triton-extensions/decoupled_models.md"

_OIP: Final = "https://github.com/kserve/open-inference-protocol/blob/main/specification/protocol/"
_TRITON: Final = "https://github.com/triton-inference-server/server/blob/main/docs/"

#: Every citable document: its path under the specs directory -> its upstream URL.
DOCUMENTS: Final[dict[str, str]] = {
    OIP_REST: _OIP + "inference_rest.md",
    OIP_GRPC: _OIP + "inference_grpc.md",
    REQUIRED_API: "https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md",
    TRITON_INDEX: _TRITON + "protocol/README.md",
    BINARY: _TRITON + "protocol/extension_binary_data.md",
    CLASSIFICATION: _TRITON + "protocol/extension_classification.md",
    SCHEDULE: _TRITON + "protocol/extension_schedule_policy.md",
    SEQUENCE: _TRITON + "protocol/extension_sequence.md",
    SHM: _TRITON + "protocol/extension_shared_memory.md",
    MODEL_CONFIG: _TRITON + "protocol/extension_model_configuration.md",
    REPOSITORY: _TRITON + "protocol/extension_model_repository.md",
    STATISTICS: _TRITON + "protocol/extension_statistics.md",
    TRACE: _TRITON + "protocol/extension_trace.md",
    LOGGING: _TRITON + "protocol/extension_logging.md",
    PARAMETERS: _TRITON + "protocol/extension_parameters.md",
    GENERATE: _TRITON + "protocol/extension_generate.md",
    PROTOCOLS_GUIDE: _TRITON + "customization_guide/inference_protocols.md",
    DECOUPLED: _TRITON + "user_guide/decoupled_models.md",
}


@enum.unique
class Level(str, enum.Enum):
    """How binding the cited sentence is.

    The specs seldom use RFC 2119 capitals. A case is ``MUST`` when its sentence says "must" or
    "required", or defines the wire format itself (the status code or object an endpoint "is
    indicated by" / "returns"); ``SHOULD`` and ``MAY`` when the sentence says so (or "may" /
    "optional" of the server's own behaviour); ``expected practice`` when the text is silent
    on the point checked (which 4xx status, which gRPC code, agreement between protocols) and
    the case checks what interoperable servers do. Only failed ``MUST`` cases make
    ``kserve-v2 conformance`` exit non-zero.
    """

    #: the sentence says must / required, or defines the wire format
    MUST = "MUST"
    #: the sentence says should (or describes a recommended default)
    SHOULD = "SHOULD"
    #: the sentence allows the behaviour without requiring it
    MAY = "MAY"
    #: the text is silent; the case checks common, interoperable practice
    PRACTICE = "expected practice"


@dataclass(frozen=True, slots=True)
class Spec:
    """One cited sentence: the document (a key of :data:`DOCUMENTS`), the heading of its
    section, and the sentence as written there (line breaks may differ)."""

    document: str
    section: str
    quote: str

    def __post_init__(self) -> None:
        if self.document not in DOCUMENTS:
            raise ValueError(f"unknown spec document {self.document!r}")
        if not self.section or not self.quote:
            raise ValueError("a spec citation needs a section and a quote")

    @property
    def url(self) -> str:
        """The document's upstream address."""
        return DOCUMENTS[self.document]


@dataclass(frozen=True, slots=True)
class Extension:
    """A Triton protocol extension: the name a server advertises in its metadata
    (``advertised``; ``None`` for the provisional generate endpoints, which no server lists)
    and the document that defines it."""

    name: str
    advertised: str | None
    document: str


#: The extensions the suite knows, by the name cases use. Sub-features a server advertises
#: separately (``sequence(string_id)``, ``model_repository(unload_dependents)``) are case
#: requirements of their own but belong to the same extension.
EXTENSIONS: Final[dict[str, Extension]] = {
    e.name: e
    for e in (
        Extension("binary_tensor_data", "binary_tensor_data", BINARY),
        Extension("classification", "classification", CLASSIFICATION),
        Extension("schedule_policy", "schedule_policy", SCHEDULE),
        Extension("sequence", "sequence", SEQUENCE),
        Extension("sequence(string_id)", "sequence(string_id)", SEQUENCE),
        Extension("system_shared_memory", "system_shared_memory", SHM),
        Extension("cuda_shared_memory", "cuda_shared_memory", SHM),
        Extension("model_configuration", "model_configuration", MODEL_CONFIG),
        Extension("model_repository", "model_repository", REPOSITORY),
        Extension(
            "model_repository(unload_dependents)",
            "model_repository(unload_dependents)",
            REPOSITORY,
        ),
        Extension("statistics", "statistics", STATISTICS),
        Extension("trace", "trace", TRACE),
        Extension("logging", "logging", LOGGING),
        Extension("parameters", "parameters", PARAMETERS),
        Extension("generate", None, GENERATE),
    )
}
