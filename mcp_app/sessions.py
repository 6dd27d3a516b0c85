"""Initialize-era session stores: the database by default, or Django's cache framework."""

from __future__ import annotations

import contextlib
import functools
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

from django.db import router, transaction
from django.utils import timezone

from .conf import conf
from .protocol.modern import visible_ascii
from .recent import Recent
from .transport.connections import KEYS_PER_DELETE

JSON = dict[str, Any]

#: Longest a change of a cached session waits for another one to end.
CACHE_LOCK_SECONDS = 2.0


@dataclass
class SessionData:
    """What the server remembers of one initialize-era session."""

    id: str
    server: str
    protocol_version: str
    client_info: JSON = field(default_factory=dict)
    capabilities: JSON = field(default_factory=dict)
    log_level: str = ""
    subscriptions: list[str] = field(default_factory=list)
    caller: str = "anonymous"
    initialized: bool = False


def new_session_id() -> str:
    """256 random bits as URL-safe text: visible ASCII only, as the transport requires."""
    return secrets.token_urlsafe(32)


#: Most characters a session id is looked up with (the length of ``Session.id``); this
#: server's are 43.
SESSION_ID_MAX = 64


def well_formed(session_id: str) -> bool:
    """Whether ``session_id`` could name a session: visible ASCII, as the transport requires.

    Anything else is not looked up (PostgreSQL refuses a NUL in any query).
    """
    return len(session_id) <= SESSION_ID_MAX and visible_ascii(session_id)


class SessionStore:
    """Where sessions live so that every worker process finds them."""

    def create(self, data: SessionData) -> None:
        raise NotImplementedError

    def get(self, session_id: str) -> SessionData | None:
        """The live session, its idle clock restarted; ``None`` if unknown, ended or expired."""
        raise NotImplementedError

    def exists(self, session_id: str) -> bool:
        """Whether the session is live, without restarting its idle clock (this fallback, for
        a store of a site's own, restarts it)."""
        return self.get(session_id) is not None

    def update(self, session_id: str, **changes: Any) -> None:
        raise NotImplementedError

    def end(self, session_id: str) -> bool:
        """End the session; whether it existed."""
        raise NotImplementedError

    def subscribe(self, session_id: str, uri: str, on: bool) -> list[str] | None:
        """Add (``on``) or remove ``uri`` from the session's subscriptions; the new list, or
        ``None`` if the session is gone.

        The stores here make it one change that concurrent ones do not undo; this fallback,
        for a store of a site's own, reads then writes.
        """
        data = self.get(session_id)
        if data is None:
            return None
        subscriptions = _subscribed(data.subscriptions, uri, on)
        self.update(session_id, subscriptions=subscriptions)
        return subscriptions

    def clean(self) -> int:
        """Remove expired sessions; how many went."""
        return 0


def _subscribed(subscriptions: list[str], uri: str, on: bool) -> list[str]:
    kept = [u for u in subscriptions if u != uri]
    return [*kept, uri] if on else kept


#: Most expired sessions deleted by one query of ``clean()``.
CLEAN_BATCH = KEYS_PER_DELETE

#: Where a change to a session (an update, its end) is announced to the other processes.
CHANNEL = "mcp:sessions"


def _copy(data: SessionData) -> SessionData:
    return replace(data, subscriptions=list(data.subscriptions))


#: Sessions remembered at most; past it the memory starts again empty.
_RECENT_MAX = 10_000
#: The sessions this process served lately, and when their idle clock was last written
#: (``time.monotonic()``), so a busy session costs no query per call.
_recent: Recent[str, tuple[SessionData, float]] = Recent(limit=_RECENT_MAX)


def _changed(session_id: str) -> None:
    """Forget the session here, and tell the other processes to."""
    from .delivery import tell

    _recent.forget(session_id)
    tell(CHANNEL, {"session": session_id})


def forget_sessions() -> None:
    """Make the next call of every session read it from its store again."""
    _recent.forget()


class DatabaseSessionStore(SessionStore):
    """Sessions as rows of ``mcp_app.Session``."""

    def _idle_cutoff(self) -> Any:
        return timezone.now() - timedelta(seconds=conf.SESSION_IDLE_SECONDS)

    @staticmethod
    def _touch_every() -> float:
        # The idle clock needs no finer grain than a tenth of the idle time (within a minute).
        return min(60.0, conf.SESSION_IDLE_SECONDS / 10)

    def create(self, data: SessionData) -> None:
        from .models import Session

        Session.objects.create(last_seen=timezone.now(), **asdict(data))

    def get(self, session_id: str) -> SessionData | None:
        from .models import Session

        recent = _recent.get(session_id)
        if recent is not None:
            data, written = recent
            if time.monotonic() - written > self._touch_every():
                self._restart_clock(session_id, data)
            return _copy(data)
        _recent.watch(CHANNEL, lambda message: str(message.get("session", "")))
        epoch = _recent.epoch()
        now = timezone.now()
        row = Session.objects.filter(pk=session_id, last_seen__gte=self._idle_cutoff()).first()
        if row is None:
            return None
        age = (now - row.last_seen).total_seconds()
        written = time.monotonic() - age
        if age > self._touch_every():
            Session.objects.filter(pk=session_id).update(last_seen=now)
            written = time.monotonic()
        data = SessionData(
            id=row.id,
            server=row.server,
            protocol_version=row.protocol_version,
            client_info=row.client_info,
            capabilities=row.capabilities,
            log_level=row.log_level,
            subscriptions=list(row.subscriptions),
            caller=row.caller,
            initialized=row.initialized,
        )
        _recent.store(session_id, (_copy(data), written), epoch)
        return data

    def exists(self, session_id: str) -> bool:
        from .models import Session

        return Session.objects.filter(pk=session_id, last_seen__gte=self._idle_cutoff()).exists()

    def _restart_clock(self, session_id: str, data: SessionData) -> None:
        from .models import Session

        _recent.replace(session_id, (data, time.monotonic()))
        if not Session.objects.filter(pk=session_id).update(last_seen=timezone.now()):
            # Gone meanwhile (ended elsewhere, cleaned): the next call finds out.
            _recent.forget(session_id)

    def update(self, session_id: str, **changes: Any) -> None:
        from .models import Session

        Session.objects.filter(pk=session_id).update(**changes)
        _changed(session_id)

    def subscribe(self, session_id: str, uri: str, on: bool) -> list[str] | None:
        from .models import Session

        rows = Session.objects.filter(pk=session_id)
        with transaction.atomic(using=router.db_for_write(Session)):
            # Written first, so the row is this transaction's (a row lock on PostgreSQL, the
            # write lock on SQLite) before it is read: a concurrent change waits, then reads
            # what this one wrote.
            if not rows.update(last_seen=timezone.now()):
                return None
            current = rows.values_list("subscriptions", flat=True).first()
            subscriptions = _subscribed(list(current or []), uri, on)
            rows.update(subscriptions=subscriptions)
        _changed(session_id)
        return subscriptions

    def end(self, session_id: str) -> bool:
        from .models import Session, StreamEvent

        StreamEvent.objects.filter(session_id=session_id).delete()
        ended = Session.objects.filter(pk=session_id).delete()[0] > 0
        _changed(session_id)
        return ended

    def clean(self) -> int:
        from .models import Session, StreamEvent

        dead = Session.objects.filter(last_seen__lt=self._idle_cutoff())
        removed = 0
        # In batches: one list of every expired id outgrows what a query may bind (SQLite's
        # variables), and one long delete would hold the table from the site's requests.
        while True:
            batch = list(dead.order_by("pk").values_list("pk", flat=True)[:CLEAN_BATCH])
            if not batch:
                return removed
            StreamEvent.objects.filter(session_id__in=batch).delete()
            removed += dead.filter(pk__in=batch).delete()[0]


class CacheSessionStore(SessionStore):
    """Sessions in a Django cache (``MCP_APP["SESSION_CACHE"]``), expiring on their own."""

    prefix = "mcp_app:session:"

    @property
    def cache(self) -> Any:
        from django.core.cache import caches

        return caches[conf.SESSION_CACHE]

    def create(self, data: SessionData) -> None:
        self.cache.set(self.prefix + data.id, asdict(data), conf.SESSION_IDLE_SECONDS)

    def get(self, session_id: str) -> SessionData | None:
        found = self.cache.get(self.prefix + session_id)
        if found is None:
            return None
        self.cache.touch(self.prefix + session_id, conf.SESSION_IDLE_SECONDS)
        return SessionData(**found)

    def exists(self, session_id: str) -> bool:
        return self.cache.get(self.prefix + session_id) is not None

    def update(self, session_id: str, **changes: Any) -> None:
        with self._locked(session_id):
            self._change(session_id, lambda found: found.update(changes))

    def subscribe(self, session_id: str, uri: str, on: bool) -> list[str] | None:
        changed: list[list[str]] = []

        def change(found: dict[str, Any]) -> None:
            found["subscriptions"] = _subscribed(list(found.get("subscriptions") or []), uri, on)
            changed.append(found["subscriptions"])

        with self._locked(session_id):
            self._change(session_id, change)
        return changed[0] if changed else None

    def _change(self, session_id: str, change: Callable[[dict[str, Any]], None]) -> None:
        key = self.prefix + session_id
        found = self.cache.get(key)
        if found is None:
            return
        change(found)
        self.cache.set(key, found, conf.SESSION_IDLE_SECONDS)
        # Ended between the read and the write: it stays ended.
        if self.cache.get(key + ":ended") is not None:
            self.cache.delete(key)

    @contextlib.contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        """One change of the session at a time, across processes (a cache key as the lock)."""
        key = self.prefix + session_id + ":lock"
        token = secrets.token_hex(8)
        deadline = time.monotonic() + CACHE_LOCK_SECONDS
        held = self.cache.add(key, token, CACHE_LOCK_SECONDS)
        while not held and time.monotonic() <= deadline:
            time.sleep(0.005)
            held = self.cache.add(key, token, CACHE_LOCK_SECONDS)
        # Not held after the wait: a holder that died, whose lock expires with it.
        try:
            yield
        finally:
            # Only its own: a lock that expired meanwhile may be another change's now.
            if held and self.cache.get(key) == token:
                self.cache.delete(key)

    def end(self, session_id: str) -> bool:
        from .models import StreamEvent

        key = self.prefix + session_id
        # Marked first, so a change already under way cannot write the session back.
        self.cache.set(key + ":ended", 1, conf.SESSION_IDLE_SECONDS)
        # Its streams' events are rows whatever the store: they go with it, as in the other.
        StreamEvent.objects.filter(session_id=session_id).delete()
        return bool(self.cache.delete(key))


def store() -> SessionStore:
    """The configured store (``MCP_APP["SESSION_STORE"]``)."""
    return _load(conf.SESSION_STORE)


@functools.cache
def _load(path: str) -> SessionStore:
    from django.utils.module_loading import import_string

    return import_string(path)()  # type: ignore[no-any-return]
