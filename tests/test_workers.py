"""The call threads: reused when free, more when all are busy, ended when idle."""

from __future__ import annotations

import contextvars
import os
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest
from asgiref.local import Local
from asgiref.sync import async_to_sync
from django.test import override_settings

from mcp_app.transport import workers as module
from mcp_app.transport.workers import Workers

NAME: contextvars.ContextVar[str] = contextvars.ContextVar("name", default="none")


def submit(pool: Workers, fn: Any, *args: Any, locals_too: bool = True) -> Future[Any]:
    """Run ``fn(*args)`` on the pool; its outcome in a future."""
    future: Future[Any] = Future()

    def task() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)

    pool.run(task, locals_too=locals_too)
    return future


def test_a_free_thread_is_reused() -> None:
    pool = Workers()
    threads = set()
    for _ in range(20):
        threads.add(submit(pool, threading.get_ident).result(5))
        deadline = time.monotonic() + 5
        while pool.idle == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
    assert pool.started == 1
    assert len(threads) == 1


def test_busy_threads_never_make_a_call_wait() -> None:
    pool = Workers()
    release = threading.Event()
    blocked = [submit(pool, release.wait, 10) for _ in range(5)]
    # Every thread is taken; one more call still runs at once.
    assert submit(pool, lambda: "ran").result(5) == "ran"
    assert pool.started == 6
    release.set()
    assert all(f.result(5) for f in blocked)


def test_results_exceptions_and_context_reach_the_caller() -> None:
    pool = Workers()
    assert submit(pool, sum, [1, 2, 3]).result(5) == 6
    with pytest.raises(ZeroDivisionError):
        submit(pool, lambda: 1 / 0).result(5)
    token = NAME.set("caller")
    try:
        assert submit(pool, NAME.get).result(5) == "caller"
    finally:
        NAME.reset(token)


@pytest.mark.skipif(not module.LOCALS_STAY_BEHIND, reason="asgiref shows Local data everywhere")
def test_a_task_run_without_locals_sees_their_defaults_and_the_rest_of_the_context() -> None:
    pool = Workers()
    local = Local()
    local.value = "caller"

    def seen() -> tuple[str, str, str]:
        async def inside() -> str:
            return str(getattr(local, "value", "default"))

        # async_to_sync moves whatever Local data the context holds to the thread it runs on.
        return getattr(local, "value", "default"), async_to_sync(inside)(), NAME.get()

    token = NAME.set("caller")
    try:
        assert submit(pool, seen).result(5) == ("caller", "caller", "caller")
        assert submit(pool, seen, locals_too=False).result(5) == ("default", "default", "caller")
    finally:
        NAME.reset(token)


@pytest.mark.skipif(not module.LOCALS_STAY_BEHIND, reason="asgiref shows Local data everywhere")
def test_holds_data_says_no_only_when_a_local_surely_holds_nothing_in_this_thread() -> None:
    local = Local()
    assert not module.holds_data(local)
    local.value = "set"
    assert module.holds_data(local)
    del local.value
    assert not module.holds_data(local)
    # A context copied into another thread carries the data without making it that thread's.
    local.value = "here"
    context = contextvars.copy_context()
    seen: list[tuple[bool, bool]] = []

    def elsewhere() -> None:
        seen.append((module.holds_data(local), hasattr(local, "value")))

    thread = threading.Thread(target=context.run, args=(elsewhere,))
    thread.start()
    thread.join(5)
    assert seen == [(False, False)]
    # What it cannot look into may hold anything.
    assert module.holds_data(Local(thread_critical=True))
    assert module.holds_data(None)
    assert module.holds_data(object())


def test_holds_data_says_yes_without_asgirefs_thread_tagged_storage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "_LOCAL_DATA", None)
    assert module.holds_data(Local())


@pytest.mark.parametrize("error", [RuntimeError, SystemExit])
def test_a_task_that_raises_leaves_its_thread_serving(
    error: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    pool = Workers()
    first = submit(pool, threading.get_ident).result(5)
    deadline = time.monotonic() + 5
    while pool.idle < 1 and time.monotonic() < deadline:
        time.sleep(0.01)

    def broken() -> None:
        raise error("a task that reports nothing")

    pool.run(broken)
    deadline = time.monotonic() + 5
    while pool.idle < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    # The same thread, back in the pool, serves the next task.
    assert submit(pool, threading.get_ident).result(5) == first
    assert pool.started == 1
    assert "A task on an MCP call thread failed" in caplog.text


def test_an_idle_thread_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "IDLE_SECONDS", 0.05)
    pool = Workers()
    ident = submit(pool, threading.get_ident).result(5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(t.ident == ident for t in threading.enumerate()):
        time.sleep(0.01)
    assert not any(t.ident == ident for t in threading.enumerate())
    assert pool.idle == 0
    # The pool still serves, on a new thread.
    assert submit(pool, lambda: 1).result(5) == 1
    assert pool.started == 2


# -- scheduling ---------------------------------------------------------------------------------

linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")


@linux_only
def test_the_call_threads_run_under_sched_batch() -> None:
    with override_settings(MCP_APP={}):
        policy = submit(Workers(), os.sched_getscheduler, 0).result(5)
    assert policy == os.SCHED_BATCH
    # Only the pool's own threads: the caller's stays as it was.
    assert os.sched_getscheduler(0) != os.SCHED_BATCH


@linux_only
def test_batch_scheduling_can_be_turned_off() -> None:
    with override_settings(MCP_APP={"BATCH_SCHEDULING": False}):
        policy = submit(Workers(), os.sched_getscheduler, 0).result(5)
        assert module.batch_scheduling() is False
    assert policy == os.SCHED_OTHER


def test_a_kernel_that_refuses_the_policy_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise PermissionError("not here")

    monkeypatch.setattr(os, "SCHED_BATCH", 3, raising=False)
    monkeypatch.setattr(os, "sched_setscheduler", refuse, raising=False)
    monkeypatch.setattr(os, "sched_param", lambda priority: priority, raising=False)
    with override_settings(MCP_APP={}):
        assert module.batch_scheduling() is False
        assert submit(Workers(), lambda: "served").result(5) == "served"


@linux_only
def test_a_thread_under_another_policy_keeps_it() -> None:
    seen: list[int] = []

    def site_thread() -> None:
        # A site that runs its process under another policy (SCHED_IDLE needs no privilege).
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        seen.append(submit(Workers(), os.sched_getscheduler, 0).result(5))

    with override_settings(MCP_APP={}):
        thread = threading.Thread(target=site_thread)
        thread.start()
        thread.join(10)
    assert seen == [os.SCHED_IDLE]


def test_a_setting_that_cannot_be_read_does_not_stop_a_thread_serving() -> None:
    class Unreadable:
        def __bool__(self) -> bool:
            raise ValueError("no")

    with override_settings(MCP_APP={"BATCH_SCHEDULING": Unreadable()}):
        assert module.batch_scheduling() is False
        assert submit(Workers(), lambda: "served").result(5) == "served"


# A preforking server (gunicorn) forks a process whose pool may have threads already.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_starts_threads_of_its_own() -> None:
    ran = threading.Event()
    module.workers.run(ran.set)
    assert ran.wait(5)
    deadline = time.monotonic() + 5
    while module.workers.idle == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert module.workers.idle > 0
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's threads is here
        done = threading.Event()
        module.workers.run(done.set)
        os._exit(0 if done.wait(2) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
