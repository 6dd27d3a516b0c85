"""Signed request state: integrity, expiry, binding to target, arguments and caller, keys."""

from __future__ import annotations

import json
import logging
import string
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core import signing
from django.test import override_settings

from mcp_app import state
from mcp_app.protocol.jsonrpc import INVALID_PARAMS, InvalidParams

ALPHABET = string.ascii_letters + string.digits + "-_"
PARAMS = {"name": "book-flight", "arguments": {"from": "CDG", "to": "SFO", "seats": 2}}
CALL = "tools/call"
ANON = "anonymous"
SECRET_STATE = {"step": 2, "draft": "PNR-4711-secret", "legs": ["CDG-SFO"]}

NON_STRING = "Invalid requestState: must be a non-empty string"
BAD_SIGNATURE = "Invalid requestState: the signature does not verify"
EXPIRED = "Invalid requestState: it has expired; start the request again"
OTHER_TARGET = "Invalid requestState: it was issued for another request target"
OTHER_ARGUMENTS = "Invalid requestState: it was issued for other arguments"
OTHER_CALLER = "Invalid requestState: it was issued to another caller"


def sign(value: Any = None, *, method: str = CALL, params: Any = None, caller: str = ANON) -> str:
    return state.sign(
        value, method=method, params=PARAMS if params is None else params, caller=caller
    )


def verify(token: Any, *, method: str = CALL, params: Any = None, caller: str = ANON) -> Any:
    return state.verify(
        token, method=method, params=PARAMS if params is None else params, caller=caller
    )


def refused(token: Any, **kw: Any) -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        verify(token, **kw)
    assert info.value.code == INVALID_PARAMS == -32602
    assert info.value.data is None
    return info.value


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """``time.time`` (which django.core.signing stamps tokens with) under the test's control."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(signing.time, "time", lambda: now[0])
    yield now


# -- round trip --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, SECRET_STATE, {"name": "Zoë 🦊"}, [1, 2.5, True, None], "plain", 0, {"big": "x" * 5000}],
    ids=["none", "dict", "unicode", "list", "string", "zero", "compressible"],
)
def test_signed_state_verifies_and_returns_the_handlers_state(value: Any) -> None:
    token = sign(value)
    assert isinstance(token, str)
    assert verify(token) == value


def test_large_state_is_compressed_and_still_verifies() -> None:
    token = sign({"big": "x" * 5000})
    assert token.startswith(".")
    assert len(token) < 500


def test_argument_order_does_not_change_the_binding() -> None:
    token = sign(
        SECRET_STATE,
        params={"arguments": {"seats": 2, "to": "SFO", "from": "CDG"}, "name": "book-flight"},
    )
    assert verify(token) == SECRET_STATE


# -- integrity ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", [{"small": 1}, {"big": "y" * 3000}], ids=["plain", "compressed"])
def test_every_single_character_change_is_refused(value: Any) -> None:
    token = sign(value)
    assert verify(token) == value
    checked = 0
    for position, original in enumerate(token):
        for replacement in ALPHABET + ":.":
            if replacement == original:
                continue
            forged = token[:position] + replacement + token[position + 1 :]
            with pytest.raises(InvalidParams) as info:
                verify(forged)
            assert info.value.message == BAD_SIGNATURE, (position, replacement)
            checked += 1
    assert checked == len(token) * (len(ALPHABET) + 1)


@pytest.mark.parametrize(
    "forge",
    [
        lambda t: t[:-1],
        lambda t: t + "A",
        lambda t: t[1:],
        lambda t: t.rsplit(":", 1)[0],
        lambda t: t.replace(":", "", 1),
        lambda t: t.swapcase(),
        lambda t: t + ":" + t.rsplit(":", 1)[1],
        lambda t: "é" + t[1:],
        lambda t: t[:10] + "\x00" + t[11:],
    ],
    ids=[
        "truncated",
        "appended",
        "first-dropped",
        "signature-dropped",
        "separator-dropped",
        "case-swapped",
        "signature-doubled",
        "non-ascii",
        "nul",
    ],
)
def test_mangled_tokens_are_refused_as_bad_signatures(forge: Any) -> None:
    assert refused(forge(sign(SECRET_STATE))).message == BAD_SIGNATURE


@pytest.mark.parametrize("token", [None, "", 0, 12345, ["a:b:c"], {"s": 1}, True])
def test_a_token_that_is_not_a_non_empty_string_is_refused(token: Any) -> None:
    assert refused(token).message == NON_STRING


def test_a_token_signed_for_another_purpose_is_refused() -> None:
    payload = {
        "s": SECRET_STATE,
        "t": "tools/call:book-flight",
        "d": state.params_digest(PARAMS),
        "c": ANON,
    }
    other_salt = signing.dumps(payload, salt="django.contrib.sessions", compress=True)
    assert refused(other_salt).message == BAD_SIGNATURE
    unsalted = signing.dumps(payload)
    assert refused(unsalted).message == BAD_SIGNATURE


def test_a_validly_signed_payload_that_is_not_an_object_is_refused() -> None:
    token = signing.dumps(["not", "a", "dict"], salt=state.SALT)
    assert refused(token).message == BAD_SIGNATURE


def test_a_refused_signature_is_logged_to_django_security_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    forged = sign(SECRET_STATE)[:-2] + "AA"
    with caplog.at_level(logging.INFO, logger="django.security"):
        refused(forged)
    records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert (
        "django.security.mcp_app",
        "WARNING",
        "requestState failed verification for tools/call",
    ) in records
    assert (
        "django.security.SuspiciousRequestState",
        "INFO",
        "requestState signature mismatch",
    ) in records
    assert all(forged not in message for _, _, message in records)


# -- expiry ------------------------------------------------------------------------------


def test_state_verifies_up_to_the_default_five_minutes(frozen_clock: list[float]) -> None:
    token = sign(SECRET_STATE)
    frozen_clock[0] += 300
    assert verify(token) == SECRET_STATE
    frozen_clock[0] += 1
    assert refused(token).message == EXPIRED


@override_settings(MCP_APP={"REQUEST_STATE_MAX_AGE_MS": 10_000})
def test_state_expires_after_the_configured_max_age(frozen_clock: list[float]) -> None:
    token = sign(SECRET_STATE)
    frozen_clock[0] += 10
    assert verify(token) == SECRET_STATE
    frozen_clock[0] += 0.5
    assert refused(token).message == EXPIRED


def test_state_expires_in_real_time_with_a_one_millisecond_max_age() -> None:
    token = sign(SECRET_STATE)
    with override_settings(MCP_APP={"REQUEST_STATE_MAX_AGE_MS": 1}):
        time.sleep(0.02)
        assert refused(token).message == EXPIRED
    assert verify(token) == SECRET_STATE


@override_settings(MCP_APP={"REQUEST_STATE_MAX_AGE_MS": 1000})
def test_expiry_counts_milliseconds_not_the_signatures_whole_seconds(
    frozen_clock: list[float],
) -> None:
    frozen_clock[0] += 0.9  # the signature's stamp says .0
    token = sign(SECRET_STATE)
    frozen_clock[0] += 0.8
    assert verify(token) == SECRET_STATE
    frozen_clock[0] += 0.3
    assert refused(token).message == EXPIRED


def test_a_state_stamped_ahead_of_this_clock_is_refused_past_the_tolerance(
    frozen_clock: list[float],
) -> None:
    start = frozen_clock[0]
    frozen_clock[0] = start + state.FUTURE_MS / 1000 - 1
    near = sign(SECRET_STATE)
    frozen_clock[0] = start + 3600
    far = sign(SECRET_STATE)
    frozen_clock[0] = start
    assert verify(near) == SECRET_STATE
    assert refused(far).message == (
        "Invalid requestState: it was issued in the future; the servers' clocks differ"
    )


def test_expiry_is_reported_before_the_binding_is_checked(frozen_clock: list[float]) -> None:
    token = sign(SECRET_STATE)
    frozen_clock[0] += 301
    assert refused(token, method="prompts/get", caller="user:9").message == EXPIRED


# -- binding -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (CALL, {**PARAMS, "name": "cancel-flight"}),
        ("prompts/get", PARAMS),
        ("resources/read", {**PARAMS, "uri": "flights://CDG-SFO"}),
        (CALL, {"arguments": PARAMS["arguments"]}),
    ],
    ids=["other-tool", "other-method-same-name", "resource", "no-name"],
)
def test_state_for_another_target_is_refused(method: str, params: dict[str, Any]) -> None:
    token = sign(SECRET_STATE)
    assert refused(token, method=method, params=params).message == OTHER_TARGET


def test_resource_state_is_bound_to_the_uri() -> None:
    read = {"uri": "people://ada"}
    token = sign("r", method="resources/read", params=read)
    assert verify(token, method="resources/read", params=read) == "r"
    other = refused(token, method="resources/read", params={"uri": "people://alan"})
    assert other.message == OTHER_TARGET


def test_prompt_state_is_bound_to_the_prompt_name() -> None:
    get = {"name": "introduce", "arguments": {"id": "ada"}}
    token = sign("p", method="prompts/get", params=get)
    assert verify(token, method="prompts/get", params=get) == "p"
    other = refused(token, method="prompts/get", params={**get, "name": "summarise"})
    assert other.message == OTHER_TARGET


@pytest.mark.parametrize(
    "params",
    [
        {**PARAMS, "arguments": {**PARAMS["arguments"], "seats": 3}},
        {**PARAMS, "arguments": {**PARAMS["arguments"], "class": "first"}},
        {**PARAMS, "arguments": {"from": "CDG", "to": "SFO"}},
        {**PARAMS, "arguments": {}},
        {"name": "book-flight"},
        {**PARAMS, "arguments": {**PARAMS["arguments"], "seats": "2"}},
        {**PARAMS, "cursor": "x"},
    ],
    ids=["changed", "added", "removed", "emptied", "absent", "type-changed", "extra-param"],
)
def test_state_for_other_arguments_is_refused(params: dict[str, Any]) -> None:
    token = sign(SECRET_STATE)
    assert refused(token, params=params).message == OTHER_ARGUMENTS


def test_input_responses_request_state_and_meta_are_not_part_of_the_digest() -> None:
    first_round = {**PARAMS, "_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}
    token = sign(SECRET_STATE, params=first_round)
    retry = {
        **PARAMS,
        "inputResponses": {"seat": {"action": "accept", "content": {"seat": "12A"}}},
        "requestState": token,
        "_meta": {
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "progressToken": "p-7",
        },
    }
    assert verify(token, params=retry) == SECRET_STATE
    assert state.params_digest(first_round) == state.params_digest(retry)
    assert state.params_digest(retry) == state.params_digest(PARAMS)
    assert state.params_digest({**PARAMS, "extra": 1}) != state.params_digest(PARAMS)


def test_only_a_large_state_is_compressed_and_either_verifies() -> None:
    small = sign(SECRET_STATE)
    assert not small.startswith(".")  # Django marks a compressed payload with a leading dot
    assert verify(small) == SECRET_STATE
    large_state = {"notes": ["the same words again"] * 200}
    large = sign(large_state)
    assert large.startswith(".")
    assert len(large) < len(json.dumps(large_state))
    assert verify(large) == large_state


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
@pytest.mark.parametrize("first", [{}, {"arguments": None}, {"arguments": {}}])
@pytest.mark.parametrize("retry", [{}, {"arguments": None}, {"arguments": {}}])
def test_arguments_left_out_null_or_empty_are_the_same_arguments(
    method: str, first: dict[str, Any], retry: dict[str, Any]
) -> None:
    # The engine hands each of them to the handler as {}: a retry may spell them otherwise.
    token = sign(SECRET_STATE, method=method, params={"name": "book-flight", **first})
    assert verify(token, method=method, params={"name": "book-flight", **retry}) == SECRET_STATE
    other = {"name": "book-flight", "arguments": {"seats": 1}}
    assert refused(token, method=method, params=other).message == OTHER_ARGUMENTS


def test_a_state_signed_before_states_carried_their_time_keeps_its_binding() -> None:
    # As the previous version signed it: no "i", the arguments' digest as they were sent.
    sent = {"name": "book-flight"}
    payload = {
        "s": SECRET_STATE,
        "t": "default:tools/call:book-flight",
        "d": state.params_digest(sent),
        "c": ANON,
    }
    token = signing.dumps(payload, salt=state.SALT, compress=True)
    assert verify(token, params=sent) == SECRET_STATE
    assert refused(token, params={**sent, "arguments": {"a": 1}}).message == OTHER_ARGUMENTS


def test_a_resource_read_has_no_arguments_to_leave_out() -> None:
    token = sign(SECRET_STATE, method="resources/read", params={"uri": "a://b"})
    with_arguments = {"uri": "a://b", "arguments": {}}
    assert refused(token, method="resources/read", params=with_arguments).message == OTHER_ARGUMENTS


@pytest.mark.django_db
def test_caller_id_names_users_by_primary_key_and_everyone_else_anonymous() -> None:
    user = get_user_model().objects.create_user("ada", password="pw-ada-123")
    assert state.caller_id(user) == f"user:{user.pk}"
    assert state.caller_id(AnonymousUser()) == ANON
    assert state.caller_id(None) == ANON


@pytest.mark.django_db
def test_state_is_bound_to_the_caller() -> None:
    users = get_user_model().objects
    ada = state.caller_id(users.create_user("ada", password="pw-ada-123"))
    alan = state.caller_id(users.create_user("alan", password="pw-alan-123"))
    anonymous = state.caller_id(AnonymousUser())
    assert len({ada, alan, anonymous}) == 3

    for owner in (ada, alan, anonymous):
        token = sign(SECRET_STATE, caller=owner)
        assert verify(token, caller=owner) == SECRET_STATE
        for other in {ada, alan, anonymous} - {owner}:
            assert refused(token, caller=other).message == OTHER_CALLER


def test_checks_report_the_first_mismatch_in_target_arguments_caller_order() -> None:
    token = sign(SECRET_STATE)
    other_args = {**PARAMS, "arguments": {}}
    assert refused(token, params={**other_args, "name": "x"}, caller="user:1").message == (
        OTHER_TARGET
    )
    assert refused(token, params=other_args, caller="user:1").message == OTHER_ARGUMENTS


# -- keys --------------------------------------------------------------------------------


def test_rotated_secret_key_still_verifies_through_the_fallbacks() -> None:
    with override_settings(SECRET_KEY="old-secret-key-for-rotation", SECRET_KEY_FALLBACKS=[]):
        token = sign(SECRET_STATE)
        assert verify(token) == SECRET_STATE
    with override_settings(
        SECRET_KEY="new-secret-key-for-rotation",
        SECRET_KEY_FALLBACKS=["old-secret-key-for-rotation"],
    ):
        assert verify(token) == SECRET_STATE
        # New tokens are signed with the new key.
        fresh = sign(SECRET_STATE)
    with override_settings(SECRET_KEY="new-secret-key-for-rotation", SECRET_KEY_FALLBACKS=[]):
        assert refused(token).message == BAD_SIGNATURE
        assert verify(fresh) == SECRET_STATE


def test_a_custom_request_state_key_signs_and_verifies() -> None:
    with override_settings(MCP_APP={"REQUEST_STATE_KEY": "state-only-signing-key"}):
        token = sign(SECRET_STATE)
        assert verify(token) == SECRET_STATE
    # Not accepted under SECRET_KEY, nor with SECRET_KEY_FALLBACKS listing another key.
    assert refused(token).message == BAD_SIGNATURE


def test_with_a_custom_key_secret_key_tokens_and_fallbacks_are_not_accepted() -> None:
    with override_settings(SECRET_KEY="site-secret-key-number-one", SECRET_KEY_FALLBACKS=[]):
        site_token = sign(SECRET_STATE)
    with override_settings(
        SECRET_KEY="site-secret-key-number-one",
        SECRET_KEY_FALLBACKS=["site-secret-key-number-one"],
        MCP_APP={"REQUEST_STATE_KEY": "state-only-signing-key"},
    ):
        assert refused(site_token).message == BAD_SIGNATURE


def test_an_empty_custom_key_means_secret_key() -> None:
    token = sign(SECRET_STATE)
    with override_settings(MCP_APP={"REQUEST_STATE_KEY": ""}):
        assert verify(token) == SECRET_STATE


# -- what the messages tell ------------------------------------------------------------------


@pytest.mark.django_db
def test_refusal_messages_never_reveal_internals(frozen_clock: list[float]) -> None:
    user = get_user_model().objects.create_user("grace", password="pw-grace-123")
    owner = state.caller_id(user)
    with override_settings(MCP_APP={"REQUEST_STATE_KEY": "state-only-signing-key"}):
        token = sign(SECRET_STATE, caller=owner)
        failures = [
            refused(token[:-3] + "abc", caller=owner),
            refused(token, params={**PARAMS, "name": "cancel-flight"}, caller=owner),
            refused(token, params={**PARAMS, "arguments": {}}, caller=owner),
            refused(token, caller=ANON),
            refused(12),
        ]
        frozen_clock[0] += 3600
        failures.append(refused(token, caller=owner))
    messages = [f.message for f in failures]
    assert messages == [
        BAD_SIGNATURE,
        OTHER_TARGET,
        OTHER_ARGUMENTS,
        OTHER_CALLER,
        NON_STRING,
        EXPIRED,
    ]
    digest = state.params_digest(PARAMS)
    secrets = [
        "sha",
        "hmac",
        "digest",
        "salt",
        "payload",
        "PNR-4711",
        "book-flight",
        "cancel-flight",
        "CDG",
        owner,
        "user:",
        digest,
        digest[:8],
        "state-only-signing-key",
        state.SALT,
        token[:12],
        token.rsplit(":", 1)[1],
        "{",
        "Signature age",
        "seconds",
    ]
    for failure in failures:
        text = str(failure).lower()
        assert failure.data is None
        assert str(failure) == failure.message
        for secret in secrets:
            assert secret.lower() not in text, (secret, failure.message)
