"""Run under gevent's monkey-patching (importing kserve_v2.locust imports locust, which
patches): while one greenlet waits for a slow answer, does another run? Prints JSON
``{"http": bool, "grpc": bool}``; a transport that blocked the event loop gives false.

Usage: python cooperative.py HTTP_URL GRPC_URL
"""

import json
import sys

import gevent
import numpy as np

import kserve_v2.locust  # noqa: F401  (imports locust: gevent's monkey-patching)
from kserve_v2 import Client


def cooperative(url):
    with Client(url) as client:
        client.infer("slow", {"DELAY_MS": np.array([1], np.float32)})  # connected, warm
        state = {"waiting": False, "other_ran_meanwhile": False}

        def slow():
            state["waiting"] = True
            client.infer("slow", {"DELAY_MS": np.array([300], np.float32)})
            state["waiting"] = False

        def other():
            state["other_ran_meanwhile"] = state["waiting"]

        first = gevent.spawn(slow)
        second = gevent.spawn(other)  # runs only when the first yields to the event loop
        gevent.joinall([first, second], raise_error=True)
        return state["other_ran_meanwhile"]


from gevent import monkey  # noqa: E402

assert monkey.is_module_patched("socket"), "locust did not monkey-patch"
print(json.dumps({"http": cooperative(sys.argv[1]), "grpc": cooperative(sys.argv[2])}))
