"""Load on a KServe v2 / Triton server with Locust: HTTP and gRPC users on the ``simple``
model (``tests/models``), reported per model in Locust's statistics.

    pip install 'kserve-v2[locust,grpc]'
    locust -f examples/locustfile.py                     # web UI on http://localhost:8089
    locust -f examples/locustfile.py --headless -u 32 -r 8 -t 1m --csv results

Distributed, one master and workers on any number of machines:

    locust -f examples/locustfile.py --master --headless -u 256 -r 32 -t 5m --expect-workers 4
    locust -f examples/locustfile.py --worker --master-host <master address>   # each machine

The servers come from KSERVE_HTTP_URL and KSERVE_GRPC_URL (defaults: localhost:8000 and
localhost:8001); pick one kind of user by naming its class on the command line
(``locust -f examples/locustfile.py SimpleOverGRPC``).
"""

import os

import numpy as np
from locust import between, task

from kserve_v2.locust import GRPCUser, HTTPUser

INPUTS = {
    "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
    "INPUT1": np.ones((1, 16), dtype=np.int32),
}
EXPECTED_SUM = INPUTS["INPUT0"] + INPUTS["INPUT1"]


class SimpleOverHTTP(HTTPUser):
    host = os.environ.get("KSERVE_HTTP_URL", "http://localhost:8000")
    wait_time = between(0, 0.01)

    @task
    def simple(self) -> None:
        result = self.client.infer("simple", INPUTS)
        if result is not None:  # None: the call failed (it is in the statistics already)
            assert (result.as_numpy("OUTPUT0") == EXPECTED_SUM).all()


class SimpleOverGRPC(GRPCUser):
    host = os.environ.get("KSERVE_GRPC_URL", "grpc://localhost:8001")
    wait_time = between(0, 0.01)

    @task
    def simple(self) -> None:
        self.client.infer("simple", INPUTS)
