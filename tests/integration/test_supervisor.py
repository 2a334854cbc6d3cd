"""The one supervisor of local processes: a log per process, exit codes, lines from stdout, a stop
that reaches the whole process group and kills what ignores SIGTERM, and the state file through
which another process (``sectorflow down``) stops what a supervisor started."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import wait_until

from sectorflow.errors import SectorflowError
from sectorflow.orchestration import ServiceSpec, Supervisor, load_running, stop_services

DEADLINE_S = 20.0  # a failure guard, not a speed requirement

# Prints the pid of a child it started (the same process group), then waits to be stopped.
PARENT = """
import subprocess, sys, threading
child = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"])
print(child.pid, flush=True)
threading.Event().wait()
"""
SERVING = """
import threading
print("serving", flush=True)
threading.Event().wait()
"""
STUBBORN = """
import signal, threading
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ignoring SIGTERM", flush=True)
threading.Event().wait()
"""


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    with Supervisor(tmp_path / "run", stop_timeout_s=DEADLINE_S) as supervisor:
        yield supervisor


def python(name: str, script: str) -> ServiceSpec:
    return ServiceSpec(name, (sys.executable, "-c", script))


def gone(pid: int) -> bool:
    """No such process, or only its zombie (a reparented child waits for a reaper we do not control)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_output_goes_to_the_process_log_and_its_exit_code_is_kept(supervisor: Supervisor) -> None:
    supervisor.start(python("greeter", "import sys; print('hello'); sys.exit(3)"))
    assert supervisor.wait("greeter", DEADLINE_S) == 3
    assert supervisor.exit_code("greeter") == 3
    assert supervisor.log_path("greeter").read_text() == "hello\n"
    assert supervisor.log_tail("greeter") == "hello"


def test_check_names_a_process_that_exited_with_its_log(supervisor: Supervisor) -> None:
    supervisor.start(python("quitter", "import sys; print('bad configuration'); sys.exit(2)"))
    supervisor.wait("quitter", DEADLINE_S)
    with pytest.raises(SectorflowError, match=r"quitter exited with code 2; last lines of .*quitter.log:\n"
                                              r"bad configuration"):
        supervisor.check()


def test_lines_come_from_stdout_while_stderr_goes_to_the_log(supervisor: Supervisor) -> None:
    script = "import sys; print('one'); print('two', flush=True); print('trouble', file=sys.stderr)"
    supervisor.start(python("talker", script), capture_stdout=True)
    assert supervisor.read_line("talker", DEADLINE_S) == "one"
    assert supervisor.read_line("talker", DEADLINE_S) == "two"
    assert supervisor.wait("talker", DEADLINE_S) == 0
    assert supervisor.log_tail("talker") == "trouble"


def test_reading_from_a_process_that_closed_its_output_names_it(supervisor: Supervisor) -> None:
    supervisor.start(python("mute", "pass"), capture_stdout=True)
    with pytest.raises(SectorflowError, match=r"^mute closed its output \((exit code 0|still running)\); last lines of "):
        supervisor.read_line("mute", DEADLINE_S)


def test_a_name_is_started_once_as_it_names_the_log(supervisor: Supervisor) -> None:
    supervisor.start(python("once", "pass"))
    with pytest.raises(ValueError, match="a process named once was already started in"):
        supervisor.start(python("once", "pass"))


def test_a_stop_reaches_the_children_of_the_process_group(supervisor: Supervisor) -> None:
    supervisor.start(python("parent", PARENT), capture_stdout=True)
    child = int(supervisor.read_line("parent", DEADLINE_S))
    assert supervisor.stop("parent") == -signal.SIGTERM
    wait_until(lambda: gone(child), DEADLINE_S, f"the child {child} to exit")
    assert supervisor.names() == []


def test_a_process_that_ignores_sigterm_is_killed_after_the_deadline(supervisor: Supervisor) -> None:
    supervisor.start(python("stubborn", STUBBORN), capture_stdout=True)
    assert supervisor.read_line("stubborn", DEADLINE_S) == "ignoring SIGTERM"
    assert supervisor.stop("stubborn", timeout_s=0.1) == -signal.SIGKILL


def test_the_state_file_lets_another_process_stop_the_services(supervisor: Supervisor, tmp_path: Path) -> None:
    for name in ("kvstore", "aggregator"):
        process = supervisor.start(python(name, SERVING), capture_stdout=True)
        # Running its own command line now, which is how a recorded pid is recognised.
        assert supervisor.read_line(name, DEADLINE_S) == "serving"
    recorded = load_running(tmp_path / "run")
    assert [service.name for service in recorded] == ["kvstore", "aggregator"]
    assert recorded[1].pid == process.pid
    assert recorded[1].log == str(tmp_path / "run" / "aggregator.log")
    stop_services(list(reversed(recorded)), DEADLINE_S)
    # A process on its way out already shows an empty command line: its end may follow a moment later.
    wait_until(lambda: all(gone(service.pid) for service in recorded), DEADLINE_S, "both services to exit")
    supervisor.stop_all()
    assert load_running(tmp_path / "run") == []
