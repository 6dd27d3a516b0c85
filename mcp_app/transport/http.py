"""Streamable HTTP: one POST's bytes and headers in, a JSON reply or an event stream out."""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.db import transaction

from .. import audit, tasks
from .. import state as request_state
from ..auth import admit, readmitted
from ..conf import conf, django_setting
from ..events import StreamLog
from ..input import InputRequired, checked_answers, expected
from ..protocol import jsonrpc, modern, versions
from ..protocol import tasks as task_wire
from ..protocol.context import RequestContext, discard
from ..protocol.engine import Engine, Outcome, as_caller
from ..protocol.jsonrpc import (
    InvalidParams,
    InvalidRequest,
    MissingClientCapability,
    ParseError,
    ProtocolError,
    json_depth,
)
from ..protocol.tasks import TaskWork
from ..registry import Catalog, ToolDef
from . import sse
from .legacy import LegacyEndpoint, Resume, SessionStream, is_legacy
from .listen import Listen, hidden_uris
from .sse import Event

if TYPE_CHECKING:
    from ..server import Server

logger = logging.getLogger("mcp_app")
#: Where Django logs a request it refuses for the site's safety (a disallowed Host).
security_logger = logging.getLogger("django.security.mcp_app")
JSON = dict[str, Any]
Emit = Callable[[JSON], None]

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class Departure:
    """Tells a request answered in one piece (no stream) that its client went away: on the
    2026-07-28 wire that cancels it, as closing a stream does."""

    __slots__ = ("ctx", "gone")

    def __init__(self) -> None:
        self.gone = False
        self.ctx: RequestContext | None = None

    def left(self) -> None:
        """The client went away (said where the disconnect is heard)."""
        self.gone = True
        ctx = self.ctx
        if ctx is not None:
            ctx.cancelled.set()

    def follow(self, ctx: RequestContext) -> None:
        """``ctx`` is the request's (said in its thread): cancel it once the client leaves.

        Each side writes, then reads what the other writes: one of them sees both.
        """
        self.ctx = ctx
        if self.gone:
            ctx.cancelled.set()


@dataclass
class Incoming:
    """What the transport needs of an HTTP request, whatever framework received it."""

    method: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    host: str = ""
    scheme: str = "http"
    user: Any = None
    request: Any = None
    departure: Departure | None = None


@dataclass
class Reply:
    """What to answer: a status with a JSON body, or a call to run as a stream."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    call: Call | None = None
    listen: Listen | SessionStream | Resume | None = None
    #: The status when ``body`` is a response JSON cannot carry (NaN, say), sent as an internal
    #: error instead; ``None`` keeps ``status`` (an initialize-era answer, always 200).
    failed_status: int | None = None
    #: ``body`` as sent, once encoded (``views.reply_content``).
    content: bytes | None = None


class Call:
    """A request whose notifications may stream before its final message.

    ``run(emit)`` returns ``(status, final_event)``; every ``Event`` that ``emit`` receives
    goes out first; a final event without a message (a cancelled request) ends the stream
    unanswered. The view decides from the first thing produced whether to answer with
    plain JSON (nothing was emitted) or with an event stream. With a ``log`` the stream is
    resumable: its events are numbered and kept, and the handler may let go of the connection
    (``context.close_stream()``) while it goes on.
    """

    def __init__(
        self,
        run: Callable[[RequestContext], tuple[int, JSON | None]],
        ctx: RequestContext,
        request_id: Any = None,
        log: StreamLog | None = None,
        retry_ms: int | None = None,
        failed_status: int | None = None,
    ) -> None:
        self._run = run
        self.ctx = ctx
        self.request_id = request_id
        self.log = log
        self.retry_ms = retry_ms
        #: As ``Reply.failed_status``, for the final message when it goes as plain JSON.
        self.failed_status = failed_status
        self.streaming = False

    def event(self, message: JSON) -> Event:
        self.streaming = True
        return Event(message, self.log.append(message) if self.log is not None else None)

    def run(self, emit: Callable[[Event], None]) -> tuple[int, Event]:
        if not self.ctx.streams:
            # Answered in JSON: what would have gone before the answer is left out.
            self.ctx.emit = discard
        else:
            self.ctx.emit = lambda message: emit(self.event(message))
        if self.ctx.streams and self.log is not None and self.retry_ms is not None:
            # Only a stream that opened with a priming event can be let go of and resumed.

            def close() -> None:
                self.streaming = True
                assert self.log is not None
                self.log.open()
                emit(Event(close=True))

            self.ctx.close_hook = close
        try:
            status, final = self._run(self.ctx)
        finally:
            if self.log is not None:
                self.log.release()
        if final is None:
            # Cancelled by the client: no response. A stream the client has an event id of
            # (it streamed, or opens with a priming event) records where it ends, so a
            # client resuming it does not wait for one.
            if (
                self.ctx.streams
                and self.log is not None
                and (self.streaming or self.retry_ms is not None)
            ):
                try:
                    self.log.end()
                except Exception:
                    logger.exception("Could not keep the end of a cancelled request's stream")
            return status, Event()
        return status, self.event(final) if self.streaming else Event(final)

    def priming(self) -> bytes | None:
        """The first event of a resumable stream: an id to resume from, and the retry delay."""
        if self.log is None or self.retry_ms is None:
            return None
        return sse.priming(self.log.priming_id(), self.retry_ms)

    def cancel(self) -> None:
        self.ctx.cancelled.set()


def one_at_a_time(request: Any) -> bool:
    """Whether the WSGI server that received ``request`` answers one request at a time in all
    (one process, one thread: gunicorn's sync worker alone, for one). There a stream would
    hold the only worker, and a client's answer to a call, a request of its own, would wait
    behind the call for ever."""
    meta = getattr(request, "META", None) or {}
    alone = meta.get("wsgi.multithread") is False and meta.get("wsgi.multiprocess") is False
    return alone and not _green()


def _green() -> bool:
    """Whether gevent or eventlet patched threading: a server of one process and one thread
    (uWSGI's ``--gevent``, say) then serves many requests at once on green threads, which the
    WSGI flags do not tell."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        return True
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and bool(patcher.is_monkey_patched("thread"))


def error_reply(request_id: Any, error: ProtocolError, status: int | None = None) -> Reply:
    return Reply(status or error.http_status or 200, jsonrpc.error_response(request_id, error))


def arguments_too_large(message: Any) -> bool:
    """Whether a ``tools/call``'s arguments exceed ``MAX_ARGUMENTS_BYTES`` as JSON."""
    messages = message if isinstance(message, list) else [message]
    for item in messages:
        params = item.get("params") if isinstance(item, dict) else None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        if arguments is not None:
            # In UTF-8, as the body holds them (not each non-ASCII character as a \u escape).
            dumped = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
            size = len(dumped.encode("utf-8", "surrogatepass"))
            if size > conf.MAX_ARGUMENTS_BYTES:
                return True
    return False


def over_limits(message: Any, body: bytes | str) -> ProtocolError | None:
    """The error answering a message (parsed from ``body``) nested deeper than
    ``MAX_JSON_DEPTH`` (``InvalidRequest``) or with tool arguments over
    ``MAX_ARGUMENTS_BYTES`` (``InvalidParams``); ``None`` if it is within both. Any transport:
    the caller chooses the id and, over HTTP, the status."""
    # Counted in UTF-8 bytes, as an HTTP body is, whichever transport read the message.
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    depth_limit = conf.MAX_JSON_DEPTH
    # Nesting needs an opening bracket per level, so a body with few can skip the walk.
    if (
        data.count(b"[") + data.count(b"{") > depth_limit
        and json_depth(message, depth_limit) > depth_limit
    ):
        return InvalidRequest(f"JSON nested deeper than {depth_limit} levels")
    if len(data) > conf.MAX_ARGUMENTS_BYTES and arguments_too_large(message):
        return InvalidParams(f"Tool arguments over {conf.MAX_ARGUMENTS_BYTES} bytes")
    return None


def _of_a_session(headers: Mapping[str, str]) -> bool:
    """Whether a GET or DELETE is an initialize-era client's, for its session."""
    version = (headers.get("mcp-protocol-version") or "").strip()
    # A client of 2026-07-28 has no session, whatever id it sends: not served. An
    # initialize-era client that lost its session id is told so (400), not that the method
    # is not served.
    return bool(headers.get("mcp-session-id") and version != versions.MODERN) or (
        version in versions.LEGACY
    )


def _any_host() -> bool:
    return "*" in django_setting("ALLOWED_HOSTS")


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def accepted(headers: Mapping[str, str]) -> tuple[bool, bool]:
    """Whether the request's ``Accept`` takes a JSON answer, and an event stream: each type
    weighed by the most specific range that matches it (RFC 9110, 12.5.1), ``q=0`` refusing it.
    A request without the header takes either."""
    accept = headers.get("accept")
    if accept is None or not accept.strip():
        return True, True
    return _takes(accept)


# Clients send the same few values again and again; the cache is bounded, whatever they send.
@functools.lru_cache(maxsize=256)
def _takes(accept: str) -> tuple[bool, bool]:
    ranges: dict[str, float] = {}
    for part in accept.split(","):
        media, *parameters = part.split(";")
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                quality = _weight(value, quality)
        media = media.strip().lower()
        # Of a range named twice, the better weight.
        ranges[media] = max(quality, ranges.get(media, quality))

    def takes(kind: str) -> bool:
        for media in (kind, kind.split("/")[0] + "/*", "*/*"):
            if media in ranges:
                return ranges[media] > 0
        return False

    return takes("application/json"), takes("text/event-stream")


def _weight(value: str, otherwise: float) -> float:
    try:
        return float(value.strip())
    except ValueError:
        return otherwise


def takes_stream(headers: Mapping[str, str]) -> bool:
    """Whether the answer may be an event stream: the spec has clients accept one on a POST,
    but a client that takes JSON only is answered in JSON (its notifications left out)."""
    return accepted(headers)[1]


def unfit_post(headers: Mapping[str, str]) -> Reply | None:
    """406 for a POST whose ``Accept`` takes neither JSON nor an event stream, 415 for one whose
    body is declared as something other than JSON; ``None`` if neither (a header left out is
    not held against the client)."""
    if not any(accepted(headers)):
        refusal = InvalidRequest(
            "Not Acceptable: the answer is application/json or text/event-stream"
        )
        return error_reply(None, refusal, 406)
    content_type = headers.get("content-type")
    if content_type is not None and content_type.strip():
        media = content_type.split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            refusal = InvalidRequest(
                f"Unsupported Media Type: {jsonrpc.clip(media)}; send application/json"
            )
            return error_reply(None, refusal, 415)
    return None


class Endpoint:
    """Serves one ``Server`` over streamable HTTP."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.engine: Engine = server.engine
        self.legacy = LegacyEndpoint(self)

    # -- entry ---------------------------------------------------------------------------

    def handle(self, incoming: Incoming) -> Reply:
        """Answer one HTTP request; never raises for anything the client sent."""
        if not self.origin_allowed(incoming):
            security_logger.warning(
                "Refused a request from Origin %r; if browsers on that origin should call the "
                "endpoint, add it to MCP_APP['ALLOWED_ORIGINS']",
                jsonrpc.clip(incoming.headers.get("origin") or ""),
            )
            return error_reply(None, InvalidRequest("Origin not allowed"), 403)
        if incoming.request is not None:
            user, refusal = admit(incoming.request, self.server.name)
            if refusal is not None:
                return Reply(
                    refusal.status,
                    jsonrpc.error_response(None, InvalidRequest(refusal.message)),
                    headers=refusal.headers,
                )
            incoming.user = user
        if incoming.method in ("GET", "DELETE") and _of_a_session(incoming.headers):
            if incoming.method == "GET":
                return self.legacy.get(incoming)
            return self.legacy.delete(incoming)
        if incoming.method != "POST":
            return Reply(
                405,
                jsonrpc.error_response(
                    None, InvalidRequest(f"{incoming.method} is not served here; POST MCP messages")
                ),
                # GET and DELETE serve initialize-era sessions (with their header).
                headers={"Allow": "GET, POST, DELETE"},
            )
        unfit = unfit_post(incoming.headers)
        if unfit is not None:
            return unfit
        if len(incoming.body) > conf.MAX_BODY_BYTES:
            return error_reply(
                None, InvalidRequest(f"Request body over {conf.MAX_BODY_BYTES} bytes"), 413
            )
        try:
            message = jsonrpc.loads(incoming.body)
        except ParseError as exc:
            return error_reply(None, exc)
        except RecursionError:
            return error_reply(None, InvalidRequest("JSON nested too deeply"), 400)
        refused = over_limits(message, incoming.body)
        if refused is not None:
            # A request's id; a response's is the server's own numbering, not the client's.
            request_id = message["id"] if jsonrpc.classify(message) == "request" else None
            status = 413 if isinstance(refused, InvalidParams) else 400
            return error_reply(request_id, refused, status)
        if is_legacy(message, incoming.headers):
            return self.legacy.post(message, incoming)
        return self.stateless(message, incoming)

    def origin_allowed(self, incoming: Incoming) -> bool:
        """Same-origin, allow-listed, or local-to-local requests; no ``Origin`` is allowed."""
        origin = incoming.headers.get("origin")
        if not origin:
            return True
        allowed = conf.ALLOWED_ORIGINS
        if "*" in allowed or origin in allowed:
            return True
        try:
            parts = urlsplit(origin)
            origin_host = parts.hostname or ""
        except ValueError:  # not a URL (an unclosed IPv6 bracket, a bad port)
            return False
        if not parts.scheme or not parts.netloc:
            return False
        if parts.netloc == incoming.host and not _any_host():
            # Its own origin; unless any Host is let in, when a page whose name was rebound
            # to this server (DNS rebinding) would look the same.
            return True
        # A server bound to localhost serves browser tools on other local ports.
        return (origin_host in LOCAL_HOSTS or f"[{origin_host}]" in LOCAL_HOSTS) and _host_name(
            incoming.host
        ) in LOCAL_HOSTS

    # -- the stateless wire --------------------------------------------------------------

    def stateless(self, message: Any, incoming: Incoming) -> Reply:
        kind = jsonrpc.classify(message)
        request_id = message.get("id") if isinstance(message, dict) else None
        if kind == "invalid":
            rid = request_id if jsonrpc.valid_id(request_id) else None
            return error_reply(rid, InvalidRequest("Invalid Request: not a JSON-RPC 2.0 request"))
        if kind == "notification":
            return Reply(202)
        if kind == "response":
            return error_reply(None, InvalidRequest("The stateless wire takes no responses"))
        catalog = self.server.catalog()
        try:
            req = modern.parse(
                message,
                incoming.headers,
                self.engine.knows,
                self.tool_finder(catalog, incoming.user),
                logs=self.server.options.logging,
            )
        except ProtocolError as exc:
            return error_reply(request_id, exc)
        ctx = self.context(req, incoming.user, incoming.request)
        ctx.streams = takes_stream(incoming.headers)
        if req.method == "server/discover":
            discovered = jsonrpc.result_response(req.id, self.discover(catalog, ctx.user))
            return Reply(200, discovered, failed_status=500)
        if req.method == "subscriptions/listen":
            if not ctx.streams:
                refusal = InvalidRequest(
                    "subscriptions/listen answers with an event stream, which the request's "
                    "Accept header does not take"
                )
                return error_reply(req.id, refusal, 406)
            if one_at_a_time(incoming.request):
                # The stream would hold the server's one worker for as long as the client
                # listens, and every other request would wait behind it.
                refusal = InvalidRequest(
                    "subscriptions/listen is not served: this server answers one request at a time"
                )
                return error_reply(req.id, refusal)
            try:
                return Reply(200, listen=self.listen(req, catalog, incoming.user, incoming.request))
            except ProtocolError as exc:
                return error_reply(req.id, exc)

        def run(ctx: RequestContext) -> tuple[int, JSON | None]:
            return self.modern_call(req, ctx, catalog)

        if ctx.streams and (req.progress_token is not None or req.log_level is not None):
            return Reply(200, call=Call(run, ctx, req.id, failed_status=500))
        # Not a Call: only its client leaving cancels it (then there is no message to send).
        if incoming.departure is not None:
            incoming.departure.follow(ctx)
        status, body = run(ctx)
        # As a -32603 the call raised would be: an internal error is a 500 on this revision.
        return Reply(status, body, failed_status=500)

    def tool_finder(self, catalog: Catalog, user: Any) -> Callable[[str], ToolDef | None]:
        """Finds a tool by name as ``user`` sees the catalog: a hidden one is not there."""
        if not catalog.restricted:
            return catalog.tool_map.get
        caller = as_caller(user)

        def find(name: str) -> ToolDef | None:
            tool = catalog.tool_map.get(name)
            if tool is None or not tool.header_params:
                return tool  # only its header parameters are looked at
            visible: ToolDef | None = self.engine.visible(tool, caller)
            return visible

        return find

    def context(
        self, req: modern.ModernRequest, user: Any, request: Any = None, emit: Any = None
    ) -> RequestContext:
        """The context of a stateless request (any transport)."""
        return RequestContext(
            method=req.method,
            params=req.params,
            protocol_version=req.version,
            client_capabilities=req.capabilities,
            client_info=req.client_info,
            user=user,
            request=request,
            server=self.server,
            emit=emit,
            log_level=req.log_level,
            progress_token=req.progress_token,
        )

    def listen(
        self, req: modern.ModernRequest, catalog: Catalog, user: Any = None, request: Any = None
    ) -> Listen:
        """The stream a ``subscriptions/listen`` request opens.

        Raises:
            InvalidParams: the filter is malformed.
            MissingClientCapability: it asks for task notifications without the extension.
        """
        options = self.server.options
        own_tasks = lapses = task_states = None
        if task_wire.client_follows_tasks(req.capabilities):
            caller = request_state.caller_id(user)

            def own_tasks(task_ids: list[str]) -> list[str]:
                return tasks.owned(self.server.name, caller, task_ids)

            def lapses(task_ids: list[str]) -> None:
                tasks.fail_lapsed(self, task_ids)

            def task_states(task_ids: list[str]) -> list[JSON]:
                return tasks.states(self.server.name, caller, task_ids)

        return Listen(
            self.server,
            req.id,
            req.params.get("notifications"),
            self.engine.capabilities(catalog, user),
            lists_may_change=options.list_changed,
            own_tasks=own_tasks,
            hides=lambda uris: hidden_uris(
                self.server, uris, lambda fresh: self.context(req, fresh), user
            ),
            lapses=lapses,
            task_states=task_states,
            admitted=self.readmission(request, user),
        )

    def readmission(self, request: Any, user: Any) -> Callable[[], bool] | None:
        """What a stream opened by ``request`` asks at each renewal: whether the request would
        still be let in (none over stdio, whose process has one caller)."""
        if request is None:
            return None
        if (
            conf.AUTHENTICATION_CLASSES is None
            and not conf.PERMISSION_CLASSES
            and not getattr(user, "is_authenticated", False)
        ):
            return None  # an anonymous caller of an open endpoint: nothing could change
        return lambda: readmitted(request, self.server.name, user)

    def discover(self, catalog: Catalog, user: Any) -> JSON:
        """The ``server/discover`` result for ``user``: capabilities from what it may use."""
        options = self.server.options
        result: JSON = {
            "supportedVersions": list(modern.SUPPORTED),
            "capabilities": self.engine.capabilities(catalog, user),
        }
        if options.instructions:
            result["instructions"] = options.instructions
        return self.finish("server/discover", result, catalog)

    def finish(self, method: str, result: JSON, catalog: Catalog) -> JSON:
        options = self.server.options
        # What a caller sees depends on who asks once any definition is restricted.
        scope = "private" if catalog.restricted else options.cache_scope
        return modern.finish(method, result, options.server_info, options.ttl_ms, scope)

    def modern_call(
        self, req: modern.ModernRequest, ctx: RequestContext, catalog: Catalog
    ) -> tuple[int, JSON | None]:
        """Run one stateless request to its final message and HTTP status.

        The message is ``None`` when the client cancelled the request (it went away, or on
        stdio said so): nothing answers it then, except the task a tool started, whose id the
        client needs to follow or cancel it.
        """
        started = time.perf_counter()
        audited = req.method in Engine.INPUT_METHODS
        task_started = False
        try:
            if req.method in task_wire.METHODS:
                if not self.engine.offers_tasks(catalog, ctx) and not tasks.keeps_any(self, ctx):
                    # The extension is not advertised, and the caller has no task left from
                    # when it was: its methods are not served.
                    raise jsonrpc.MethodNotFound(f"Method not found: {jsonrpc.clip(req.method)}")
                result = self.finish(
                    req.method, tasks.handle(self, req.method, req.params, ctx, catalog), catalog
                )
                return 200, jsonrpc.result_response(req.id, result)
            if audited:
                self._read_input(req, ctx)
            outcome = self.dispatch(req.method, req.params, ctx, catalog)
            if isinstance(outcome, TaskWork):
                # Audited when the task ends, as one call.
                audited = False
                task_started = True
                result = modern.stamp(
                    tasks.start(self, ctx.definition, outcome, ctx, req.params),
                    self.server.options.server_info,
                )
            elif isinstance(outcome, InputRequired):
                result = self.input_required(req, ctx, outcome)
            else:
                result = self.finish(req.method, outcome, catalog)
                if req.method == "resources/read" and (
                    "requestState" in req.params or "inputResponses" in req.params
                ):
                    # Content that took input is particular to this dialogue and this caller.
                    result["ttlMs"], result["cacheScope"] = 0, "private"
            status, message = 200, jsonrpc.result_response(req.id, result)
        except ProtocolError as exc:
            status, message = exc.http_status or 200, jsonrpc.error_response(req.id, exc)
        except Exception as exc:  # a handler bug: report it as Django would, answer -32603
            self.report(exc, ctx)
            status = 500
            message = jsonrpc.error_response(req.id, self.engine.internal_error(exc, ctx))
        withheld = ctx.is_cancelled and not task_started
        if audited:
            rounds = 1 if "inputResponses" in req.params else 0
            self.audit(ctx, req.method, req.params, message, started, rounds, withheld)
        return status, None if withheld else message

    def audit(
        self,
        ctx: RequestContext,
        method: str,
        params: Mapping[str, Any],
        message: JSON,
        started: float,
        rounds: int,
        cancelled: bool = False,
    ) -> None:
        """Record a finished tool call, resource read or prompt get in the audit trail.

        ``cancelled``: the client cancelled it, so ``message`` was not sent; the row says
        ``cancelled``, and its error text what the handler had answered.
        """
        if not conf.AUDIT:
            return
        result = message.get("result")
        error = message.get("error")
        if message.get("cancelled"):
            outcome, text = "cancelled", ""
        elif error is not None:
            outcome, text = "failed", str(error.get("message", ""))
        elif isinstance(result, dict) and result.get("resultType") == "input_required":
            outcome, text = "input_required", ""
        elif isinstance(result, dict) and result.get("isError"):
            blocks = result.get("content") or []
            outcome = "error"
            text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        else:
            outcome, text = "complete", ""
        if cancelled and outcome != "cancelled":
            # The work may have been done all the same: the row says how far it got.
            text = f"Cancelled by the client; not sent: {outcome}" + (f": {text}" if text else "")
            outcome = "cancelled"
        name = params.get("uri") if method == "resources/read" else params.get("name")
        audit.record(
            audit.Record(
                server=self.server.name,
                method=method,
                name=str(name),
                era=ctx.era,
                user=ctx.user,
                arguments=params.get("arguments"),
                duration_ms=(time.perf_counter() - started) * 1000,
                outcome=outcome,
                error=text,
                rounds=rounds,
            )
        )

    def _read_input(self, req: modern.ModernRequest, ctx: RequestContext) -> None:
        responses = req.params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise InvalidParams("inputResponses must be an object keyed by input request")
        # Answers are to the requests a signed state names; with no state (answers sent up
        # front), each is taken as the kind of result it is shaped as.
        asked: dict[str, str] | None = None
        forms: dict[str, Any] = {}
        if "requestState" in req.params:
            ctx.state, asked, forms = request_state.verified(
                req.params["requestState"],
                method=req.method,
                params=req.params,
                caller=request_state.caller_id(ctx.user),
                server=self.server.name,
            )
        # A handler reads an answer as the result of what it asked: a malformed one is the
        # client's error, not the handler's failure.
        ctx.input_responses = checked_answers(responses or {}, asked, forms)

    def input_required(
        self, req: modern.ModernRequest, ctx: RequestContext, outcome: InputRequired
    ) -> JSON:
        missing = outcome.required_capabilities(ctx.client_capabilities)
        if missing:
            raise MissingClientCapability(missing)
        result: JSON = {"resultType": "input_required"}
        asked, forms = expected(outcome.requests)
        if outcome.requests:
            result["inputRequests"] = outcome.requests
        result["requestState"] = request_state.sign(
            outcome.state,
            method=req.method,
            params=req.params,
            caller=request_state.caller_id(ctx.user),
            server=self.server.name,
            asked=asked,
            forms=forms,
        )
        result["_meta"] = {versions.META_SERVER_INFO: self.server.options.server_info}
        return result

    def dispatch(
        self, method: str, params: Mapping[str, Any], ctx: RequestContext, catalog: Catalog
    ) -> Outcome:
        """Run the engine; for handler methods, inside a transaction undone unless it completes."""
        if method not in Engine.INPUT_METHODS:
            return self.engine.handle(method, params, ctx, catalog)
        return self.atomically(lambda: self.engine.handle(method, params, ctx, catalog))

    def atomically(self, attempt: Callable[[], Outcome]) -> Outcome:
        """``attempt()`` in a transaction (``ATOMIC``) undone when it asks for input or fails."""
        if not conf.ATOMIC:
            return attempt()
        holder: list[Outcome] = []
        try:
            with transaction.atomic(using=conf.DATABASE_ALIAS):
                outcome = attempt()
                holder.append(outcome)
                if isinstance(outcome, InputRequired) or (
                    isinstance(outcome, dict) and outcome.get("isError")
                ):
                    raise _Undo
        except _Undo:
            pass
        return holder[0]

    def report(self, exc: BaseException, ctx: RequestContext) -> None:
        from django.core.signals import got_request_exception

        logger.error("Error serving %s", ctx.method, exc_info=exc)
        if ctx.request is not None:
            got_request_exception.send(sender=type(self), request=ctx.request)


class _Undo(Exception):
    """Rolls back an attempt that did not complete."""
