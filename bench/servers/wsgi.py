"""The WSGI application of whichever bench settings ``DJANGO_SETTINGS_MODULE`` names."""

from __future__ import annotations

import os
import sys

from django.core.wsgi import get_wsgi_application

# An A/B knob of `--variant`, not a product setting: the interpreter's thread switch interval
# in seconds (Python's default is 0.005), e.g. BENCH_SWITCH_INTERVAL=0.001.
if os.environ.get("BENCH_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["BENCH_SWITCH_INTERVAL"]))

application = get_wsgi_application()
