"""A tritonclient-compatible layer: existing tritonclient programs run by changing imports.

========================================  =============================================
tritonclient                              kserve_v2.compat
========================================  =============================================
``import tritonclient.http as httpclient``   ``import kserve_v2.compat.http as httpclient``
``import tritonclient.http.aio``             ``import kserve_v2.compat.http.aio``
``import tritonclient.grpc as grpcclient``   ``import kserve_v2.compat.grpc as grpcclient``
``import tritonclient.grpc.aio``             ``import kserve_v2.compat.grpc.aio``
``from tritonclient.utils import *``         ``from kserve_v2.compat.utils import *``
``import tritonclient.utils.shared_memory``  ``import kserve_v2.compat.utils.shared_memory``
``...utils.cuda_shared_memory``              ``kserve_v2.compat.utils.cuda_shared_memory``
========================================  =============================================

The modules have tritonclient's class and function names and signatures (listed in
``tests/compat/api.txt`` and checked by a test): ``InferenceServerClient`` with its
constructor options, ``InferInput`` / ``InferRequestedOutput`` / ``InferResult``,
``InferenceServerException`` with ``message()`` / ``status()`` / ``debug_details()``,
``KeepAliveOptions``, ``async_infer`` (HTTP: a handle with ``get_result()``; gRPC: a
callback), ``start_stream`` / ``async_stream_infer`` / ``stop_stream``, and the ``get_*``
methods with tritonclient's return shapes: dicts (and lists) over HTTP, protobuf messages
over gRPC (``as_json=True`` gives their JSON form).

Everything runs on the native API (:class:`kserve_v2.Client`, :class:`kserve_v2.AsyncClient`,
their streams, :mod:`kserve_v2.shm`, :mod:`kserve_v2.datatypes`); neither tritonclient nor
gevent is imported. It was written from tritonclient's public documentation.

Where it differs on purpose (tritonclient's known limits that this layer does not have):

* **Thread safety.** tritonclient's HTTP client (geventhttpclient) must not be shared by
  threads; a compat client may be: it is a thread-safe :class:`kserve_v2.Client`.
* **HTTP** ``async_infer`` runs requests on a thread pool of ``concurrency`` workers (fewer
  with ``max_greenlets``); it does not pause 10 ms per call to let a greenlet start, and needs
  no gevent.
* **Streams.** One stream per client, as the API (``start_stream`` without a handle) implies;
  a compat gRPC client is cheap (each stream has its own HTTP/2 connection, no grpcio), so a
  program that needs many streams opens many clients, or uses the native
  ``Client.stream()``, which serves any number of streams per client.
* **Errors.** Every failure, connection errors and timeouts included, is an
  :class:`~kserve_v2.compat.utils.InferenceServerException` (also a
  :class:`kserve_v2.KServeError`, with the native error as ``__cause__``); tritonclient's HTTP
  client lets socket errors through.

Other differences: gRPC runs on the native transport unless the program asks for what only
grpcio offers (``creds``, keepalive pings, channel arguments beyond the message size
limits), which selects ``grpc_transport="grpcio"``. HTTP ``InferResult.get_response()`` is
rebuilt from the decoded result (the fields Triton sent; ``binary_data_size`` recomputed).
"""
