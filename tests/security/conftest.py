"""The egress suite's fixtures (the recording stand-in, an egress sandbox on the shared cocoond, a
provider with a key) for the proxy's attack tests."""

from tests.test_egress import egress, provider  # noqa: F401 - fixtures
