"""Server-sent events framing: one JSON message per ``data:`` line, however lines are split."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest

from mcp_app.transport import sse


@pytest.mark.parametrize("text", ["\u0085", "a\u2028b", "\u2029", "line\nbreak\r", "é ✓ \x0b\x1c"])
def test_a_message_stays_on_one_data_line_for_any_line_splitter(text: str) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": text}}
    raw = sse.event(message, "s-1").decode()
    for lines in (raw.splitlines(), raw.split("\n")):
        data = [line[5:].strip() for line in lines if line.startswith("data:")]
        assert [json.loads(item) for item in data] == [message]


def test_other_characters_are_sent_as_they_are() -> None:
    assert sse.dumps({"t": "é ✓"}) == '{"t":"é ✓"}'


def test_a_priming_event_has_an_id_a_retry_and_empty_data() -> None:
    assert sse.priming("s-0", 500) == b"id: s-0\nretry: 500\ndata: \n\n"


def test_dates_decimals_and_uuids_are_encoded_as_plain_answers_are() -> None:
    import datetime
    import uuid
    from decimal import Decimal

    key = uuid.UUID(int=1)
    message = {"price": Decimal("9.99"), "on": datetime.date(2026, 11, 30), "key": key}
    data = sse.event(message).decode().split("data: ", 1)[1]
    assert json.loads(data) == {"price": "9.99", "on": "2026-11-30", "key": str(key)}


class Colour(enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


@pytest.mark.parametrize("more", [{}, {"none": None}])
def test_an_enum_member_is_sent_as_its_value_by_either_encoder(more: dict[str, Any]) -> None:
    # With a null in it, the message is written by the json module, not orjson: the same.
    message = {"colour": Colour.RED, "size": Size.LARGE, **more}
    assert json.loads(sse.dumps(message)) == {"colour": "red", "size": 3, **more}


@pytest.mark.parametrize("more", [{}, {"none": None}])
def test_times_are_written_as_django_writes_them_by_either_encoder(more: dict[str, Any]) -> None:
    import datetime

    moment = datetime.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=datetime.UTC)
    message = {"at": moment, "for": datetime.timedelta(hours=1), **more}
    assert json.loads(sse.dumps(message)) == {
        "at": "2026-11-30T12:00:00.123Z",
        "for": "P0DT01H00M00S",
        **more,
    }
