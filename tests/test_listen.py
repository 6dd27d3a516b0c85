"""``subscriptions/listen``: what a stream listens to, and what its renewals check."""

from __future__ import annotations

from typing import Any

import mcp_app
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
