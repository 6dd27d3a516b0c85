"""The demo site's own definitions (project/demo/mcp.py), through the endpoint's engine."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.testing import MCPClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("numbers", "answer"),
    [
        ([1, 2.5], {"sum": 3.5}),
        ([10**30, 1], {"sum": 10**30 + 1}),
        ([1e308, 1e308], "The sum is out of the range of a JSON number."),
        ([-1e308, -1e308], "The sum is out of the range of a JSON number."),
        ([10**400, 1.5], "The sum is out of the range of a float."),
        ([10**4299] * 10, "The sum has too many digits to write."),
        ([10**4299] * 2, {"sum": 2 * 10**4299}),
    ],
)
def test_add_sums_or_says_why_it_cannot(numbers: list[Any], answer: Any) -> None:
    result = MCPClient().call_tool("add", {"numbers": numbers})
    if isinstance(answer, dict):
        assert result["structuredContent"] == answer
    else:
        assert result["isError"] is True
        assert result["content"] == [{"type": "text", "text": answer}]
