"""``manage.py mcp_stdio``: serve a server of the site over stdio, for desktop clients."""

from __future__ import annotations

import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Serve an MCP server of this site over stdio (one JSON-RPC message per line)."

    #: Whether the process ends with the command (``manage.py mcp_stdio``), not a program
    #: that goes on after ``call_command``.
    process_ends = False

    def run_from_argv(self, argv: list[str]) -> None:
        self.process_ends = True
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--server", default="default", help="The server's name (default: default)."
        )
        parser.add_argument(
            "--user", default=None, help="Run calls as this username (default: anonymous)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import AnonymousUser

        from mcp_app import audit
        from mcp_app.server import servers
        from mcp_app.transport.stdio import StdioServer

        server = servers.get(options["server"])
        if server is None:
            raise CommandError(
                f"No server {options['server']!r}; known: {', '.join(sorted(servers))}"
            )
        user: Any = AnonymousUser()
        if options["user"]:
            model = get_user_model()
            try:
                user = model._default_manager.get_by_natural_key(options["user"])
            except model.DoesNotExist as exc:
                raise CommandError(f"No user {options['user']!r}") from exc
            if not getattr(user, "is_active", True):
                # As over HTTP, where an inactive user's credentials let no one in.
                raise CommandError(f"The user {options['user']!r} is inactive")
        saved = sys.stdout
        # The wire is UTF-8 whatever the locale says. A byte that is not UTF-8 reaches the
        # parser as a lone surrogate, which it refuses (-32700) without ending the session.
        protocol_in = io.TextIOWrapper(
            sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n"
        )
        # Only protocol messages may reach stdout. The protocol keeps a copy of the stdout
        # descriptor, and the descriptor itself then points at stderr: whatever else writes
        # there (a subprocess, C code, a logging handler the site bound to sys.stdout) lands
        # on stderr instead of between messages.
        wire = _own_stdout(saved)
        protocol_out = io.TextIOWrapper(
            wire if wire is not None else saved.buffer,
            encoding="utf-8",
            newline="\n",
            write_through=True,
        )
        sys.stdout = sys.stderr
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        stdio = StdioServer(server, protocol_in, protocol_out, user=user)
        # Clients end a server by closing its input, then by SIGTERM if it has not gone (the
        # official SDK waits 2 s, and kills it 2 s later); a person by ^C. Each ends it as the
        # end of input does, without a traceback: the calls under way are ended, the queued
        # audit rows written, and the command exits with 0. Signals sent after the first are
        # ignored: the command is ending already.
        with _handled(SIGNALS, stdio.stop, process_ends=self.process_ends):
            try:
                stdio.serve()
                audit.flush()
            finally:
                protocol_out.flush()
                protocol_out.detach()
                protocol_in.detach()
                sys.stdout = saved
                if wire is not None:
                    # What was written to the old stdout object meanwhile goes where it went.
                    saved.flush()
                    os.dup2(wire.fileno(), saved.fileno())
                    wire.close()


#: The signals that end the command as the end of its input does.
SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def _handled(
    signals: tuple[signal.Signals, ...],
    handler: Callable[[int, FrameType | None], None],
    process_ends: bool = False,
) -> Iterator[None]:
    """``handler`` for the first of ``signals`` to come meanwhile, the others ignored; only
    in the main thread, the only one that may set them (a test's ``call_command`` in another
    thread keeps the handlers it has). The handlers are given back after.

    ``process_ends`` (run as ``manage.py mcp_stdio``): once one has come, ``signals`` are
    ignored by the system to the process's very end instead, since a repeated one would kill
    it while it ends (Python drops its own handlers before its last clean-up), its audit rows
    perhaps unwritten and its exit status the signal's.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came = False

    def ignored(signum: int, frame: FrameType | None) -> None:
        pass

    def first(signum: int, frame: FrameType | None) -> None:
        nonlocal came
        came = True
        for each in signals:
            signal.signal(each, ignored)  # before the handler, which may raise
        handler(signum, frame)

    previous = {signum: signal.signal(signum, first) for signum in signals}
    try:
        yield
    finally:
        for signum, old in previous.items():
            if came and process_ends:
                signal.signal(signum, signal.SIG_IGN)
            elif old is not None:  # None: set outside Python, cannot be set back
                signal.signal(signum, old)


def _own_stdout(stdout: Any) -> io.BufferedWriter[io.FileIO] | None:
    """A writer on a copy of ``stdout``'s descriptor, which is pointed at stderr; ``None`` when
    stdout has no descriptor (a test's ``StringIO``)."""
    try:
        out_fd, err_fd = stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    stdout.flush()
    wire = io.BufferedWriter(io.FileIO(os.dup(out_fd), "w"))
    os.dup2(err_fd, out_fd)
    return wire
