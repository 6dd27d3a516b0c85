"""Request state signed with Django's signing framework and bound to method, params and caller."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.core import signing

from .conf import conf
from .exceptions import SuspiciousRequestState
from .protocol.jsonrpc import InvalidParams

SALT = "mcp_app.request-state"
#: Params that change between rounds of one dialogue and so are not part of its scope.
UNSCOPED = frozenset({"inputResponses", "requestState", "_meta"})

security_logger = logging.getLogger("django.security.mcp_app")


def caller_id(user: Any) -> str:
    """A stable name for the caller: the user's primary key, or ``anonymous``."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "anonymous"
    return f"user:{user.pk}"


#: Methods whose ``arguments`` may be left out, ``null`` or ``{}`` alike.
WITH_ARGUMENTS = frozenset({"tools/call", "prompts/get"})


def params_digest(params: Mapping[str, Any], method: str | None = None) -> str:
    """A digest of the params a state is bound to: those of the dialogue, as the method reads
    them (``arguments`` left out or ``null`` are the empty arguments they are handled as)."""
    scoped = {k: v for k, v in params.items() if k not in UNSCOPED}
    if method in WITH_ARGUMENTS and scoped.get("arguments") is None:
        scoped["arguments"] = {}
    canonical = json.dumps(scoped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _target(server: str, method: str, params: Mapping[str, Any]) -> str:
    name = params.get("uri") if method == "resources/read" else params.get("name")
    return f"{server}:{method}:{name}"


def sign(
    state: Any,
    *,
    method: str,
    params: Mapping[str, Any],
    caller: str,
    server: str = "default",
    asked: Mapping[str, str] | None = None,
    forms: Mapping[str, Any] | None = None,
) -> str:
    """Sign ``state`` for a retry of this method, with these params, by this caller.

    ``asked``: the method of each input request sent with it, by key, and ``forms`` the
    schema of each form among them, so that the answers can be checked.
    """
    payload: dict[str, Any] = {
        # When, in milliseconds: the signature's own stamp counts whole seconds.
        "i": _now_ms(),
        "s": state,
        "t": _target(server, method, params),
        "d": params_digest(params, method),
        "c": caller,
    }
    if asked is not None:
        payload["a"] = dict(asked)
    if forms:
        payload["f"] = dict(forms)
    # zlib costs some 20 µs each way (setting up its window), more than a small state saves
    # on the wire: only a large one is compressed (loads() tells the two apart itself).
    large = len(json.dumps(payload, separators=(",", ":"))) > COMPRESS_ABOVE
    return signing.dumps(payload, key=conf.REQUEST_STATE_KEY, salt=SALT, compress=large)


def verify(
    token: Any, *, method: str, params: Mapping[str, Any], caller: str, server: str = "default"
) -> Any:
    """Check a ``requestState`` echoed by the client and return the handler's state.

    Raises:
        InvalidParams: the token is malformed, altered, expired, or issued for another
            method, definition, argument set or caller; the message says which.
    """
    return verified(token, method=method, params=params, caller=caller, server=server)[0]


def verified(
    token: Any, *, method: str, params: Mapping[str, Any], caller: str, server: str = "default"
) -> tuple[Any, dict[str, str] | None, dict[str, Any]]:
    """``verify``, the method of each input request the state was sent with, by key
    (``None`` for a state that does not say), and the schema of each form among them.

    Raises:
        InvalidParams: as ``verify``.
    """
    if not isinstance(token, str) or not token:
        raise InvalidParams("Invalid requestState: must be a non-empty string")
    key = conf.REQUEST_STATE_KEY
    max_age_ms = conf.REQUEST_STATE_MAX_AGE_MS
    try:
        payload = signing.loads(
            token,
            key=key,
            salt=SALT,
            # The stamp is of whole seconds, so a second more; the payload's own time decides.
            max_age=timedelta(milliseconds=max_age_ms + 1000),
            fallback_keys=[] if key else None,
        )
    except signing.SignatureExpired as exc:
        raise InvalidParams(_EXPIRED) from exc
    except (signing.BadSignature, ValueError) as exc:
        security_logger.warning("requestState failed verification for %s", method, exc_info=False)
        _suspicious()
        raise InvalidParams("Invalid requestState: the signature does not verify") from exc
    if not isinstance(payload, dict):
        raise InvalidParams("Invalid requestState: the signature does not verify")
    issued = payload.get("i")
    if isinstance(issued, int):
        age_ms = _now_ms() - issued
        if age_ms > max_age_ms:
            raise InvalidParams(_EXPIRED)
        if -age_ms > FUTURE_MS:
            # Signed by a server whose clock is ahead: it would live that much longer.
            raise InvalidParams(
                "Invalid requestState: it was issued in the future; the servers' clocks differ"
            )
    if payload.get("t") != _target(server, method, params):
        raise InvalidParams("Invalid requestState: it was issued for another request target")
    digest = payload.get("d")
    # A state signed before states carried their time ("i") was bound to the arguments as
    # sent, left out or not: it still verifies for the few minutes it lives.
    if digest != params_digest(params, method) and (
        "i" in payload or digest != params_digest(params)
    ):
        raise InvalidParams("Invalid requestState: it was issued for other arguments")
    if payload.get("c") != caller:
        raise InvalidParams("Invalid requestState: it was issued to another caller")
    asked, forms = payload.get("a"), payload.get("f")
    return (
        payload.get("s"),
        dict(asked) if isinstance(asked, dict) else None,
        dict(forms) if isinstance(forms, dict) else {},
    )


#: Bytes of JSON above which a state is compressed before it is signed.
COMPRESS_ABOVE = 1024
_EXPIRED = "Invalid requestState: it has expired; start the request again"
#: How far ahead of this server's clock another's may have stamped a state it accepts.
FUTURE_MS = 5000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _suspicious() -> None:
    # Recorded the way Django records other security failures, without failing the request.
    logging.getLogger("django.security.SuspiciousRequestState").info(
        str(SuspiciousRequestState("requestState signature mismatch"))
    )
