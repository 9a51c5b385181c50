"""Fixtures: the stub server of tests/conformance."""

from tests.conformance.stub import stub_url

__all__ = ["stub_url"]
