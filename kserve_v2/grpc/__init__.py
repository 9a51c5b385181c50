"""gRPC support: generated stubs (``_generated``) and the wire-level infer codec (``wire``).

Importing this package imports neither grpcio nor protobuf; ``wire`` needs neither.
"""
