"""``subscriptions/listen``: which notifications a listen stream honours, and their wire form."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..protocol import jsonrpc, tasks, versions
from ..protocol.context import RequestContext
from ..protocol.jsonrpc import InvalidParams
from .sse import Event

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("mcp_app")

JSON = dict[str, Any]

#: Filter key, server capability, and the notification for each kind of list.
LISTS = (
    ("toolsListChanged", "tools", "notifications/tools/list_changed"),
    ("promptsListChanged", "prompts", "notifications/prompts/list_changed"),
    ("resourcesListChanged", "resources", "notifications/resources/list_changed"),
)
#: Which list a changed kind of definition belongs to.
KIND_TO_FILTER = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
    "templates": "resourcesListChanged",
}
#: What news on the lists' channel that may have been lost stands for: any list may have
#: changed.
EVERY_LIST_CHANGED: JSON = {"kinds": list(KIND_TO_FILTER)}


#: Kinds of definition whose change may change which resources a caller may read.
RESOURCE_KINDS = frozenset({"resources", "templates"})


class Renewal:
    """Renews one stream: a renewal that fails (the database is down) keeps the stream as it
    was, and is logged once until one succeeds again."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self, stream: Any) -> bool:
        """``stream.renew()``: whether the stream may go on (``True`` when the renewal failed)."""
        try:
            alive = bool(stream.renew())
        except Exception:
            if not self.failing:
                self.failing = True
                logger.warning("Could not renew a stream; it stays open", exc_info=True)
            return True
        self.failing = False
        return alive


def fresh_user(user: Any) -> Any:
    """``user`` as stored now (its permissions and groups read again), or an anonymous user
    once deleted or made inactive; a user that is no row of the user model (an anonymous
    user, a JWT's ``TokenUser``) as it is."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import AnonymousUser

    model = get_user_model()
    if not isinstance(user, model) or user.pk is None:
        return user
    found = model._default_manager.filter(pk=user.pk).first()
    # An inactive user is no one's login any more (Django's backends refuse it): anonymous.
    if found is None or not getattr(found, "is_active", True):
        return AnonymousUser()
    return found


#: Most resources one session, or one listen stream, follows; and the longest URI it may name.
#: Each change rewrites a session's list and each renewal checks all of it again: unbounded,
#: a client could make every one of its requests slower than the last.
SUBSCRIPTIONS_MAX = 1000
SUBSCRIBED_URI_MAX_CHARS = 2048


def long_uri(uri: str) -> InvalidParams | None:
    """The error for a URI too long to follow, if it is."""
    if len(uri) > SUBSCRIBED_URI_MAX_CHARS:
        return InvalidParams(f"A URI to follow is at most {SUBSCRIBED_URI_MAX_CHARS} characters")
    return None


def too_many(limit: int) -> InvalidParams:
    return InvalidParams(f"At most {limit} resources are followed at once")


def hidden_uris(
    server: Server,
    uris: Iterable[str],
    context: Callable[[Any], RequestContext],
    user: Any,
) -> frozenset[str]:
    """Which of ``uris`` name a resource, or match a template, that ``user`` may not read now.

    ``context(user)`` makes the context the permission checks read. Where the check cannot
    be made (the catalog or a permission callable fails), the URI is hidden: its updates are
    held back until a check succeeds. Queries: not for the event loop.
    """
    uris = list(uris)
    if not uris:
        return frozenset()
    try:
        catalog = server.catalog()
        if not catalog.restricted:
            return frozenset()
        ctx = context(fresh_user(user))
    except Exception:
        logger.warning("Could not check access to subscribed resources", exc_info=True)
        return frozenset(uris)
    hidden = set()
    for uri in uris:
        try:
            if server.engine.hides(uri, ctx, catalog):
                hidden.add(uri)
        except Exception:
            logger.warning(
                "Could not check access to %s; its updates are held back", uri, exc_info=True
            )
            hidden.add(uri)
    return frozenset(hidden)


class Listen:
    """One open ``subscriptions/listen`` request: its filter, channels, and message mapping."""

    def __init__(
        self,
        server: Server,
        request_id: Any,
        requested: Any,
        capabilities: JSON,
        lists_may_change: bool = False,
        own_tasks: Callable[[list[str]], list[str]] | None = None,
        hides: Callable[[list[str]], frozenset[str]] | None = None,
        lapses: Callable[[list[str]], None] | None = None,
        task_states: Callable[[list[str]], list[JSON]] | None = None,
        admitted: Callable[[], bool] | None = None,
    ) -> None:
        """Listen as ``requested``, for what ``capabilities`` offer; with ``lists_may_change``,
        a list empty now (so not in the capabilities) is listened to as well, since a
        definition added later is announced. ``own_tasks`` (for a client that follows tasks)
        keeps the requested ``taskIds`` that are the caller's. ``hides(uris)``: which URIs name
        resources the caller may not read, whose updates it is then not sent (their
        subscription is acknowledged all the same, as for URIs that name nothing yet); asked
        again at each renewal of the stream. ``lapses(task_ids)``, at each renewal too, fails
        the followed tasks whose process ended, which announces them. ``task_states(task_ids)``
        reads the followed tasks as they are when the stream opens, each sent at once (one
        that ended or waits for input before the client listened is not missed).
        ``admitted()``, at each renewal, says whether the request that opened the stream would
        still be let in; the stream ends once it would not (a token revoked, a user deleted).

        Raises:
            InvalidParams: the filter is not an object of the documented shape.
            MissingClientCapability: it asks for task notifications without the extension.
        """
        if not isinstance(requested, dict):
            raise InvalidParams("subscriptions/listen needs a 'notifications' object")
        honoured: JSON = {}
        task_ids = requested.get("taskIds")
        if task_ids is not None:
            if own_tasks is None:
                raise tasks.missing_extension("taskIds needs the tasks extension declared")
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise InvalidParams("taskIds must be a list of task ids")
            honoured["taskIds"] = own_tasks(list(dict.fromkeys(task_ids)))
        for key, capability, _ in LISTS:
            if requested.get(key) is True and (capability in capabilities or lists_may_change):
                honoured[key] = True
        uris = requested.get("resourceSubscriptions")
        if uris is not None:
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise InvalidParams("resourceSubscriptions must be a list of URIs")
            uris = list(dict.fromkeys(uris))
            if len(uris) > SUBSCRIPTIONS_MAX:
                raise too_many(SUBSCRIPTIONS_MAX)
            for uri in uris:
                refused = long_uri(uri)
                if refused is not None:
                    raise refused
            # As for lists: a resource may be added later, and then its updates go out.
            may_subscribe = lists_may_change and server.options.subscribe
            if capabilities.get("resources", {}).get("subscribe") or may_subscribe:
                honoured["resourceSubscriptions"] = uris
        self._admitted = admitted
        self.server = server
        self.request_id = request_id
        self.honoured = honoured
        self._hides = hides
        self._lapses = lapses if honoured.get("taskIds") else None
        #: The followed tasks not known to have ended: only those are checked for a lapse.
        self._open_tasks = set(honoured.get("taskIds", ()))
        #: With resources to hide, which ones is found again at each renewal, and at once after
        #: a change of resources (``stale``): one made or restricted since is not announced to
        #: a caller who may not read it. Followed tasks are checked for a process that ended.
        self._hiding = hides is not None and bool(honoured.get("resourceSubscriptions"))
        self.renews = self._hiding or self._lapses is not None or admitted is not None
        self.stale = False
        self._uris = self._visible()
        self._task_channels = frozenset(
            server.channel(f"task:{task_id}") for task_id in honoured.get("taskIds", ())
        )
        self._task_states = task_states
        #: Each followed task's last state sent: its ``lastUpdatedAt``, and the rest of it.
        self._task_sent: dict[str, tuple[str, JSON]] = {}
        # Over stdio, deliveries and the backlog may be judged in two threads.
        self._task_lock = threading.Lock()

    @property
    def channels(self) -> list[str]:
        names = []
        if self._hiding or any(key in self.honoured for key, _, _ in LISTS):
            names.append(self.server.channel("lists"))
        if self.honoured.get("resourceSubscriptions"):
            # Even when all are hidden now: one may be readable at the next renewal.
            names.append(self.server.channel("updated"))
        return names + sorted(self._task_channels)

    def _tagged(self, method: str, params: JSON | None = None) -> JSON:
        body = dict(params or {})
        body["_meta"] = {versions.META_SUBSCRIPTION_ID: self.request_id}
        return jsonrpc.notification(method, body)

    finished = False

    def _visible(self) -> frozenset[str]:
        uris: list[str] = list(self.honoured.get("resourceSubscriptions", ()))
        if self._hides is None:
            return frozenset(uris)
        return frozenset(uris) - self._hides(uris)

    def closed(self) -> None:
        pass

    def renew(self) -> bool:
        if self._admitted is not None and not self._admitted():
            return False
        if self._hiding:
            self._uris = self._visible()
        if self._lapses is not None and self._open_tasks:
            self._lapses(sorted(self._open_tasks))
        return True

    def opening(self) -> list[Event]:
        """The first message of the stream: the filter the server honours."""
        ack = self._tagged(
            "notifications/subscriptions/acknowledged", {"notifications": self.honoured}
        )
        return [Event(ack)]

    def backlog(self) -> list[Event]:
        """The followed tasks as they are now (read once the stream listens, so no change
        falls between)."""
        task_ids = self.honoured.get("taskIds")
        if not task_ids or self._task_states is None:
            return []
        return [event for task in self._task_states(list(task_ids)) for event in self._task(task)]

    def _task(self, task: JSON) -> list[Event]:
        """``notifications/tasks`` for ``task``, unless it says nothing new: the task ended
        in a state already sent, it is older than the last state sent (the same change, read
        when the stream opened and then delivered), or it is that state again but for the
        time."""
        task_id, status = task.get("taskId"), task.get("status")
        stamp = task.get("lastUpdatedAt")
        with self._task_lock:
            if isinstance(task_id, str) and isinstance(stamp, str):
                rest = {key: value for key, value in task.items() if key != "lastUpdatedAt"}
                sent = self._task_sent.get(task_id)
                if sent is not None and (
                    sent[1].get("status") not in tasks.OPEN_STATUSES
                    # The same format to the millisecond, in UTC: the text orders as the
                    # time does.
                    or stamp < sent[0]
                    or rest == sent[1]
                ):
                    return []
                self._task_sent[task_id] = (stamp, rest)
            if status not in tasks.OPEN_STATUSES:
                self._open_tasks.discard(task_id)
        return [Event(self._tagged("notifications/tasks", task))]

    def _after_gap(self, channel: str) -> list[Event]:
        """What the client is told when news on ``channel`` (not the lists') may have been
        lost: every resource it follows may have changed (a needless notice only costs a
        read), and a followed task is read again at the next renewal, made due now."""
        if channel == self.server.channel("updated"):
            return [
                Event(self._tagged("notifications/resources/updated", {"uri": uri}))
                for uri in sorted(self._uris)
            ]
        if channel in self._task_channels:
            self.stale = self.renews
        return []

    def ending(self) -> list[Event]:
        """The listen request's final result, sent when the server ends the stream."""
        result = {
            "resultType": "complete",
            "_meta": {
                versions.META_SUBSCRIPTION_ID: self.request_id,
                # As every other 2026-07-28 result says who answered.
                versions.META_SERVER_INFO: self.server.options.server_info,
            },
        }
        return [Event(jsonrpc.result_response(self.request_id, result))]

    def notifications(self, channel: str, message: JSON) -> list[Event]:
        """What a delivered message means for this stream (often nothing)."""
        if message.get("gap"):
            if channel != self.server.channel("lists"):
                return self._after_gap(channel)
            message = EVERY_LIST_CHANGED
        if channel == self.server.channel("lists"):
            kinds = set(message.get("kinds", ()))
            self.stale = self.stale or (self._hiding and bool(kinds & RESOURCE_KINDS))
            keys = {KIND_TO_FILTER.get(kind) for kind in kinds}
            return [
                Event(self._tagged(method))
                for key, _, method in LISTS
                if key in keys and key in self.honoured
            ]
        uri = message.get("uri")
        if channel == self.server.channel("updated") and uri in self._uris:
            return [Event(self._tagged("notifications/resources/updated", {"uri": uri}))]
        if channel in self._task_channels and isinstance(message.get("task"), dict):
            return self._task(message["task"])
        return []
