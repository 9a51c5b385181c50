"""HTTP/2 for gRPC without grpcio: frame layout, HPACK and the connection, without I/O."""
