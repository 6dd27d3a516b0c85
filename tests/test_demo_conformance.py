"""The demo site's conformance fixtures (project/demo/conformance.py) refuse what they cannot do."""

from __future__ import annotations

import pytest

from mcp_app.testing import MCPClient

pytestmark = pytest.mark.django_db(transaction=True)


def test_slow_compute_refuses_a_wait_longer_than_an_hour() -> None:
    # A wait past what a timestamp holds used to fail inside the task with OverflowError.
    result = MCPClient().call_tool("slow_compute", {"seconds": 1e300})
    assert result["isError"] is True
    assert "<= 3600" in result["content"][0]["text"]


def test_slow_compute_answers_a_short_wait() -> None:
    result = MCPClient().call_tool("slow_compute", {"seconds": 0, "label": "x"})
    assert result["content"][0]["text"] == "x: computed after 0s"
