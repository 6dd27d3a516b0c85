"""Who may call the endpoint and use each definition, with real users, groups and DRF tokens."""

# Needs rest_framework.authtoken in INSTALLED_APPS.

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group, Permission
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from django.test import Client, RequestFactory
from django.urls import path, reverse
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.permissions import BasePermission
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle

import mcp_app
from mcp_app import Server, elicit, input_required
from mcp_app.auth import admit
from mcp_app.models import Prompt, PromptMessage, Resource, ResourceTemplate, Tool
from mcp_app.rows import RowAccess
from mcp_app.testing import MCPClient, MCPClientError
from mcp_app.views import metadata_path
from tests.conftest import modern_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

TOKEN = "rest_framework.authentication.TokenAuthentication"
BEARER = "mcp_app.auth.BearerTokenAuthentication"
SESSION = "rest_framework.authentication.SessionAuthentication"
AUTHENTICATED = "rest_framework.permissions.IsAuthenticated"
METADATA_URL = "http://testserver/.well-known/oauth-protected-resource"

# -- servers of this module ----------------------------------------------------------------


def in_staff(user: Any) -> bool:
    return bool(user.groups.filter(name="staff").exists())


guarded = Server("auth-guarded", cache_scope="public")


@guarded.tool()
def echo(arguments: dict[str, Any], context: Any) -> str:
    """Public."""
    return "echo"


@guarded.tool(name="staff-tool", permission=in_staff)
def staff_tool(arguments: dict[str, Any], context: Any) -> str:
    return "for staff"


@guarded.tool(name="perm-tool", permission="auth.view_group")
def perm_tool(arguments: dict[str, Any], context: Any) -> str:
    return "for holders of auth.view_group"


@guarded.tool()
def ask(arguments: dict[str, Any], context: Any) -> Any:
    """Asks for a name, carrying state between rounds."""
    answer = context.input_response("name")
    if not isinstance(answer, dict):
        form = {"type": "object", "properties": {"name": {"type": "string"}}}
        return input_required({"name": elicit("Name?", form)}, state={"asked": True})
    return f"Hello, {answer['content']['name']}"


@guarded.resource("memo://open", name="open", mime_type="text/plain")
def open_memo(context: Any) -> str:
    return "open"


@guarded.resource("memo://secret", name="secret", mime_type="text/plain", permission=in_staff)
def secret_memo(context: Any) -> str:
    return "secret"


@guarded.resource_template(
    "vault://{key}",
    name="vault",
    permission=in_staff,
    complete={"key": lambda value, arguments, context: ["gold"]},
)
def vault(variables: dict[str, str], context: Any) -> str:
    return f"vault {variables['key']}"


@guarded.prompt(
    name="briefing",
    permission=in_staff,
    arguments=[{"name": "topic", "required": True}],
    complete={"topic": lambda value, arguments, context: ["budget"]},
)
def briefing(arguments: dict[str, str], context: Any) -> str:
    return f"Brief me on {arguments['topic']}"


opened = Server("auth-open", cache_scope="public", rows=False)


@opened.tool()
def ping(arguments: dict[str, Any], context: Any) -> str:
    return "pong"


urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", mcp_app.site.urls),
    metadata_path(mcp_app.site, "mcp"),
    path("guarded/mcp", guarded.urls),
    metadata_path(guarded, "guarded/mcp"),
    path("open/mcp", opened.urls),
]

# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Throttles count in the default cache.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def mcp(settings: Any) -> Any:
    """Set ``MCP_APP`` keys for one test, keeping the suite's ``VIEW``."""

    def configure(**values: Any) -> None:
        settings.MCP_APP = {**settings.MCP_APP, **values}

    return configure


@pytest.fixture
def staff() -> Group:
    return Group.objects.create(name="staff")


def make_user(name: str, *groups: Group, **fields: Any) -> AbstractUser:
    user: AbstractUser = get_user_model().objects.create_user(name, f"{name}@example.com", None)
    for key, value in fields.items():
        setattr(user, key, value)
    user.save()
    user.groups.add(*groups)
    return user


def token(user: Any, keyword: str = "Token") -> dict[str, str]:
    key = Token.objects.create(user=user).key
    return {"Authorization": f"{keyword} {key}"}


def post(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    path_: str = "/guarded/mcp",
    headers: dict[str, str] | None = None,
    client: Client | None = None,
    capabilities: dict[str, Any] | None = None,
) -> Any:
    body, wire = modern_request(method, params, capabilities=capabilities)
    return (client or Client()).post(
        path_,
        data=json.dumps(body),
        content_type="application/json",
        headers={**wire, **(headers or {})},
    )


def names(client: MCPClient, kind: str = "tools") -> list[str]:
    listed = {
        "tools": client.list_tools,
        "resources": client.list_resources,
        "templates": client.list_resource_templates,
        "prompts": client.list_prompts,
    }[kind]()
    key = {"templates": "resourceTemplates"}.get(kind, kind)
    return [item.get("name") for item in listed[key]]


def error_of(call: Any) -> MCPClientError:
    with pytest.raises(MCPClientError) as caught:
        call()
    return caught.value


# -- authentication: 401 and its challenge -------------------------------------------------


def test_without_a_token_the_answer_is_401_pointing_to_the_metadata(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    response = post("tools/list", path_="/mcp")
    assert response.status_code == 401
    # Bearer first, for MCP clients; then the challenge of the site's own scheme, as DRF sends it.
    assert response["WWW-Authenticate"] == f'Bearer resource_metadata="{METADATA_URL}/mcp", Token'
    # No id: the request was refused before it was read.
    assert response.json() == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Authentication credentials were not provided"},
    }


def test_a_bad_token_is_401_invalid_token(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    response = post("tools/list", headers={"Authorization": "Token not-a-real-key"})
    assert response.status_code == 401
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="Invalid token."')
    assert challenge.endswith(f'resource_metadata="{METADATA_URL}/guarded/mcp", Token')
    assert response.json()["error"]["message"] == "Invalid token."


@pytest.mark.parametrize("keyword", ["Token", "Bearer"])
@pytest.mark.parametrize("credentials", ["\x00", "abc\x00def", "key\x1f", "key\x7f"])
def test_credentials_with_control_characters_are_401_never_looked_up(
    mcp: Any, keyword: str, credentials: str
) -> None:
    # No HTTP field value holds them; PostgreSQL refuses a NUL in any query.
    mcp(AUTHENTICATION_CLASSES=[TOKEN, BEARER], PERMISSION_CLASSES=[AUTHENTICATED])
    response = post("tools/list", headers={"Authorization": f"{keyword} {credentials}"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    assert "control characters" in response.json()["error"]["message"]


@pytest.mark.parametrize("username", ["ad\x00a", "ada"])
def test_basic_credentials_no_user_has_are_401(mcp: Any, username: str) -> None:
    # A NUL inside the base64: PostgreSQL cannot compare it with any username.
    import base64

    make_user("ada")
    mcp(
        AUTHENTICATION_CLASSES=["rest_framework.authentication.BasicAuthentication"],
        PERMISSION_CLASSES=[AUTHENTICATED],
    )
    encoded = base64.b64encode(f"{username}:wrong\x00password".encode()).decode()
    response = post("tools/list", headers={"Authorization": f"Basic {encoded}"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith('Bearer error="invalid_token"')


def test_a_tab_in_the_authorization_header_is_left_to_the_authenticators(mcp: Any) -> None:
    user = make_user("tabby")
    key = Token.objects.create(user=user).key
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    response = post("tools/list", headers={"Authorization": f"Token\t{key}"})
    # A field value may hold a tab, and DRF splits the header on any whitespace.
    assert response.status_code == 200


def test_the_challenge_names_the_scopes(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[TOKEN],
        PERMISSION_CLASSES=[AUTHENTICATED],
        RESOURCE_METADATA={"scopes_supported": ["mcp:read", "mcp:write"]},
    )
    response = post("tools/list")
    assert response["WWW-Authenticate"].endswith(', scope="mcp:read mcp:write", Token')


def test_the_challenge_names_the_required_scopes_first(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[BEARER],
        PERMISSION_CLASSES=[AUTHENTICATED],
        RESOURCE_METADATA={"scopes_supported": ["mcp:read", "mcp:write"]},
        REQUIRED_SCOPES=["mcp:read"],
    )
    response = post("tools/list")
    # The scopes this endpoint needs, rather than every scope the server knows. The Bearer
    # class's own challenge is the Bearer one already: not repeated.
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{METADATA_URL}/guarded/mcp", scope="mcp:read"'
    )


def test_other_schemes_are_challenged_after_bearer(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[
            "rest_framework.authentication.BasicAuthentication",
            SESSION,  # no challenge of its own
            TOKEN,
            BEARER,
        ],
        PERMISSION_CLASSES=[AUTHENTICATED],
    )
    response = post("tools/list")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{METADATA_URL}/guarded/mcp", Basic realm="api", Token'
    )


class SignedScopes(BaseAuthentication):
    """Bearer tokens signed by the site, naming a user and the scopes granted to it."""

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        keyword, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if keyword != "Bearer":
            return None
        try:
            grant = signing.loads(value, salt="scopes")
        except signing.BadSignature as bad:
            raise exceptions.AuthenticationFailed("Invalid token.") from bad
        user = get_user_model().objects.get(pk=grant["user"])
        return user, SimpleNamespace(scope=grant["scope"])

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="api"'


class TokenHasScope(BasePermission):
    """Allows a token holding every scope the view requires, as django-oauth-toolkit's does."""

    message = "Your token lacks a scope this endpoint needs"

    def has_permission(self, request: Any, view: Any) -> bool:
        granted = set(request.auth.scope.split()) if request.auth else set()
        return set(view.required_scopes) <= granted


class NeedsAdmin(TokenHasScope):
    required_scopes = ["mcp:admin"]
    # As django-oauth-toolkit words it with ERROR_RESPONSE_WITH_SCOPES.
    message = {"detail": "Admins only", "required_scopes": ["mcp:admin"]}

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.META.get("HTTP_X_RAISE"):
            raise exceptions.PermissionDenied("Admins only")
        granted = set(request.auth.scope.split()) if request.auth else set()
        return set(self.required_scopes) <= granted


def scoped(user: Any, scope: str) -> dict[str, str]:
    return {
        "Authorization": "Bearer " + signing.dumps({"user": user.pk, "scope": scope}, salt="scopes")
    }


def test_a_token_without_the_required_scopes_is_403_insufficient_scope(mcp: Any) -> None:
    ada = make_user("ada")
    mcp(
        AUTHENTICATION_CLASSES=[f"{__name__}.SignedScopes"],
        PERMISSION_CLASSES=[AUTHENTICATED, f"{__name__}.TokenHasScope"],
        REQUIRED_SCOPES=["mcp:read", "mcp:write"],
    )
    narrow = post("tools/list", headers=scoped(ada, "mcp:read"))
    assert narrow.status_code == 403
    # RFC 6750 section 3.1, as the MCP authorization spec asks: the client may ask for more.
    assert narrow["WWW-Authenticate"] == (
        'Bearer error="insufficient_scope", scope="mcp:read mcp:write", '
        f'resource_metadata="{METADATA_URL}/guarded/mcp", '
        'error_description="Your token lacks a scope this endpoint needs"'
    )
    assert narrow.json()["error"]["message"] == "Your token lacks a scope this endpoint needs"
    assert post("tools/list", headers=scoped(ada, "mcp:write mcp:read")).status_code == 200
    # Without any token: 401, naming the scopes to ask for.
    anonymous = post("tools/list")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{METADATA_URL}/guarded/mcp", scope="mcp:read mcp:write"'
    )


def test_a_permission_names_its_own_scopes(mcp: Any) -> None:
    ada = make_user("ada")
    mcp(
        AUTHENTICATION_CLASSES=[f"{__name__}.SignedScopes"],
        PERMISSION_CLASSES=[f"{__name__}.NeedsAdmin"],
        REQUIRED_SCOPES=["mcp:read"],
    )
    refused = post("tools/list", headers=scoped(ada, "mcp:read"))
    assert refused.status_code == 403
    assert 'scope="mcp:admin"' in refused["WWW-Authenticate"]
    assert refused.json()["error"]["message"] == "Admins only"
    raised = post("tools/list", headers={**scoped(ada, "mcp:read"), "X-Raise": "1"})
    assert raised.status_code == 403
    assert raised["WWW-Authenticate"].startswith(
        'Bearer error="insufficient_scope", scope="mcp:admin"'
    )
    assert raised.json()["error"]["message"] == "Admins only"


def test_a_refusal_of_other_credentials_has_no_scope_challenge(mcp: Any, staff: Group) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[TOKEN],
        PERMISSION_CLASSES=[AUTHENTICATED, f"{__name__}.NeverForStaff"],
    )
    refused = post("tools/list", headers=token(make_user("ada", staff)))
    assert refused.status_code == 403
    assert "WWW-Authenticate" not in refused


DOT_AUTH = "oauth2_provider.contrib.rest_framework.OAuth2Authentication"
DOT_SCOPES = "oauth2_provider.contrib.rest_framework.TokenHasScope"


def oauth_token(user: Any, scope: str) -> dict[str, str]:
    """An access token of django-oauth-toolkit, as its authorization server issues them."""
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import AccessToken

    key = f"token-{user.pk}-{scope.replace(' ', '-')}"
    expires = timezone.now() + timedelta(hours=1)
    AccessToken.objects.create(user=user, token=key, scope=scope, expires=expires)
    return {"Authorization": f"Bearer {key}"}


def test_django_oauth_toolkit_tokens_and_scopes(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[DOT_AUTH],
        PERMISSION_CLASSES=[DOT_SCOPES],
        REQUIRED_SCOPES=["mcp"],
    )
    ada = make_user("ada")
    # Its authentication reads request.POST, the body being JSON the endpoint reads itself.
    allowed = post("tools/list", headers=oauth_token(ada, "mcp profile"))
    assert allowed.status_code == 200
    narrow = post("tools/list", headers=oauth_token(ada, "calendar:read"))
    assert narrow.status_code == 403
    assert narrow["WWW-Authenticate"].startswith('Bearer error="insufficient_scope", scope="mcp"')
    anonymous = post("tools/list")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].endswith(', scope="mcp"')


@pytest.mark.parametrize("permissions", [[], [DOT_SCOPES]])
def test_an_expired_or_unknown_oauth_token_is_401_invalid_token(
    mcp: Any, permissions: list[str]
) -> None:
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import AccessToken

    mcp(AUTHENTICATION_CLASSES=[DOT_AUTH], PERMISSION_CLASSES=permissions, REQUIRED_SCOPES=["mcp"])
    ada = make_user("ada")
    expired = timezone.now() - timedelta(minutes=1)
    AccessToken.objects.create(user=ada, token="expired", scope="mcp", expires=expired)
    for key in ("expired", "never-issued"):
        # Its authenticator takes such a token for no credentials: the call is not anonymous.
        refused = post("tools/list", headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 401
        assert refused["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    # A scheme no authenticator of the site reads is no refused credential.
    assert post("tools/list", headers={"Authorization": "Digest x"}).status_code == (
        401 if permissions else 200
    )


def test_a_refusal_more_scopes_would_not_lift_has_no_scope_challenge(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[DOT_AUTH],
        PERMISSION_CLASSES=[DOT_SCOPES, "rest_framework.permissions.IsAdminUser"],
        REQUIRED_SCOPES=["mcp"],
    )
    # The token holds every scope the endpoint asks: a client asking for them again gets
    # nowhere, so no insufficient_scope challenge.
    refused = post("tools/list", headers=oauth_token(make_user("ada"), "mcp"))
    assert refused.status_code == 403
    assert "WWW-Authenticate" not in refused
    mcp(
        AUTHENTICATION_CLASSES=[BEARER],
        PERMISSION_CLASSES=["rest_framework.permissions.IsAdminUser"],
        REQUIRED_SCOPES=[],
    )
    drf_token = post("tools/list", headers=token(make_user("grace"), "Bearer"))
    assert drf_token.status_code == 403
    assert "WWW-Authenticate" not in drf_token


def test_a_scope_permission_without_required_scopes_never_lets_a_token_in(mcp: Any) -> None:
    from mcp_app.checks import check_settings

    mcp(AUTHENTICATION_CLASSES=[DOT_AUTH], PERMISSION_CLASSES=[DOT_SCOPES])
    # An empty list would be "no scope needed": the view names none, the check says so.
    assert [m.id for m in check_settings()] == ["mcp_app.E011"]
    refused = Client(raise_request_exception=False).post(
        "/guarded/mcp",
        data=json.dumps(modern_request("tools/list")[0]),
        content_type="application/json",
        headers={**modern_request("tools/list")[1], **oauth_token(make_user("ada"), "other")},
    )
    assert refused.status_code != 200


def test_a_token_user_lists_and_calls(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    client = MCPClient(guarded, headers=token(make_user("ada")))
    assert "echo" in names(client)
    assert MCPClient.text(client.call_tool("echo")) == "echo"


def test_bearer_tokens_are_drf_tokens_sent_as_mcp_clients_do(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[BEARER], PERMISSION_CLASSES=[AUTHENTICATED])
    ada = make_user("ada")
    assert MCPClient.text(MCPClient(guarded, headers=token(ada, "Bearer")).call_tool("echo"))
    # The same key under DRF's own keyword is not what this class reads.
    key = Token.objects.get(user=ada).key
    response = post("tools/list", headers={"Authorization": f"Token {key}"})
    assert response.status_code == 401


def test_the_initialize_era_is_refused_the_same_way(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    error = error_of(lambda: MCPClient(guarded, versions=["2025-11-25"]).list_tools())
    assert (error.status, error.code) == (401, -32600)
    with MCPClient(guarded, versions=["2025-11-25"], headers=token(make_user("ada"))) as client:
        assert MCPClient.text(client.call_tool("echo")) == "echo"


def test_without_authentication_classes_the_middleware_user_counts(mcp: Any) -> None:
    mcp(PERMISSION_CLASSES=[AUTHENTICATED])
    assert post("tools/list").status_code == 401
    assert "echo" in names(MCPClient(guarded, user=make_user("ada")))


@pytest.mark.parametrize("era", [["2026-07-28"], ["2025-11-25"]])
def test_without_the_authentication_middleware_rules_get_an_anonymous_user(
    settings: Any, era: list[str]
) -> None:
    # A site may list no middleware at all; a rule reading user.groups must not fail the list.
    settings.MIDDLEWARE = []
    with MCPClient(guarded, versions=era) as client:
        assert "echo" in names(client)
        assert "staff-tool" not in names(client)
        assert names(client, "prompts") == []


def test_drf_without_an_unauthenticated_user_gives_rules_an_anonymous_one(
    mcp: Any, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {"UNAUTHENTICATED_USER": None}
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    listed = names(MCPClient(guarded))  # the staff rule reads user.groups
    assert "echo" in listed and "staff-tool" not in listed
    request = RequestFactory().post("/guarded/mcp")
    user, refusal = admit(request, "auth-guarded")
    assert refusal is None and user.is_anonymous
    assert request.user is user  # what handlers read as context.request.user


def test_session_authentication_applies_unchanged(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[SESSION], PERMISSION_CLASSES=[AUTHENTICATED])
    assert "echo" in names(MCPClient(guarded, user=make_user("ada")))
    # DRF checks CSRF for cookie sessions: a cross-site POST is a 403, never a server error.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_user("alan"))
    response = post("tools/list", client=browser)
    assert response.status_code == 403
    assert response.json()["error"]["message"].startswith("CSRF Failed")


# -- permission classes: 403 ---------------------------------------------------------------


class NeverForStaff(BasePermission):
    message = "Staff may not use this endpoint"

    def has_permission(self, request: Any, view: Any) -> bool:
        assert view.server_name in ("auth-guarded", "default")
        return not request.user.groups.filter(name="staff").exists()


class Raises(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        raising = request.META.get("HTTP_X_RAISE")
        if raising == "auth":
            raise exceptions.NotAuthenticated("Log in first")
        if raising == "dict":
            raise exceptions.PermissionDenied({"reason": "Not on Sundays"})
        if raising == "list":
            raise exceptions.ValidationError(["Say please", "Say thank you"])
        if raising == "django":
            raise DjangoPermissionDenied("not shown")
        if raising == "404":
            raise Http404("not shown")
        if raising == "throttled":
            raise exceptions.Throttled(wait=2.5)
        if raising == "bug":
            raise RuntimeError("a bug in the permission")
        raise exceptions.PermissionDenied("Not today")


def test_a_refused_permission_is_403_with_its_message(mcp: Any, staff: Group) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[TOKEN],
        PERMISSION_CLASSES=[AUTHENTICATED, f"{__name__}.NeverForStaff"],
    )
    error = error_of(
        lambda: MCPClient(guarded, headers=token(make_user("ada", staff))).list_tools()
    )
    assert (error.status, error.message) == (403, "Staff may not use this endpoint")
    assert "echo" in names(MCPClient(guarded, headers=token(make_user("alan"))))


def test_a_permission_that_raises_answers_as_drf_would(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[f"{__name__}.Raises"])
    denied = post("tools/list")
    assert (denied.status_code, denied.json()["error"]["message"]) == (403, "Not today")
    login = post("tools/list", headers={"X-Raise": "auth"})
    assert login.status_code == 401
    assert "resource_metadata=" in login["WWW-Authenticate"]
    keyed = post("tools/list", headers={"X-Raise": "dict"})
    assert (keyed.status_code, keyed.json()["error"]["message"]) == (403, "Not on Sundays")
    listed = post("tools/list", headers={"X-Raise": "list"})
    assert (listed.status_code, listed.json()["error"]["message"]) == (400, "Say please")
    django = post("tools/list", headers={"X-Raise": "django"})
    assert django.status_code == 403
    assert django.json()["error"]["message"] == "You do not have permission to perform this action."
    missing = post("tools/list", headers={"X-Raise": "404"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, -32600)
    throttled = post("tools/list", headers={"X-Raise": "throttled"})
    assert (throttled.status_code, throttled["Retry-After"]) == (429, "3")


def test_a_permission_with_a_bug_is_a_json_rpc_500_on_either_view(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[f"{__name__}.Raises"])
    broken = Client(raise_request_exception=False).post(
        "/guarded/mcp",
        data=json.dumps(modern_request("tools/list")[0]),
        content_type="application/json",
        headers={**modern_request("tools/list")[1], "X-Raise": "bug"},
    )
    assert broken.status_code == 500
    assert broken["Content-Type"] == "application/json"
    assert broken.json()["error"] == {"code": -32603, "message": "Internal error"}


# -- protected resource metadata (RFC 9728) ------------------------------------------------


def test_the_metadata_document(mcp: Any) -> None:
    mcp(
        RESOURCE_METADATA={
            "authorization_servers": ["https://auth.example.com"],
            "scopes_supported": ["mcp"],
            "resource_name": "Demo",
        }
    )
    for url in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/mcp/",
    ):
        response = Client().get(url)
        assert response.status_code == 200
        assert response.json() == {
            "resource": "http://testserver/mcp",
            "authorization_servers": ["https://auth.example.com"],
            "scopes_supported": ["mcp"],
            "resource_name": "Demo",
            "bearer_methods_supported": ["header"],
        }
        assert response["Access-Control-Allow-Origin"] == "*"
    other = Client().get("/.well-known/oauth-protected-resource/guarded/mcp").json()
    assert other["resource"] == "http://testserver/guarded/mcp"
    assert (
        reverse("auth-guarded-resource-metadata")
        == "/.well-known/oauth-protected-resource/guarded/mcp"
    )


def test_under_a_script_prefix_the_resource_is_the_endpoint_there(mcp: Any) -> None:
    response = Client().get("/.well-known/oauth-protected-resource/mcp", SCRIPT_NAME="/app")
    assert response.json()["resource"] == "http://testserver/app/mcp"


def test_the_challenge_url_serves_the_metadata(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], PERMISSION_CLASSES=[AUTHENTICATED])
    challenge = post("tools/list")["WWW-Authenticate"]
    url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    document = Client().get(url.removeprefix("http://testserver")).json()
    assert document["resource"] == "http://testserver/guarded/mcp"
    assert document["authorization_servers"] == []


def test_the_metadata_view_answers_preflight_and_refuses_writes() -> None:
    url = "/.well-known/oauth-protected-resource/mcp"
    preflight = Client().options(url)
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Methods"] == "GET, HEAD, OPTIONS"
    refused = Client().post(url)
    assert refused.status_code == 405
    assert refused["Allow"] == "GET, HEAD, OPTIONS"


def test_metadata_path_needs_a_route() -> None:
    with pytest.raises(ValueError, match="route"):
        metadata_path(guarded, "/")
    assert metadata_path("billing", "/billing/mcp/").name == "billing-resource-metadata"


# -- per-definition access in code -----------------------------------------------------------


def test_lists_show_each_caller_what_it_may_use(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    holder = make_user("grace")
    holder.user_permissions.add(Permission.objects.get(codename="view_group"))
    anonymous = MCPClient(guarded)
    member = MCPClient(guarded, headers=token(make_user("ada", staff)))
    other = MCPClient(guarded, headers=token(holder))
    assert names(anonymous) == ["echo", "ask"]
    assert names(member) == ["echo", "staff-tool", "ask"]
    assert names(other) == ["echo", "perm-tool", "ask"]
    assert names(anonymous, "resources") == ["open"]
    assert names(member, "resources") == ["open", "secret"]
    assert names(anonymous, "templates") == names(anonymous, "prompts") == []
    assert names(member, "templates") == ["vault"]
    assert names(member, "prompts") == ["briefing"]


def test_what_a_caller_may_not_use_answers_as_if_it_did_not_exist(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    alan = token(make_user("alan"))
    client = MCPClient(guarded, headers=alan)
    hidden, missing = (
        error_of(lambda: client.call_tool("staff-tool")),
        error_of(lambda: client.call_tool("no-such-tool")),
    )
    assert (hidden.status, hidden.code) == (missing.status, missing.code)
    assert hidden.message == "Unknown tool: staff-tool"
    assert missing.message == "Unknown tool: no-such-tool"
    for uri in ("memo://secret", "vault://gold"):
        refused, absent = (
            error_of(lambda u=uri: client.read_resource(u)),
            error_of(lambda: client.read_resource("memo://absent")),
        )
        assert (refused.code, refused.message, refused.data) == (
            absent.code,
            absent.message,
            {"uri": uri},
        )
    assert error_of(lambda: client.get_prompt("briefing", {"topic": "x"})).message == (
        "Unknown prompt: briefing"
    )
    # Nothing the caller may use completes: the capability is not offered, in either era,
    # nor the method.
    for version in ("2026-07-28", "2025-11-25"):
        outsider = MCPClient(guarded, headers=alan, versions=[version])
        assert "completions" not in outsider.info()["capabilities"]
    for ref, argument, value in [("briefing", "topic", "b"), ("vault://{key}", "key", "g")]:
        refused = error_of(lambda r=ref, a=argument, v=value: client.complete(r, a, v))
        assert (refused.status, refused.code, refused.message) == (
            404,
            -32601,
            "Method not found: completion/complete (nothing can complete)",
        )
    ada = token(make_user("ada", staff))
    for version in ("2026-07-28", "2025-11-25"):
        insider = MCPClient(guarded, headers=ada, versions=[version])
        assert "completions" in insider.info()["capabilities"]
    member = MCPClient(guarded, headers=ada)
    assert MCPClient.text(member.call_tool("staff-tool")) == "for staff"
    assert MCPClient.text(member.read_resource("vault://gold")) == "vault gold"
    assert member.complete("briefing", "topic", "b")["completion"]["values"] == ["budget"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_updates_of_a_resource_the_caller_may_not_read_never_reach_it(
    staff: Group, version: str
) -> None:
    outsider = MCPClient(guarded, user=make_user("eve"), versions=[version])
    member = MCPClient(guarded, user=make_user("ada", staff), versions=[version])
    wanted = {"resourceSubscriptions": ["memo://secret", "memo://open"]}

    def both_change() -> None:
        guarded.notify_resource_updated("memo://secret")
        guarded.notify_resource_updated("memo://open")

    seen = outsider.listen(wanted, count=1, timeout=3, during=both_change)
    # Subscribed as to a URI that names nothing (so nothing tells the resource exists), and
    # told only of the resource it may read.
    assert [n["params"]["uri"] for n in seen["notifications"]] == ["memo://open"]
    told = member.listen(wanted, count=2, timeout=3, during=both_change)
    assert [n["params"]["uri"] for n in told["notifications"]] == ["memo://secret", "memo://open"]


def told_while(
    client: MCPClient, uri: str, during: Callable[[], Any], **resource: Any
) -> list[str]:
    """The URIs ``client`` is told of, listening to ``uri`` and ``memo://open``, while
    ``during()`` runs; ``uri`` is a resource of ``guarded`` (with ``resource`` options) meanwhile."""
    guarded.add_resource(memo_text, uri=uri, name=uri.rpartition("/")[2], **resource)
    try:
        wanted = {"resourceSubscriptions": [uri, "memo://open"]}
        told = client.listen(wanted, count=1, timeout=3, during=during)
    finally:
        guarded.remove_resource(uri)
    return [n["params"]["uri"] for n in told["notifications"]]


def memo_text(context: Any) -> str:
    return "a memo"


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_resource_restricted_while_the_client_listens_is_no_longer_announced(
    mcp: Any, version: str
) -> None:
    mcp(KEEPALIVE_SECONDS=0.1)
    uri = "memo://restricted-later"
    client = MCPClient(guarded, user=make_user("ada"), versions=[version])

    def restrict() -> None:
        guarded.remove_resource(uri)
        guarded.add_resource(memo_text, uri=uri, name="later", permission=lambda u: False)
        time.sleep(1.0)  # the stream's next renewal finds the resource hidden
        guarded.notify_resource_updated(uri)
        guarded.notify_resource_updated("memo://open")

    # Readable when the stream opened, and subscribed to: the update after it was restricted
    # is not sent (the one of the resource still open to all is).
    assert told_while(client, uri, restrict) == ["memo://open"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_caller_who_loses_a_permission_while_listening_is_no_longer_told(
    mcp: Any, version: str
) -> None:
    mcp(KEEPALIVE_SECONDS=0.1)
    uri = "memo://for-holders"
    holder = make_user("grace")
    granted = Permission.objects.get(codename="view_group")
    holder.user_permissions.add(granted)
    client = MCPClient(guarded, user=holder, versions=[version])

    def revoke() -> None:
        holder.user_permissions.remove(granted)
        time.sleep(1.0)  # the stream's next renewal reads the user again
        guarded.notify_resource_updated(uri)
        guarded.notify_resource_updated("memo://open")

    assert told_while(client, uri, revoke, permission="auth.view_group") == ["memo://open"]


@pytest.mark.parametrize("following", ["resourceSubscriptions", "toolsListChanged"])
@pytest.mark.parametrize("withdrawn", ["token revoked", "user made inactive"])
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_stream_ends_once_its_caller_would_no_longer_be_let_in(
    mcp: Any, version: str, withdrawn: str, following: str
) -> None:
    mcp(KEEPALIVE_SECONDS=0.1, AUTHENTICATION_CLASSES=[BEARER], PERMISSION_CLASSES=[AUTHENTICATED])
    ada = make_user("ada")
    client = MCPClient(guarded, headers=token(ada, "Bearer"), versions=[version])

    def withdraw() -> None:
        if withdrawn == "token revoked":
            Token.objects.filter(user=ada).delete()
        else:
            ada.is_active = False
            ada.save()
        time.sleep(1.0)  # several renewals
        guarded.notify_resource_updated("memo://open")
        guarded.add_tool(lambda arguments, context: "late", name="late")
        guarded.remove_tool("late")

    # A stream of list changes has no resource access to check again: it ends all the same.
    wanted: dict[str, Any] = {following: True}
    if following == "resourceSubscriptions":
        wanted = {following: ["memo://open"]}
    with pytest.raises(MCPClientError) as ended:
        client.listen(wanted, count=1, timeout=3, during=withdraw)
    # Ended, not timed out: nothing was told after the caller lost its way in.
    assert ended.value.kind == "transport"
    assert ended.value.data["notifications"] == []


def test_a_listened_to_resource_opened_to_the_caller_later_is_announced(mcp: Any) -> None:
    mcp(KEEPALIVE_SECONDS=0.1)
    uri = "memo://opened-later"
    client = MCPClient(guarded, user=make_user("ada"))

    def open_up() -> None:
        guarded.remove_resource(uri)
        guarded.add_resource(memo_text, uri=uri, name="opened-later")
        time.sleep(1.0)  # the stream's next renewal finds the resource readable
        guarded.notify_resource_updated(uri)

    assert told_while(client, uri, open_up, permission=lambda u: False) == [uri]


def test_with_subscriptions_off_a_hidden_resource_is_refused_like_any_other() -> None:
    client = MCPClient(guarded, user=make_user("eve"), versions=["2025-11-25"])
    before, guarded.options.subscribe = guarded.options.subscribe, False
    try:
        for uri in ("memo://secret", "memo://open", "memo://nothing"):
            with pytest.raises(MCPClientError) as caught:
                client.request("resources/subscribe", {"uri": uri})
            assert caught.value.code == -32601, uri
    finally:
        guarded.options.subscribe = before


def test_the_initialize_era_hides_the_same_definitions(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    with MCPClient(guarded, versions=["2025-06-18"], headers=token(make_user("alan"))) as client:
        assert names(client) == ["echo", "ask"]
        assert (
            error_of(lambda: client.call_tool("staff-tool")).message == "Unknown tool: staff-tool"
        )
    with MCPClient(guarded, versions=["2025-06-18"], headers=token(make_user("ada", staff))) as c:
        assert "staff-tool" in names(c)


def test_cache_scope_is_private_when_lists_depend_on_the_caller() -> None:
    for method in ("tools/list", "resources/list", "prompts/list", "server/discover"):
        assert post(method).json()["result"]["cacheScope"] == "private"
        assert post(method, path_="/open/mcp").json()["result"]["cacheScope"] == "public"


# -- per-definition access for rows ------------------------------------------------------------


def tool_row(name: str = "row-tool", server: str = "auth-guarded", **fields: Any) -> Tool:
    return Tool.objects.create(
        server=server, name=name, handler="template", config={"template": "row says hi"}, **fields
    )


def test_a_row_with_groups_is_for_their_members(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    tool_row().groups.add(staff)
    member = MCPClient(guarded, headers=token(make_user("ada", staff)))
    outsider = MCPClient(guarded, headers=token(make_user("alan")))
    root = MCPClient(guarded, headers=token(make_user("root", is_superuser=True)))
    assert "row-tool" in names(member) and "row-tool" in names(root)
    assert "row-tool" not in names(outsider) and "row-tool" not in names(MCPClient(guarded))
    assert MCPClient.text(member.call_tool("row-tool")) == "row says hi"
    assert error_of(lambda: outsider.call_tool("row-tool")).message == "Unknown tool: row-tool"
    assert post("tools/list").json()["result"]["cacheScope"] == "private"


def test_a_row_with_permissions_is_for_their_holders(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    change_tool = Permission.objects.get(codename="change_tool")
    tool_row().permissions.add(change_tool)
    direct = make_user("ada")
    direct.user_permissions.add(change_tool)
    staff.permissions.add(change_tool)
    for user in (direct, make_user("grace", staff)):
        assert "row-tool" in names(MCPClient(guarded, headers=token(user)))
    assert "row-tool" not in names(MCPClient(guarded, headers=token(make_user("alan"))))


def test_rows_of_every_kind_take_access(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    server = "auth-guarded"
    Resource.objects.create(server=server, uri="notes://row", name="row-note", text="t").groups.add(
        staff
    )
    ResourceTemplate.objects.create(
        server=server, uri_template="rows://{x}", name="row-template", text="{{ x }}"
    ).groups.add(staff)
    prompt = Prompt.objects.create(server=server, name="row-prompt")
    PromptMessage.objects.create(prompt=prompt, text="hello")
    prompt.groups.add(staff)
    member = MCPClient(guarded, headers=token(make_user("ada", staff)))
    outsider = MCPClient(guarded, headers=token(make_user("alan")))
    for kind, name in (
        ("resources", "row-note"),
        ("templates", "row-template"),
        ("prompts", "row-prompt"),
    ):
        assert name in names(member, kind)
        assert name not in names(outsider, kind)
    assert error_of(lambda: outsider.read_resource("rows://y")).message == "Resource not found"
    assert MCPClient.text(member.read_resource("rows://y")) == "y"


def test_a_row_with_no_groups_or_permissions_is_public() -> None:
    tool_row()
    assert "row-tool" in names(MCPClient(guarded))


def test_inactive_and_anonymous_users_never_may() -> None:
    rule = RowAccess(groups=frozenset({1}), permissions=frozenset({"auth.view_group"}))
    root = make_user("root", is_superuser=True)
    assert rule(root)
    root.is_active = False
    assert not rule(root)
    assert not rule(None)
    from django.contrib.auth.models import AnonymousUser

    assert not rule(AnonymousUser())


def test_orm_edits_of_access_reach_the_catalog_at_once(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    row = tool_row()
    anonymous = MCPClient(guarded)
    assert "row-tool" in names(anonymous)
    row.groups.add(staff)  # no save(): the m2m signal moves the generation
    assert "row-tool" not in names(anonymous)
    row.groups.remove(staff)
    assert "row-tool" in names(anonymous)
    staff.mcp_tools.add(row)  # the reverse side
    assert "row-tool" not in names(anonymous)
    staff.mcp_tools.clear()
    assert "row-tool" in names(anonymous)
    row.permissions.set([Permission.objects.get(codename="change_tool")])
    assert "row-tool" not in names(anonymous)
    row.permissions.clear()
    assert "row-tool" in names(anonymous)


def test_deleting_a_rows_only_group_disables_it_rather_than_opening_it(
    staff: Group, caplog: pytest.LogCaptureFixture
) -> None:
    alone = tool_row()
    alone.groups.add(staff)
    shared = tool_row("shared-tool")
    shared.groups.add(staff, Group.objects.create(name="ops"))
    member = make_user("ada", staff)
    admin_ = make_user("root", is_superuser=True)
    assert "row-tool" in names(MCPClient(guarded, user=admin_))
    with caplog.at_level("WARNING", logger="mcp_app"):
        staff.delete()  # no m2m signal: the deletion itself moves the generation
    assert "restricted by group 'staff', which is deleted, and by nothing else" in caplog.text
    alone.refresh_from_db()
    assert not alone.enabled and not alone.groups.exists()
    # Nobody gets it, not even those who could before, until someone decides.
    for user in (None, member, admin_):
        assert "row-tool" not in names(MCPClient(guarded, user=user))
    # A row another group still restricts stays enabled, for that group.
    shared.refresh_from_db()
    assert shared.enabled
    assert "shared-tool" not in names(MCPClient(guarded))


def test_deleting_all_of_a_rows_groups_at_once_disables_it(staff: Group) -> None:
    row = tool_row()
    row.groups.add(staff, Group.objects.create(name="ops"))
    kept = tool_row("kept-tool")
    kept.groups.add(staff, Group.objects.create(name="auditors"))
    # As the admin's "delete selected groups" does: one queryset, every pre_delete first.
    Group.objects.filter(name__in=["staff", "ops"]).delete()
    row.refresh_from_db()
    kept.refresh_from_db()
    assert (row.enabled, kept.enabled) == (False, True)


def test_deleting_a_permission_disables_the_rows_it_alone_restricted() -> None:
    from django.contrib.contenttypes.models import ContentType

    permission = Permission.objects.create(
        codename="use_vault",
        name="Can use the vault",
        content_type=ContentType.objects.get_for_model(Tool),
    )
    row = tool_row()
    row.permissions.add(permission)
    public = tool_row("open-tool")
    permission.delete()
    row.refresh_from_db()
    public.refresh_from_db()
    assert (row.enabled, public.enabled) == (False, True)


def test_a_restyling_row_narrows_a_code_tool_and_never_widens_it(mcp: Any, staff: Group) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    Tool.objects.create(server="auth-guarded", name="echo", overrides_code=True).groups.add(staff)
    member = MCPClient(guarded, headers=token(make_user("ada", staff)))
    assert "echo" in names(member)
    assert "echo" not in names(MCPClient(guarded, headers=token(make_user("alan"))))
    # perm-tool needs auth.view_group in code; the row's group alone does not open it.
    Tool.objects.create(server="auth-guarded", name="perm-tool", overrides_code=True).groups.add(
        staff
    )
    assert "perm-tool" not in names(member)
    both = make_user("grace", staff)
    both.user_permissions.add(Permission.objects.get(codename="view_group"))
    assert "perm-tool" in names(MCPClient(guarded, headers=token(both)))


def test_access_is_edited_in_the_admin(staff: Group) -> None:
    root = get_user_model().objects.create_superuser("admin", "admin@example.com", None)
    browser = Client()
    browser.force_login(root)
    page = browser.get("/admin/mcp_app/tool/add/")
    assert b'name="groups"' in page.content and b'name="permissions"' in page.content
    data = {
        "server": "auth-guarded",
        "name": "admin-tool",
        "title": "",
        "description": "",
        "icons": "",
        "meta": "",
        "enabled": "on",
        "order": "0",
        "handler": "template",
        "config": json.dumps({"template": "hi"}),
        "input_schema": "",
        "output_schema": "",
        "annotations": "",
        "groups": [str(staff.pk)],
    }
    response = browser.post("/admin/mcp_app/tool/add/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(Tool.objects.get(name="admin-tool").groups.all()) == [staff]
    assert "admin-tool" not in names(MCPClient(guarded))
    changelist = browser.get("/admin/mcp_app/tool/")
    assert b"staff" in changelist.content


# -- request state and sessions are the caller's ------------------------------------------------


def test_a_request_state_is_bound_to_the_token_user(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada, alan = token(make_user("ada")), token(make_user("alan"))
    elicits = {"elicitation": {}}
    first = post("tools/call", {"name": "ask"}, headers=ada, capabilities=elicits).json()
    assert first["result"]["resultType"] == "input_required"
    retry = {
        "name": "ask",
        "requestState": first["result"]["requestState"],
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
    }
    for stranger in (alan, {}):
        refused = post("tools/call", retry, headers=stranger, capabilities=elicits).json()
        assert refused["error"]["message"] == (
            "Invalid requestState: it was issued to another caller"
        )
    done = post("tools/call", retry, headers=ada, capabilities=elicits).json()["result"]
    assert done["content"][0]["text"] == "Hello, Ada"


def test_a_session_is_its_callers_alone(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN])
    ada, alan = token(make_user("ada")), token(make_user("alan"))
    with MCPClient(guarded, versions=["2025-11-25"], headers=ada) as client:
        client.list_tools()
        session = client.session_id
        assert session
        for stranger in (alan, {}):
            headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            response = Client().post(
                "/guarded/mcp",
                data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                content_type="application/json",
                headers={**headers, **stranger, "Accept": "application/json, text/event-stream"},
            )
            assert response.status_code == 404
            assert response.json()["error"]["message"] == "Session not found"
        assert names(client) == ["echo", "ask"]


# -- throttling: 429 ---------------------------------------------------------------------------


class TwoPerMinute(SimpleRateThrottle):
    """Two requests a minute per user (or per address for anonymous callers)."""

    rate = "2/min"

    def get_cache_key(self, request: Any, view: Any) -> str:
        ident = request.user.pk if request.user.is_authenticated else self.get_ident(request)
        return f"tests-two-per-minute-{ident}"


class ScopedOnePerMinute(ScopedRateThrottle):
    THROTTLE_RATES = {"mcp": "1/min"}


def test_over_the_rate_is_429_with_retry_after_and_a_json_rpc_error(mcp: Any) -> None:
    mcp(AUTHENTICATION_CLASSES=[TOKEN], THROTTLE_CLASSES=[f"{__name__}.TwoPerMinute"])
    ada, alan = token(make_user("ada")), token(make_user("alan"))
    assert [post("tools/list", headers=ada).status_code for _ in range(2)] == [200, 200]
    refused = post("tools/list", headers=ada)
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    error = refused.json()["error"]
    assert error["code"] == -32600 and error["message"].startswith("Too many requests; retry in ")
    assert post("tools/list", headers=alan).status_code == 200  # a bucket per user


def test_the_scoped_throttle_uses_the_mcp_scope(mcp: Any) -> None:
    mcp(THROTTLE_CLASSES=[f"{__name__}.ScopedOnePerMinute"])
    assert post("tools/list").status_code == 200
    assert post("tools/list").status_code == 429


def test_initialize_era_calls_are_throttled_too(mcp: Any) -> None:
    mcp(THROTTLE_CLASSES=[f"{__name__}.ScopedOnePerMinute"])
    error = error_of(lambda: MCPClient(guarded, versions=["2025-11-25"]).call_tool("echo"))
    assert error.status == 429


# -- limits -------------------------------------------------------------------------------------


def raw(data: bytes | str, headers: dict[str, str] | None = None, **extra: Any) -> Any:
    """POST ``data`` with the headers a ``tools/call`` of ``echo`` needs."""
    wire = modern_request("tools/call", {"name": "echo"})[1]
    return Client().post(
        "/guarded/mcp",
        data=data,
        content_type="application/json",
        headers={**wire, **(headers or {})},
        **extra,
    )


def test_a_body_over_max_body_bytes_is_413(mcp: Any) -> None:
    mcp(MAX_BODY_BYTES=2000)
    body, _ = modern_request("tools/call", {"name": "echo", "arguments": {"pad": "x" * 3000}})
    response = raw(json.dumps(body))
    assert response.status_code == 413
    assert response.json()["error"] == {"code": -32600, "message": "Request body over 2000 bytes"}


def test_a_declared_length_over_max_body_bytes_is_413_unread(mcp: Any) -> None:
    mcp(MAX_BODY_BYTES=2000)
    response = raw("{}", CONTENT_LENGTH="999999999")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600


def test_djangos_upload_limit_is_a_json_rpc_413_not_an_html_400(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body, _ = modern_request("tools/call", {"name": "echo", "arguments": {"pad": "x" * 2000}})
    response = raw(json.dumps(body))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == {"code": -32600, "message": "Request body over 1000 bytes"}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_json_nested_too_deep_is_400(mcp: Any) -> None:
    mcp(MAX_JSON_DEPTH=8)
    body, _ = modern_request("tools/call", {"name": "echo", "arguments": {"x": nested(10)}})
    response = raw(json.dumps(body))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "JSON nested deeper than 8 levels"
    assert response.json()["id"] == body["id"]  # the id is read all the same
    # A response's id is the server's numbering: the error goes to none.
    answer = {"jsonrpc": "2.0", "id": 4, "result": {"x": nested(10)}}
    response = raw(json.dumps(answer))
    assert response.status_code == 400 and "id" not in response.json()
    fine, _ = modern_request("tools/call", {"name": "echo", "arguments": {"x": nested(3)}})
    assert raw(json.dumps(fine)).status_code == 200


def test_json_deeper_than_the_parser_goes_is_400_not_500() -> None:
    response = raw("[" * 200_000 + "]" * 200_000)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_tool_arguments_over_max_arguments_bytes_are_413_invalid_params(mcp: Any) -> None:
    mcp(MAX_ARGUMENTS_BYTES=100)
    body, _ = modern_request(
        "tools/call", {"name": "echo", "arguments": {"pad": "x" * 200}}, request_id=7
    )
    response = raw(json.dumps(body))
    assert response.status_code == 413
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32602, "message": "Tool arguments over 100 bytes"},
    }
    small, _ = modern_request("tools/call", {"name": "echo", "arguments": {"pad": "x"}})
    assert raw(json.dumps(small)).status_code == 200


# -- origins and hosts -----------------------------------------------------------------------


def test_origins_are_checked_before_credentials(mcp: Any) -> None:
    mcp(
        AUTHENTICATION_CLASSES=[TOKEN],
        PERMISSION_CLASSES=[AUTHENTICATED],
        ALLOWED_ORIGINS=["https://app.example.com"],
    )
    ada = token(make_user("ada"))
    foreign = post("tools/list", headers={**ada, "Origin": "https://evil.example"})
    assert foreign.status_code == 403
    assert foreign.json()["error"]["message"] == "Origin not allowed"
    listed = post("tools/list", headers={**ada, "Origin": "https://app.example.com"})
    assert listed.status_code == 200
    same = post("tools/list", headers={**ada, "Origin": "http://testserver"})
    assert same.status_code == 200


def test_a_host_outside_allowed_hosts_is_refused(settings: Any) -> None:
    # CommonMiddleware refuses it first (400); without it, the endpoint answers JSON-RPC.
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if not m.endswith("CommonMiddleware")]
    response = post("tools/list", headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Host not allowed"
