"""Fixtures: the stub server and a run of the stub cases against it (see stub.py)."""

from tests.conformance.stub import stub_run, stub_url

__all__ = ["stub_run", "stub_url"]
