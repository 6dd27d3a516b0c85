"""``manage.py mcp_stdio``: serve a server of the site over stdio, for desktop clients."""

from __future__ import annotations

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
        protocol_out = sys.stdout
        # Only protocol messages may reach stdout: everything else goes to stderr.
        sys.stdout = sys.stderr
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        try:
            StdioServer(server, sys.stdin, protocol_out, user=user).serve()
        finally:
            sys.stdout = protocol_out
