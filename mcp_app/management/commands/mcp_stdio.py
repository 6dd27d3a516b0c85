"""``manage.py mcp_stdio``: serve a server of the site over stdio, for desktop clients."""

from __future__ import annotations

import io
import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Serve an MCP server of this site over stdio (one JSON-RPC message per line)."

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
        saved = sys.stdout
        # The wire is UTF-8 whatever the locale says. A byte that is not UTF-8 reaches the
        # parser as a lone surrogate, which it refuses (-32700) without ending the session.
        protocol_in = io.TextIOWrapper(
            sys.stdin.buffer, encoding="utf-8", errors="surrogateescape", newline="\n"
        )
        protocol_out = io.TextIOWrapper(
            saved.buffer, encoding="utf-8", newline="\n", write_through=True
        )
        # Only protocol messages may reach stdout: everything else goes to stderr.
        sys.stdout = sys.stderr
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        try:
            StdioServer(server, protocol_in, protocol_out, user=user).serve()
        finally:
            protocol_out.flush()
            protocol_out.detach()
            protocol_in.detach()
            sys.stdout = saved
