"""The ceiling: a bare ASGI app that reads the request and sends the fixed result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from bench.wire import FIXED_RESULT

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(FIXED_RESULT)).encode()),
]


async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        # Answer the lifespan protocol so uvicorn starts without a warning.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    # Drain the body as a real endpoint must, so its transfer is part of the ceiling too.
    more = True
    while more:
        message = await receive()
        more = bool(message.get("more_body", False))
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": FIXED_RESULT})
