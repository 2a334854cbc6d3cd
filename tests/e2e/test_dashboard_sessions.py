"""Streaming sessions from the dashboard against a real single-node Slurm cluster: an operator with
the token submits a session, the page's state lists it running with its time left, and cancels it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support import Processes, wait_until


pytestmark = pytest.mark.slurm
import starlette  # noqa: E402,F401  (the dashboard extra, which make test installs: absent is a failure)

TOKEN = "a-token-of-at-least-16-characters"
WAIT_S = 60.0
LIMIT_S = 300  # the session's walltime, 00:05:00


def state(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url + "api/state", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return {}


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_an_operator_submits_and_cancels_a_session_and_the_page_shows_its_time_left(
        slurm, slurm_env, make_config, processes: Processes, tmp_path: Path) -> None:
    # A template whose job only waits: this test is about the dashboard, not the NodeGroups.
    template = tmp_path / "wait.sh.j2"
    template.write_text("#!/bin/bash\n#SBATCH --job-name={{ job_name }}\n#SBATCH --time={{ time }}\n"
                        "#SBATCH --output={{ log_dir }}/{{ job_name }}-%j.log\nexec sleep 600\n")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    config, path = make_config(slurm={"template": str(template)},
                               dashboard={"control_token_file": str(token), "session_log_dir": str(tmp_path / "logs"),
                                          "update_ms": 200})
    processes.sectorflow("kvstore", "--config", str(path), name="kvstore", env=slurm_env)
    processes.sectorflow("dashboard", "--config", str(path), name="dashboard", env=slurm_env)
    url = config.dashboard.url()
    wait_until(lambda: state(url).get("sessions", {}).get("available"), WAIT_S, "the dashboard to list sessions")

    code, answer = post(url + "api/sessions", {"time": "00:05:00"})
    assert code == 200, answer
    job_id = answer["message"].split()[3]
    assert answer["message"] == f"submitted session job {job_id} (1 node(s), 00:05:00)"

    def running() -> dict[str, Any] | None:
        jobs = [s for s in state(url)["sessions"]["sessions"] if s["job_id"] == job_id and s["state"] == "RUNNING"]
        return jobs[0] if jobs else None

    session = wait_until(running, WAIT_S, f"job {job_id} running on the page")
    assert session["time_limit"] == "5:00" and 0 < session["time_left_s"] <= LIMIT_S

    code, answer = post(url + f"api/sessions/{job_id}/cancel", {})
    assert (code, answer) == (200, {"ok": True, "message": f"cancelled session job {job_id}"})
    wait_until(lambda: not [s for s in state(url)["sessions"]["sessions"] if s["job_id"] == job_id], WAIT_S,
               f"job {job_id} gone from the page")
    code, answer = post(url + "api/sessions/99999/cancel", {})
    assert code == 409 and "job 99999 is not a running or pending session" in answer["error"]
