"""Private descriptor pool of the generated stubs (see ``scripts/gen_protos.py``).

Keeps ``inference.*`` and ``grpc.health.v1.*`` out of protobuf's process-wide default pool,
so these stubs coexist with other copies of the same protos (tritonclient, pytriton, ...).
"""

from google.protobuf import descriptor_pool

POOL = descriptor_pool.DescriptorPool()
