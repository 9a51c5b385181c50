"""Generated from ``protos/*.proto`` by ``scripts/gen_protos.py``. Do not edit.

Generator: grpcio-tools==1.62.3. Regenerate with ``python scripts/gen_protos.py``;
``tests/grpc/test_generated.py`` fails when these files drift from ``protos/``.
"""

GENERATOR = "grpcio-tools==1.62.3"
