"""The egress proxy's own module (images/egress-proxy/proxy.py, which runs in its container) imported
here, for what tests and benches call in-process (its Meter)."""

import importlib.util

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("egress_proxy", ROOT / "images/egress-proxy/proxy.py")
assert _spec is not None
assert _spec.loader is not None
proxy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(proxy)
