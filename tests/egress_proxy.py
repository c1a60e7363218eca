"""The egress proxy's own modules (images/egress-proxy, which run in its container) imported here, for
what tests and benches call in-process (its Meter, its policy's address check). They import each other
by their own names, as they do in /opt/cocoon-egress."""

import importlib
import sys

from tests.conftest import ROOT

_DIR = str(ROOT / "images/egress-proxy")
sys.path.insert(0, _DIR)
try:
    meter = importlib.import_module("meter")
    rules = importlib.import_module("rules")
finally:
    sys.path.remove(_DIR)
