"""The egress suite's fixtures (the recording stand-in, an egress sandbox on the shared cocoond) for the
reliability tests of the proxy."""

from tests.test_egress import egress, provider  # noqa: F401 - fixtures
