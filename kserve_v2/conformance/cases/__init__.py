"""The conformance cases, one module per area; importing this package registers them all,
in the order the reports list them."""

from kserve_v2.conformance.cases import (  # noqa: F401  (imported to register their cases)
    advertisement,
    binary,
    cross,
    generate,
    health,
    infer_grpc,
    infer_rest,
    inference_extensions,
    management,
    metadata,
    shared_memory,
    streaming,
    transport,
)
