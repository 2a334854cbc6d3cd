"""A real single-node Slurm cluster (Debian's slurmctld, slurmd, munged) in a scratch directory.

Started by the e2e fixtures as root, with nothing from systemd: munged with a private key and
socket, slurmctld and slurmd in the foreground (-D) as children. What Debian's Slurm 22.05 needs
here, learnt the hard way: munged refuses a socket directory that is not world-executable and
hangs a captured stdout; slurmd initialises a cgroup plugin even with task/none and dies without
`CgroupPlugin=cgroup/v1` where /sys/fs/cgroup is absent or hybrid; `NodeName=localhost` works
whatever the host name is; ready means `scontrol ping` says UP and `sinfo` says idle.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness import free_port

from sectorflow.orchestration import ServiceSpec, Supervisor
from sectorflow.waiting import WaitTimeout, wait_until


class SlurmError(RuntimeError):
    """The test cluster could not start; the message carries the daemon's log tail."""


def _real_memory_mb() -> int:
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    for word in out.split():
        if word.startswith("RealMemory="):
            return int(word.split("=", 1)[1])
    raise SlurmError(f"slurmd -C gave no RealMemory: {out!r}")


class SlurmCluster:
    """One controller and one node named localhost; ``env`` is what every client command needs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        # The daemons' own output; slurmctld and slurmd write their logs to log/ themselves.
        self._daemons = Supervisor(root / "daemons")

    def start(self, timeout_s: float = 30.0) -> None:
        for name in ("state", "spool", "munge", "log"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        munge = self.root / "munge"
        munge.chmod(0o755)  # munged refuses a socket directory that is not world-executable
        key = munge / "munge.key"
        subprocess.run(["mungekey", "-c", "-f", "-k", str(key)], check=True, capture_output=True)
        sock = munge / "munge.socket"
        self._spawn(["munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                     f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                     f"--seed-file={munge / 'munge.seed'}"], "munged")
        self._wait(lambda: sock.exists(), timeout_s, "munged socket", munge / "munged.log")
        self._write_config(sock)
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._spawn(["slurmd", "-D", "-f", str(self.conf)], "slurmd")
        self._wait(self._idle, timeout_s, "the node to be idle", self.root / "log" / "slurmctld.log")

    def _write_config(self, munge_socket: Path) -> None:
        r = self.root
        self.conf.write_text(f"""\
ClusterName=sectorflowtest
SlurmctldHost=localhost
SlurmctldPort={free_port('127.0.0.1')}
SlurmdPort={free_port('127.0.0.1')}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
NodeName=localhost CPUs={os.cpu_count()} RealMemory={_real_memory_mb()} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")
        # slurmd 22.05 always loads a cgroup plugin; v1 is what works on this machine kind.
        (r / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")

    def _spawn(self, args: list[str], name: str) -> None:
        self._daemons.start(ServiceSpec(name, tuple(args)), self.env)

    def _idle(self) -> bool:
        for name in self._daemons.names():
            if (code := self._daemons.exit_code(name)) is not None:
                raise SlurmError(f"{name} exited with {code}: {self._log_tail()}")
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=self.env)
        if "UP" not in ping.stdout:
            return False
        state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
        return state.stdout.strip() == "idle"

    def _wait(self, condition: Callable[[], bool], timeout_s: float, what: str, log: Path) -> None:
        try:
            wait_until(condition, timeout_s, what, 0.1)
        except WaitTimeout as timeout:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SlurmError(f"{timeout}: {tail}") from None

    def _log_tail(self) -> str:
        parts = []
        for path in sorted([*(self.root / "log").glob("*"), *(self.root / "daemons").glob("*.log")]):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command (sbatch, squeue, scontrol ...) against this cluster."""
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, check=check)

    def stop(self, timeout_s: float = 15.0) -> None:
        subprocess.run(["scancel", "--full", "--user=root"], capture_output=True, env=self.env)
        # A slurmstepd still ending its step when slurmd stops is orphaned for good (seen after a CI
        # run): wait, bounded, for the queue to empty and every step's socket in our spool to go.
        try:
            wait_until(lambda: not self._jobs_or_steps(), timeout_s, "the cluster's jobs and steps to end", 0.1)
        except WaitTimeout:
            pass  # the daemons are stopped all the same; what is left shows in _jobs_or_steps()
        self._daemons.stop_all(timeout_s)

    def _jobs_or_steps(self) -> list[str]:
        """The jobs squeue still lists and the step sockets slurmstepd still holds in the spool."""
        queue = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, env=self.env)
        steps = [path.name for path in (self.root / "spool").iterdir() if path.is_socket()]
        return queue.stdout.split() + steps


def slurm_available() -> bool:
    return all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch"))
