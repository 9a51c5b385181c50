"""The HTTP/REST form of the protocol, without I/O: paths, bodies, compression."""
