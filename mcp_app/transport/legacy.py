"""Initialize-era sessions on the same endpoint: handshake, session methods, streams and input loops."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import connections

from .. import sessions
from ..conf import conf
from ..delivery import backend, tell
from ..events import (
    END,
    StreamLog,
    end_if_abandoned,
    events_from,
    has_events_after,
    is_end,
    parse_event_id,
    stream_channel,
)
from ..input import InputRequired, form_schema, kept_answer, revision_problem
from ..protocol import jsonrpc, legacy, versions
from ..protocol.context import RequestContext
from ..protocol.engine import Engine
from ..protocol.jsonrpc import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ProtocolError,
    ResourceNotFound,
)
from ..protocol.tasks import TaskWork
from ..registry import Catalog
from ..state import caller_id
from .listen import (
    EVERY_LIST_CHANGED,
    KIND_TO_FILTER,
    LISTS,
    RESOURCE_KINDS,
    SUBSCRIPTIONS_MAX,
    hidden_uris,
    long_uri,
    too_many,
)
from .sse import Event

logger = logging.getLogger("mcp_app")

if TYPE_CHECKING:
    from .http import Endpoint, Incoming, Reply

JSON = dict[str, Any]
MAX_ROUNDS = 25
#: Why a request ends when its client did not answer what it was asked.
_NO_ANSWER = "The client did not answer in time"


def is_legacy(message: Any, headers: Any) -> bool:
    """Tell the eras apart: a session, a batch, or a bare ``initialize`` is the initialize era.

    A request carrying the stateless revision's ``_meta`` is served statelessly unless it
    names a session; one whose ``MCP-Protocol-Version`` header names the stateless revision
    is, whatever else it carries (that revision has no sessions: an ``Mcp-Session-Id`` is
    ignored, and a batch refused as no JSON-RPC request of its). Anything else is the
    initialize era's, which refuses a header naming a revision it does not serve.
    """
    if (headers.get("mcp-protocol-version") or "").strip() == versions.MODERN:
        return False
    if headers.get("mcp-session-id"):
        return True
    if isinstance(message, list):
        return True
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    # Without the stateless marker: a legacy revision's header, none, or one naming no
    # revision served here (refused as unsupported, as the initialize era answers it).
    return not (isinstance(meta, dict) and versions.META_PROTOCOL_VERSION in meta)


def no_logging() -> MethodNotFound:
    """``logging/setLevel`` on a server that does no logging (and declares no ``logging``)."""
    return MethodNotFound("Method not found: logging/setLevel (this server does no logging)")


def bad_meta(params: JSON) -> InvalidParams | None:
    """The error for a ``_meta`` that is no object, or whose ``progressToken`` is neither a
    string nor an integer."""
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return InvalidParams("_meta must be an object")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if token is not None and not jsonrpc.valid_id(token):
        return InvalidParams("_meta.progressToken must be a string or an integer")
    return None


def _error(request_id: Any, exc: ProtocolError) -> JSON:
    if isinstance(exc, ResourceNotFound):
        exc.code = jsonrpc.RESOURCE_NOT_FOUND
    return jsonrpc.error_response(request_id, exc)


class SessionStream:
    """A session's GET stream: list changes and updates of the resources it subscribed to."""

    def __init__(
        self,
        endpoint: LegacyEndpoint,
        session: sessions.SessionData,
        user: Any = None,
        admitted: Callable[[], bool] | None = None,
    ) -> None:
        self.endpoint = endpoint
        #: Whether the request that opened the stream would still be let in (see ``Listen``).
        self.admitted = admitted
        self.server = endpoint.server
        self.session = session
        self.user = user
        self.subscriptions = set(session.subscriptions)
        #: Subscribed resources the caller may no longer read (found at each renewal, and at
        #: once after a change of resources: ``stale``): their updates are not sent.
        self.hidden: frozenset[str] = frozenset()
        self.stale = False
        self.token = uuid.uuid4().hex
        #: Each message goes on one stream: the session's newest open GET stream.
        self.active = True
        #: The session's GET streams opened since this one (itself first), oldest first.
        self.open_tokens: list[str] = []

    @property
    def channels(self) -> list[str]:
        return [
            self.server.channel("lists"),
            self.server.channel("updated"),
            self.server.channel(f"outbox:{self.session.id}"),
        ]

    finished = False

    def opening(self) -> list[Event]:
        return []

    def backlog(self) -> list[Event]:
        self.hidden = self._hidden()
        # Not heard (the backend is down): the older stream carries on, and this one takes
        # over once a newer stream opens or the older one closes.
        tell(self.server.channel(f"outbox:{self.session.id}"), {"takeover": self.token})
        return []

    def _hidden(self) -> frozenset[str]:
        """The subscribed URIs of resources the caller may not read now (made or restricted
        since it subscribed)."""
        return hidden_uris(
            self.server,
            self.subscriptions,
            lambda user: self.endpoint.context(self.session, "resources/subscribe", {}, user),
            self.user,
        )

    def ending(self) -> list[Event]:
        return []

    renews = True

    def renew(self) -> bool:
        """Keep the session alive while its client listens, and check again which subscribed
        resources the caller may read; ``False`` once the session is gone (ended elsewhere,
        or cleaned away) or its caller would no longer be let in."""
        if self.admitted is not None and not self.admitted():
            return False
        session = sessions.store().get(self.session.id)
        if session is None:
            return False
        # The store has every subscription, those whose message this stream missed too (it
        # saves them before it tells the streams).
        self.subscriptions = set(session.subscriptions)
        self.hidden = self._hidden()
        return True

    def _updated_after_gap(self) -> list[Event]:
        """After updates may have been lost: every resource subscribed to may have changed
        (a needless notice only costs a read)."""
        return [
            Event(jsonrpc.notification("notifications/resources/updated", {"uri": uri}))
            for uri in sorted(self.subscriptions - self.hidden)
        ]

    def closed(self) -> None:
        """Tell the session's other GET streams this one is gone."""
        if not self.finished:
            tell(self.server.channel(f"outbox:{self.session.id}"), {"handback": self.token})

    def notifications(self, channel: str, message: JSON) -> list[Event]:
        if message.get("ended"):
            self.finished = True
            return []
        if "takeover" in message:
            if message["takeover"] not in self.open_tokens:
                self.open_tokens.append(message["takeover"])
            self.active = message["takeover"] == self.token
            return []
        if "handback" in message:
            # A stream closed: the newest one still open carries the messages again. Every
            # stream sees the same messages in the same order, so exactly one is active.
            with contextlib.suppress(ValueError):
                self.open_tokens.remove(message["handback"])
            self.active = bool(self.open_tokens) and self.open_tokens[-1] == self.token
            return []
        if "subscriptions" in message:
            # Kept by every stream: an inactive one may carry the messages again later.
            self.subscriptions = set(message["subscriptions"])
            return []
        if message.get("gap") and channel == self.server.channel(f"outbox:{self.session.id}"):
            # A takeover or handback may have been lost: each open stream takes over again,
            # and the last heard (every stream hears them in one order) carries the messages.
            tell(channel, {"takeover": self.token})
            return []
        if not self.active:
            return []
        if message.get("gap"):
            if channel == self.server.channel("updated"):
                return self._updated_after_gap()
            message = EVERY_LIST_CHANGED  # on the lists' channel; nothing on others
        if channel == self.server.channel("lists"):
            kinds = set(message.get("kinds", ()))
            self.stale = self.stale or bool(self.subscriptions and kinds & RESOURCE_KINDS)
            keys = {KIND_TO_FILTER.get(kind) for kind in kinds}
            return [Event(jsonrpc.notification(method)) for key, _, method in LISTS if key in keys]
        if channel == self.server.channel("updated"):
            uri = message.get("uri")
            if uri in self.subscriptions and uri not in self.hidden:
                return [
                    Event(jsonrpc.notification("notifications/resources/updated", {"uri": uri}))
                ]
            return []
        return [Event(message["send"])] if "send" in message else []


#: How long a cancel this process received is remembered for a call that had not yet begun
#: (the client sent it right after the request, and it overtook it).
EARLY_CANCEL_SECONDS = 10.0
#: Most cancels remembered; past it the oldest are forgotten.
EARLY_CANCEL_LIMIT = 10_000


class Cancels:
    """The cancels this process received, by session and request id.

    A cancel for a call running in this process reaches it here at once, whatever the
    delivery backend does with the copy published for other processes (Redis may not have
    confirmed the call's subscription yet, or be out of reach). One for a call not begun yet
    is remembered for ``EARLY_CANCEL_SECONDS``; one for a call this process ended lately (the
    client cancelled as the answer reached it) is not, so a later request that reuses the id
    is not taken for the cancelled one.
    """

    _lock: threading.Lock
    _seen: dict[tuple[str, str], float]
    _ended: dict[tuple[str, str], float]
    _running: dict[tuple[str, str], Callable[[], None]]

    def __init__(self) -> None:
        self.forked()

    def forked(self) -> None:
        """Start empty (also in a forked child: the parent's lock may have been held)."""
        self._lock = threading.Lock()
        self._seen = {}
        self._ended = {}
        self._running = {}

    @staticmethod
    def _key(session_id: str, request_id: Any) -> tuple[str, str]:
        # By JSON text: the id 1 and the id "1" are two requests.
        return session_id, json.dumps(request_id, sort_keys=True, default=str)

    def add(self, session_id: str, request_id: Any) -> None:
        """A cancel arrived: cancel the call if it runs here, else remember it (unless the
        call ended here lately)."""
        key = self._key(session_id, request_id)
        now = time.monotonic()
        with self._lock:
            cancel = self._running.get(key)
            if cancel is None:
                ended = self._ended.get(key)
                if ended is None or now - ended >= EARLY_CANCEL_SECONDS:
                    _remember(self._seen, key, now)
        if cancel is not None:
            cancel()

    def running(
        self, session_id: str, request_id: Any, cancel: Callable[[], None]
    ) -> Callable[[], None]:
        """Call ``cancel`` when the request is cancelled (at once if it was lately); the
        function that stops this once the call has ended."""
        key = self._key(session_id, request_id)
        with self._lock:
            when = self._seen.pop(key, None)
            self._ended.pop(key, None)
            self._running[key] = cancel
        if when is not None and time.monotonic() - when < EARLY_CANCEL_SECONDS:
            cancel()

        def ended() -> None:
            with self._lock:
                if self._running.get(key) is cancel:
                    del self._running[key]
                    _remember(self._ended, key, time.monotonic())

        return ended


def _remember(times: dict[tuple[str, str], float], key: tuple[str, str], now: float) -> None:
    """``times[key] = now``, the entries older than ``EARLY_CANCEL_SECONDS`` (then the oldest)
    forgotten once there are ``EARLY_CANCEL_LIMIT``."""
    times.pop(key, None)  # to the end: the entries stay in the order of their times
    if len(times) >= EARLY_CANCEL_LIMIT:
        # From the front, so a full dict of fresh entries costs one removal, not a scan.
        fresh = now - EARLY_CANCEL_SECONDS
        while times and (times[next(iter(times))] <= fresh or len(times) >= EARLY_CANCEL_LIMIT):
            del times[next(iter(times))]
    times[key] = now


cancels = Cancels()
os.register_at_fork(after_in_child=cancels.forked)


class Resume:
    """A GET with ``Last-Event-ID``: the rest of a request's stream, replayed then followed."""

    def __init__(
        self, server: Any, session_id: str, stream: str, seq: int, request_id: Any
    ) -> None:
        self.server = server
        self.session_id = session_id
        self.stream = stream
        self.seq = seq
        self.finished = False

    @property
    def channels(self) -> list[str]:
        # The outbox too: a DELETE ends the session's streams, this one even if its call is
        # no longer running anywhere to end it.
        return [
            stream_channel(self.server, self.session_id, self.stream),
            self.server.channel(f"outbox:{self.session_id}"),
        ]

    def opening(self) -> list[Event]:
        return []

    def ending(self) -> list[Event]:
        return []

    renews = True
    stale = False

    def renew(self) -> bool:
        """``False`` once the session is gone (the call, if it runs nowhere any more, would
        never end the stream), or once the log holds an event this stream never got. The
        session's idle clock is left alone, so a stream whose call died does not keep it
        alive for ever."""
        if not sessions.store().exists(self.session_id):
            return False
        # Its delivery was lost (a backend reconnecting drops messages): the client resumes
        # from the last event it has, and reads the rest from the log.
        if has_events_after(self.session_id, self.stream, self.seq):
            return False
        # The process running its request ended without answering: the stream's answer is
        # an error, which this stream is sent as it is kept.
        end_if_abandoned(self.server, self.session_id, self.stream)
        return True

    def closed(self) -> None:
        pass

    def _take(self, seq: int, message: JSON, live: bool = False) -> list[Event]:
        if self.finished:
            return []
        final = is_end(message)
        if seq <= self.seq:
            # The event the client already has: if it was the last, there is nothing more.
            self.finished = self.finished or (seq == self.seq and final)
            return []
        if live and seq > self.seq + 1:
            # A delivery before it was lost (a backend reconnecting drops messages): the
            # stream ends, and the client resumes from its last event, reading the rest from
            # the log. The log itself may have a hole (an event that could not be kept), which
            # the backlog steps over.
            self.finished = True
            return []
        self.seq = seq
        self.finished = final
        if message == END:
            return []
        return [Event(message, f"{self.stream}-{seq}")]

    def backlog(self) -> list[Event]:
        found = events_from(self.session_id, self.stream, self.seq) or []
        return [event for seq, message in found for event in self._take(seq, message)]

    def notifications(self, channel: str, message: JSON) -> list[Event]:
        if channel == self.server.channel(f"outbox:{self.session_id}"):
            self.finished = self.finished or bool(message.get("ended"))
            return []
        return self._take(int(message.get("seq", 0)), message.get("message") or {}, live=True)


def _let_go_of_connections() -> None:
    """Close this thread's database connections, but one in a transaction, before it waits
    for a client's answer (for minutes, when a person answers): a waiting call holds a
    thread, not a connection, or as many waiting calls as the database takes clients would
    leave none for any other request. The call opens another when it needs one."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class LegacyEndpoint:
    """Serves initialize-era clients through the endpoint's engine and catalog."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.server = endpoint.server
        self.engine: Engine = endpoint.engine

    # -- entry ---------------------------------------------------------------------------

    def post(self, message: Any, incoming: Incoming) -> Reply:
        from .http import Reply, error_reply

        if isinstance(message, dict) and message.get("method") == "initialize":
            if jsonrpc.classify(message) != "request":
                problem = (
                    "initialize's params must be an object"
                    if "params" in message and not isinstance(message["params"], dict)
                    else "initialize must be a JSON-RPC 2.0 request with an id"
                )
                # Its id, if it has one that can be read: the client matches the error by it.
                rid = message.get("id")
                return error_reply(
                    rid if jsonrpc.valid_id(rid) else None, InvalidRequest(problem), 400
                )
            return self.initialize(message, incoming)
        # A request's id, when it can be read: a refused response or notification gets none.
        request_id = (
            message.get("id")
            if isinstance(message, dict) and jsonrpc.classify(message) == "request"
            else None
        )
        session, refused = self.session(incoming, request_id)
        if session is None:
            return refused  # type: ignore[return-value]
        if isinstance(message, list):
            return self.batch(message, session, incoming)
        kind = jsonrpc.classify(message)
        if kind == "invalid":
            rid = message.get("id") if isinstance(message, dict) else None
            return error_reply(
                rid if jsonrpc.valid_id(rid) else None,
                InvalidRequest("Invalid Request: not a JSON-RPC 2.0 message"),
                400,
            )
        if kind == "notification":
            self.notification(message, session)
            return Reply(202)
        if kind == "response":
            # Only the response itself: the session's channel also carries the server's own
            # word ({"ended": true}, {"cancel": id}), which no client may speak.
            passed = {k: message[k] for k in ("jsonrpc", "id", "result", "error") if k in message}
            try:
                backend().publish(self.server.channel(f"session:{session.id}"), passed)
            except Exception:
                logger.exception("Could not pass on a client's response (session %s)", session.id)
                # The request waiting for it would never hear of it: the client learns so.
                unavailable = InternalError(
                    "The response could not be passed on to the request waiting for it"
                )
                return error_reply(None, unavailable, 503)
            return Reply(202)
        return self.request(message, session, incoming)

    def session(
        self, incoming: Incoming, request_id: Any = None
    ) -> tuple[sessions.SessionData | None, Reply | None]:
        """The request's live session, or the reply refusing it (400 without one, 404 unknown),
        which answers ``request_id`` (a POSTed request's, when it could be read)."""
        from .http import error_reply

        session_id = (incoming.headers.get("mcp-session-id") or "").strip()
        version = (incoming.headers.get("mcp-protocol-version") or versions.LEGACY_DEFAULT).strip()
        if version not in versions.LEGACY:
            # Said first: a client of a revision not served here learns why, session or none.
            return None, error_reply(
                request_id, InvalidRequest(f"Unsupported MCP-Protocol-Version: {version}"), 400
            )
        if not session_id:
            return None, error_reply(
                request_id, InvalidRequest("Missing Mcp-Session-Id header"), 400
            )
        session = sessions.store().get(session_id) if sessions.well_formed(session_id) else None
        if session is None or session.server != self.server.name:
            return None, error_reply(request_id, InvalidRequest("Session not found"), 404)
        if session.caller != caller_id(incoming.user):
            # A session belongs to the caller that began it: to anyone else who learnt its
            # id (or to the same client logged out) it does not exist.
            return None, error_reply(request_id, InvalidRequest("Session not found"), 404)
        said = (incoming.headers.get("mcp-protocol-version") or "").strip()
        if said and said != session.protocol_version:
            # The client must speak the revision it negotiated (a header left out is taken
            # for it, as clients of 2025-03-26 send none).
            mismatch = InvalidRequest(
                f"MCP-Protocol-Version {said} is not the session's ({session.protocol_version})"
            )
            return None, error_reply(request_id, mismatch, 400)
        return session, None

    def get(self, incoming: Incoming) -> Reply:
        from .http import Reply, error_reply, one_at_a_time, takes_stream

        session, refused = self.session(incoming)
        if session is None:
            return refused  # type: ignore[return-value]
        if one_at_a_time(incoming.request):
            # The stream would hold the server's one worker, and the session's next POST
            # (or anyone's) would wait behind it: no stream is offered, as the spec allows.
            refusal = InvalidRequest(
                "GET streams are not served: this server answers one request at a time"
            )
            return Reply(405, jsonrpc.error_response(None, refusal), {"Allow": "POST, DELETE"})
        if not takes_stream(incoming.headers):
            return error_reply(
                None, InvalidRequest("GET streams need Accept: text/event-stream"), 406
            )
        last = incoming.headers.get("last-event-id")
        if last:
            parsed = parse_event_id(last)
            if parsed is None or events_from(session.id, *parsed) is None:
                return error_reply(None, InvalidRequest("Unknown Last-Event-ID"), 400)
            return Reply(200, listen=Resume(self.server, session.id, parsed[0], parsed[1], None))
        admitted = self.endpoint.readmission(incoming.request, incoming.user)
        return Reply(200, listen=SessionStream(self, session, incoming.user, admitted))

    def delete(self, incoming: Incoming) -> Reply:
        from .http import Reply

        session, refused = self.session(incoming)
        if session is None:
            return refused  # type: ignore[return-value]
        sessions.store().end(session.id)
        # Open GET streams end, and calls waiting for the client's answers stop waiting.
        tell(self.server.channel(f"outbox:{session.id}"), {"ended": True})
        tell(self.server.channel(f"session:{session.id}"), {"ended": True})
        return Reply(200)

    # -- messages ------------------------------------------------------------------------

    def initialize(self, message: JSON, incoming: Incoming) -> Reply:
        from .http import Reply

        try:
            data, result = self.handshake(message.get("params") or {}, incoming.user)
        except ProtocolError as exc:
            return Reply(200, _error(message["id"], exc))
        sessions.store().create(data)
        return Reply(
            200, jsonrpc.result_response(message["id"], result), headers={"Mcp-Session-Id": data.id}
        )

    def handshake(self, params: JSON, user: Any) -> tuple[sessions.SessionData, JSON]:
        """A new session and the ``InitializeResult`` for ``initialize`` params.

        Raises:
            InvalidParams: the params lack capabilities, client info or a version.
        """
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        if not isinstance(capabilities, dict) or not isinstance(client_info, dict):
            raise InvalidParams("initialize needs 'capabilities' and 'clientInfo' objects")
        if not all(isinstance(client_info.get(key), str) for key in ("name", "version")):
            raise InvalidParams("initialize needs a 'clientInfo' with 'name' and 'version' strings")
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            raise InvalidParams("initialize needs a 'protocolVersion' string")
        version = legacy.negotiate(asked)
        data = sessions.SessionData(
            id=sessions.new_session_id(),
            server=self.server.name,
            protocol_version=version,
            client_info=client_info,
            capabilities=capabilities,
            caller=caller_id(user),
        )
        options = self.server.options
        result: JSON = {
            "protocolVersion": version,
            "capabilities": legacy.capabilities_for(
                version, self.engine.capabilities(self.server.catalog(), user)
            ),
            "serverInfo": legacy.server_info_for(version, options.server_info),
        }
        if options.instructions:
            result["instructions"] = options.instructions
        return data, result

    def notification(self, message: JSON, session: sessions.SessionData) -> None:
        method = message["method"]
        params = message.get("params") or {}
        if method == "notifications/initialized":
            sessions.store().update(session.id, initialized=True)
        elif method == "notifications/cancelled" and jsonrpc.valid_id(params.get("requestId")):
            # Only an id a request can have: ``True`` or ``1.0`` must not cancel request 1.
            cancels.add(session.id, params["requestId"])
            tell(self.server.channel(f"session:{session.id}"), {"cancel": params["requestId"]})

    def request(self, message: JSON, session: sessions.SessionData, incoming: Incoming) -> Reply:
        from .http import Call, Reply, takes_stream

        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        try:
            if (
                method == "resources/subscribe"
                and self.server.options.subscribe
                and self.hides(params.get("uri"), session, incoming.user)
            ):
                # Answered as for a URI that names nothing yet, and never subscribed to.
                return Reply(200, jsonrpc.result_response(request_id, {}))
            simple = self.session_method(method, params, session)
        except ProtocolError as exc:
            return Reply(200, _error(request_id, exc))
        if simple is not None:
            return Reply(200, jsonrpc.result_response(request_id, simple))
        if not self.engine.knows(method):
            return Reply(
                200, _error(request_id, MethodNotFound(f"Method not found: {jsonrpc.clip(method)}"))
            )
        bad = bad_meta(params)
        if bad is not None:
            return Reply(200, _error(request_id, bad))
        ctx = self.context(session, method, params, incoming.user, incoming.request)
        ctx.streams = takes_stream(incoming.headers)
        catalog = self.server.catalog()

        log = StreamLog(self.server, session.id, request_id)

        def run(ctx: RequestContext) -> tuple[int, JSON | None]:
            return 200, self.call(request_id, method, params, ctx, catalog, session, log)

        retry = conf.SSE_RETRY_MS if session.protocol_version >= "2025-11-25" else None
        return Reply(200, call=Call(run, ctx, request_id, log=log, retry_ms=retry))

    def hides(self, uri: Any, session: sessions.SessionData, user: Any) -> bool:
        """Whether a subscription to ``uri`` is one to a resource the caller may not read
        (any transport): it is then acknowledged, but never kept."""
        if not isinstance(uri, str):
            return False
        return bool(
            hidden_uris(
                self.server,
                [uri],
                lambda fresh: self.context(session, "resources/subscribe", {}, fresh),
                user,
            )
        )

    def context(
        self,
        session: sessions.SessionData,
        method: str,
        params: JSON,
        user: Any,
        request: Any = None,
        emit: Any = None,
    ) -> RequestContext:
        """The context of a request on this session (any transport)."""
        raw_meta = params.get("_meta")
        meta: JSON = raw_meta if isinstance(raw_meta, dict) else {}
        return RequestContext(
            method=method,
            params=params,
            protocol_version=session.protocol_version,
            client_capabilities=session.capabilities,
            client_info=session.client_info,
            user=user,
            request=request,
            server=self.server,
            session=session,
            emit=emit,
            # Without logging/setLevel the client hears every level, if the server logs.
            log_level=(session.log_level or "debug") if self.server.options.logging else None,
            progress_token=meta.get("progressToken"),
        )

    def session_method(
        self, method: str, params: JSON, session: sessions.SessionData
    ) -> JSON | None:
        """Serve the methods that only touch the session; ``None`` for anything else."""
        if method == "ping":
            return {}
        if method == "initialize":
            raise InvalidRequest("The session is already initialized")
        if method == "logging/setLevel":
            if not self.server.options.logging:
                raise no_logging()
            level = params.get("level")
            if level not in versions.LOG_LEVELS:
                raise InvalidParams(f"Unknown log level {level!r}")
            sessions.store().update(session.id, log_level=level)
            return {}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            if not self.server.options.subscribe:
                raise MethodNotFound(
                    f"Method not found: {jsonrpc.clip(method)} (subscriptions are off)"
                )
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise InvalidParams(f"{method} needs a 'uri' (a string)")
            on = method == "resources/subscribe"
            refused = long_uri(uri) if on else None
            if refused is not None:
                raise refused
            subscribed = sessions.store().subscribe(session.id, uri, on=on)
            if subscribed is None:
                raise InvalidRequest("The session has ended")
            if on and len(subscribed) > SUBSCRIPTIONS_MAX and uri not in session.subscriptions:
                # Taken back: the store has no limit of its own (a site may plug in its own).
                sessions.store().subscribe(session.id, uri, on=False)
                raise too_many(SUBSCRIPTIONS_MAX)
            tell(self.server.channel(f"outbox:{session.id}"), {"subscriptions": subscribed})
            return {}
        return None

    def batch(
        self, messages: list[Any], session: sessions.SessionData, incoming: Incoming
    ) -> Reply:
        """2025-03-26 batches: each message in turn, the responses as an array."""
        from .http import Reply, error_reply

        problem = batch_problem(session.protocol_version, messages)
        if problem is not None:
            return error_reply(None, problem, 400)
        answers: list[JSON] = []
        ids: set[tuple[bool, Any]] = set()
        for message in messages:
            refused, error = refused_in_batch(message, ids)
            if refused:
                if error is not None:
                    answers.append(error)
                continue
            reply = self.post(message, incoming)
            if reply.call is not None:
                reply.call.ctx.interactive = False
                # Its answer goes in the batch's array: no stream to resume, no events to keep.
                reply.call.log = None
                _status, final = reply.call.run(lambda event: None)
                if final.message is not None:  # None: cancelled, so not answered
                    answers.append(final.message)
            elif reply.body is not None:
                answers.append(reply.body)
        for answer in answers:
            # JSON-RPC 2.0: an entry whose request's id could not be read has the id null (in
            # an array, an entry without one is matched to no request).
            answer.setdefault("id", None)
        return Reply(200, answers) if answers else Reply(202)

    # -- a call, with its input loop -----------------------------------------------------

    def call(
        self,
        request_id: Any,
        method: str,
        params: JSON,
        ctx: RequestContext,
        catalog: Catalog,
        session: sessions.SessionData,
        log: StreamLog | None = None,
    ) -> JSON | None:
        """Run a request to its final message, asking the client itself for any input.

        ``None`` when the client cancelled it (or ended its session): the request is then
        answered with nothing, as the client no longer waits for an answer. Once the session
        has ended, its stream's ``log`` keeps nothing more (its events were deleted with it).
        """
        inbox: queue.Queue[JSON] = queue.Queue()

        def cancel() -> None:
            ctx.cancelled.set()
            inbox.put({})  # wakes a wait for the client's answers

        def sink(channel: str, message: JSON) -> None:
            if message.get("ended") and log is not None:
                log.silence()
            if message.get("cancel") == request_id or message.get("ended"):
                cancel()
            elif "id" in message:
                inbox.put(message)

        unsubscribe = backend().subscribe([self.server.channel(f"session:{session.id}")], sink)
        ended = cancels.running(session.id, request_id, cancel)
        started = time.perf_counter()
        rounds = 0
        try:
            gave_up = InternalError(f"Gave up after {MAX_ROUNDS} rounds of input")
            message = self.failed(request_id, method, gave_up)
            for rounds in range(MAX_ROUNDS + 1):
                outcome = self.endpoint.dispatch(method, params, ctx, catalog)
                # A session's client never follows tasks: their work is done in the call.
                assert not isinstance(outcome, TaskWork)
                if not isinstance(outcome, InputRequired):
                    result = legacy.result_for(session.protocol_version, method, outcome)
                    message = jsonrpc.result_response(request_id, result)
                    break
                if rounds == MAX_ROUNDS:
                    break  # not asked: its answer would never be used
                failure = self.ask(outcome, ctx, session, inbox)
                if failure is not None:
                    message = self.failed(request_id, method, failure)
                    break
        except ProtocolError as exc:
            message = _error(request_id, exc)
        except Exception as exc:
            self.endpoint.report(exc, ctx)
            message = _error(request_id, self.endpoint.engine.internal_error(exc, ctx))
        finally:
            ended()
            unsubscribe()
        # However far the request got, a client that cancelled it reads no response.
        withheld = ctx.is_cancelled
        if method in Engine.INPUT_METHODS:
            self.endpoint.audit(ctx, method, params, message, started, rounds, withheld)
        return None if withheld else message

    def ask(
        self,
        outcome: InputRequired,
        ctx: RequestContext,
        session: sessions.SessionData,
        inbox: queue.Queue[JSON],
    ) -> ProtocolError | None:
        """Send the input requests to the client and wait for every answer; a failure, as the
        error a request other than a tool call is answered with."""
        from .http import one_at_a_time

        # What the client could never give first: asking again otherwise would not help.
        unsaid = revision_problem(outcome.requests, session.protocol_version)
        if unsaid is not None:
            # Whatever the client declared, its revision has no words for what is asked.
            return InternalError(unsaid)
        missing = outcome.required_capabilities(session.capabilities, session.protocol_version)
        if missing:
            names = jsonrpc.capability_names(missing)
            return MissingClientCapability(
                missing, f"The client does not support {names}, which this request needs"
            )
        if not ctx.interactive:
            return InternalError(
                "Input cannot be asked for inside a batch; send the request on its own"
            )
        if not ctx.streams:
            return InternalError(
                "Input cannot be asked for: the request's Accept header takes no event stream, "
                "which the server's requests to the client are sent on"
            )
        if one_at_a_time(ctx.request):
            # The answer would come in a request of its own, which waits behind this one.
            return InternalError(
                "Input cannot be asked for: this server answers one request at a time, so the "
                "client's answer could not reach it"
            )
        pending: dict[str, tuple[str, str, JSON | None]] = {}
        for key, request in outcome.requests.items():
            request_id = f"{ctx.method}-{uuid.uuid4().hex[:16]}"
            pending[request_id] = (key, request["method"], form_schema(request))
            ctx.emit(
                jsonrpc.request(request_id, request["method"], self.wire_params(request, session))
            )
        failure = self._answers(ctx, pending, inbox)
        if failure is not None:
            # The client may still be asking its user: tell it the answer is no longer wanted.
            for request_id in pending:
                cancelled = {"requestId": request_id, "reason": failure.message}
                ctx.emit(jsonrpc.notification("notifications/cancelled", cancelled))
            return failure
        ctx.state = outcome.state
        return None

    def _answers(
        self,
        ctx: RequestContext,
        pending: dict[str, tuple[str, str, JSON | None]],
        inbox: queue.Queue[JSON],
    ) -> ProtocolError | None:
        """Wait for the answer to each ``pending`` request (its key, method and form's
        schema, by request id; each taken out as it comes); a failure, or ``None`` once
        ``ctx.input_responses`` has every answer."""
        answers: JSON = {}
        deadline = time.monotonic() + conf.INPUT_TIMEOUT_SECONDS
        _let_go_of_connections()
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return InternalError(_NO_ANSWER)
            try:
                reply = inbox.get(timeout=remaining)
            except queue.Empty:
                return InternalError(_NO_ANSWER)
            if ctx.is_cancelled:
                return InternalError("The request was cancelled")
            reply_id = str(reply.get("id"))
            if reply_id not in pending:
                continue
            key, method, form = pending.pop(reply_id)
            if "error" in reply:
                error = reply.get("error") or {}
                return InternalError(
                    f"The client refused the request: {error.get('message', 'error')}"
                )
            try:
                answers[key] = kept_answer(method, reply.get("result"), form)
            except ValueError as exc:
                return InvalidParams(f"The client's answer to {method} is malformed: {exc}")
        ctx.input_responses = answers
        return None

    def wire_params(self, request: JSON, session: sessions.SessionData) -> JSON:
        """An input request's params as this session's revision spells them."""
        params = dict(request.get("params") or {})
        if request["method"] == "elicitation/create":
            if session.protocol_version < "2025-11-25":
                params.pop("mode", None)
            elif params.get("mode") == "url":
                params.setdefault("elicitationId", uuid.uuid4().hex)
        return params

    def failed(self, request_id: Any, method: str, error: ProtocolError) -> JSON:
        """A request that could not get its input: a tool's error result, else ``error``."""
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": error.message}], "isError": True}
            return jsonrpc.result_response(request_id, result)
        return jsonrpc.error_response(request_id, error)


#: The one revision with JSON-RPC batches.
BATCH_VERSION = "2025-03-26"


def batch_problem(version: str | None, messages: list[Any]) -> InvalidRequest | None:
    """Why a session of ``version`` (``None``: none yet) is not served the batch ``messages``
    at all, if it is not (any transport)."""
    if version != BATCH_VERSION:
        return InvalidRequest(f"Batches are accepted only on {BATCH_VERSION}")
    if not messages:
        return InvalidRequest("Empty batch")
    return None


def refused_in_batch(message: Any, ids: set[tuple[bool, Any]]) -> tuple[bool, JSON | None]:
    """Whether a batch refuses ``message`` rather than serve it, and then its answer (``None``
    for an initialize notification, which nothing answers): a request id the batch used
    already, a nested batch, ``initialize``. ``ids`` collects the batch's request ids."""
    if _repeated_id(message, ids):
        # Two answers with one id could not be told apart: the first one runs.
        return True, _error(message["id"], InvalidRequest("Request id used twice in the batch"))
    if isinstance(message, list):
        return True, _error(None, InvalidRequest("Nested batch"))
    if isinstance(message, dict) and message.get("method") == "initialize":
        if "id" not in message:  # a notification is never answered, even a wrong one
            return True, None
        request_id = message["id"] if jsonrpc.valid_id(message["id"]) else None
        return True, _error(request_id, InvalidRequest("initialize cannot be batched"))
    return False, None


def _repeated_id(message: Any, ids: set[tuple[bool, Any]]) -> bool:
    """Whether ``message`` is a request whose id one before it in the batch had (else the id
    is noted); an id of a type no request may have is left to the request's own checks."""
    if not isinstance(message, dict) or "method" not in message:
        return False
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return False
    key = (isinstance(request_id, str), request_id)
    if key in ids:
        return True
    ids.add(key)
    return False
