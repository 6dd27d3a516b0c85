"""``subscriptions/listen``: what a stream listens to, and what its renewals check."""

from __future__ import annotations

from typing import Any

import mcp_app
from mcp_app.delivery import GAP
from mcp_app.transport.listen import Listen

server = mcp_app.Server("listen-tests", rows=False)


def following(task_ids: list[str], lapses: Any) -> Listen:
    return Listen(
        server,
        "listen-1",
        {"taskIds": task_ids},
        {},
        own_tasks=lambda ids: ids,
        lapses=lapses,
    )


def test_a_stream_that_follows_tasks_only_hears_nothing_of_lists() -> None:
    listen = following(["t1"], lambda ids: None)
    assert server.channel("lists") not in listen.channels
    assert listen.channels == [server.channel("task:t1")]


def test_a_renewal_checks_only_the_followed_tasks_not_known_to_have_ended() -> None:
    checked: list[list[str]] = []
    listen = following(["t1", "t2"], checked.append)
    assert listen.renews
    listen.renew()
    done = {"taskId": "t1", "status": "completed"}
    events = listen.notifications(server.channel("task:t1"), {"task": done})
    assert events[0].message["method"] == "notifications/tasks"
    listen.renew()
    listen.notifications(server.channel("task:t2"), {"task": {"taskId": "t2", "status": "failed"}})
    listen.renew()
    assert checked == [["t1", "t2"], ["t2"]]  # nothing is left to check at the third


def test_a_stream_without_tasks_does_not_renew_for_them() -> None:
    listen = Listen(server, "listen-2", {"toolsListChanged": True}, {}, lapses=lambda ids: None)
    assert not listen.renews


def state(status: str, stamp: str, **more: Any) -> dict[str, Any]:
    return {"taskId": "t1", "status": status, "lastUpdatedAt": stamp, **more}


def sent(listen: Listen, *states: dict[str, Any]) -> list[str]:
    channel = server.channel("task:t1")
    events = [e for task in states for e in listen.notifications(channel, {"task": task})]
    return [e.message["params"]["status"] for e in events if e.message]


def test_a_followed_task_is_sent_as_it_is_when_the_stream_opens() -> None:
    now = state("completed", "2026-12-02T10:00:00.200Z")
    listen = Listen(
        server,
        "listen-3",
        {"taskIds": ["t1"]},
        {},
        own_tasks=lambda ids: ids,
        task_states=lambda ids: [now],
    )
    [opened] = listen.backlog()
    assert opened.message is not None and opened.message["params"]["status"] == "completed"
    # Deliveries of the changes before it, which it already says, are not sent.
    assert sent(listen, state("working", "2026-12-02T10:00:00.100Z"), now) == []


def test_nothing_is_sent_of_a_task_after_it_ended() -> None:
    listen = following(["t1"], lambda ids: None)
    # Both within one millisecond: the time cannot order them, the end can.
    stamp = "2026-12-02T10:00:00.000Z"
    assert sent(listen, state("completed", stamp), state("working", stamp)) == ["completed"]


def test_a_state_that_differs_only_in_its_time_is_not_sent_again() -> None:
    listen = following(["t1"], lambda ids: None)
    asks = {"inputRequests": {"a": {}, "b": {}}}
    fewer = {"inputRequests": {"b": {}}}
    statuses = sent(
        listen,
        state("working", "2026-12-02T10:00:00.100Z"),
        state("working", "2026-12-02T10:00:00.300Z"),
        state("input_required", "2026-12-02T10:00:00.400Z", **asks),
        # One answer of two: the same status, but what it waits for changed.
        state("input_required", "2026-12-02T10:00:00.500Z", **fewer),
    )
    assert statuses == ["working", "input_required", "input_required"]


def test_a_listen_stream_follows_a_bounded_number_of_resources_by_bounded_uris(
    monkeypatch: Any,
) -> None:
    import pytest

    from mcp_app.protocol.jsonrpc import InvalidParams
    from mcp_app.transport import listen

    monkeypatch.setattr(listen, "SUBSCRIPTIONS_MAX", 2)
    capabilities = {"resources": {"subscribe": True}}

    def opened(uris: list[str]) -> Listen:
        requested = {"resourceSubscriptions": uris}
        return Listen(server, "listen-1", requested, capabilities, hides=lambda u: frozenset())

    # Named twice, followed once.
    assert opened(["a://1", "a://2", "a://1"]).honoured["resourceSubscriptions"] == [
        "a://1",
        "a://2",
    ]
    with pytest.raises(InvalidParams, match="At most 2 resources are followed at once"):
        opened(["a://1", "a://2", "a://3"])
    with pytest.raises(InvalidParams, match="at most 2048 characters"):
        opened(["a://" + "x" * 2048])


def test_after_a_gap_in_delivery_every_followed_list_and_resource_is_announced() -> None:
    honoured = {
        "toolsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["file:///b", "file:///a"],
    }
    offered = {
        "tools": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
    }
    listen = Listen(server, "listen-3", honoured, offered, lapses=lambda ids: None)

    def told(channel: str) -> list[Any]:
        return [
            (e.message["method"], e.message.get("params", {}).get("uri"))
            for e in listen.notifications(server.channel(channel), dict(GAP))
        ]

    assert told("lists") == [
        ("notifications/tools/list_changed", None),
        ("notifications/resources/list_changed", None),
    ]
    assert told("updated") == [
        ("notifications/resources/updated", "file:///a"),
        ("notifications/resources/updated", "file:///b"),
    ]


def test_after_a_gap_a_followed_task_is_checked_at_once() -> None:
    listen = following(["t1"], lambda ids: None)
    assert listen.notifications(server.channel("task:t1"), dict(GAP)) == []
    assert listen.stale
