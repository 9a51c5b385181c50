"""A locustfile whose user calls a model that always fails: the failures must reach
Locust's statistics with the server's message."""

import os

import numpy as np
from locust import constant, task

from kserve_v2.locust import HTTPUser


class AlwaysFailing(HTTPUser):
    host = os.environ.get("KSERVE_HTTP_URL", "http://localhost:8000")
    wait_time = constant(0.05)

    @task
    def failing(self) -> None:
        self.client.infer("failing", {"INPUT0": np.zeros(2, np.int32)})
