"""HTTP/REST: the REST form of the protocol and the REST backend of the clients.

Its modules, by layer (see ``tests/test_layers.py``):

* engines, without I/O: ``codec`` (JSON and binary-extension bodies <-> value objects),
  ``paths`` (every endpoint's request target), ``compression`` (gzip and deflate bodies) and
  ``sse`` (the ``generate_stream`` event stream);
* backend: ``backend`` (:class:`~kserve_v2.rest.backend.HTTPBackend`, every endpoint's
  prepared calls), run by the clients through an HTTP transport (:mod:`kserve_v2.transport`).

Importing this package imports none of them.
"""
