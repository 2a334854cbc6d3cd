"""The beamline as Linux network namespaces: four receiver hosts, one to four aggregator hosts (the
kvstore beside the first), two compute nodes, and a WAN between the aggregator side and the compute side.

    recv1..recv4, agg[, agg2..agg4]  --veth--  [wan-a: bridge 10.77.1.1]  ==delay line==  [wan-b: bridge 10.77.2.1]  --veth--  compute1, compute2
      10.77.1.11-14, .20[-.23]                            10.77.255.1 <-> .2                                        10.77.2.11-12

The WAN "router" is two namespaces (wan-a, wan-b) joined only by the delay line's two TUN
devices, so every packet between the sides crosses it (delayed, possibly dropped) while TCP runs
end to end. Rate shaping (``tc tbf``) sits on wan-a's and wan-b's TUN egress when asked, and on
each aggregator host's link when asked (both directions: the host's eth0 egress towards the compute
side, its bridge port's egress towards the host), so that the cap bounds each host as its NIC would.
``cut_host``/``heal_host`` take a host's link down and up (its bridge port): the host keeps running,
unreachable.

Each host has a name (``recv1.netlab`` ... ``compute2.netlab``): its processes run in their own
UTS namespace with that hostname, and ``/etc/netns/<namespace>/hosts`` (which ``ip netns exec``
mounts over /etc/hosts) resolves every host's name, so services that advertise their host name
(a NodeGroup bound to 0.0.0.0) behave as on separate machines.

Every namespace name is ``sfnl-<pid>x<n>-<role>``: unique per run, and a later run sweeps the
namespaces of runs whose process is gone (``sweep_stale``). Nothing is created in the caller's
own namespace; leaving the context (also on failure or Ctrl-C) kills what runs in the namespaces,
stops the delay line and deletes every namespace. The 10.77.0.0/16 addresses exist only inside.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sectorflow.waiting import wait_until

from .delay_line import DelayLine, LinkCounters

log = logging.getLogger(__name__)

PREFIX = "sfnl-"
DOMAIN = ".netlab"
ETC_NETNS = Path("/etc/netns")
COMMAND_TIMEOUT_S = 20.0
STOP_S = 10.0
_sequence = itertools.count()


class NetlabError(RuntimeError):
    """A step of building or removing the namespaces failed; the message names the command."""


@dataclass(frozen=True)
class Host:
    """One simulated machine: its role, namespace and address on its side's bridge."""

    role: str
    namespace: str
    address: str
    side: str  # "beamline" (the aggregator's side) or "compute"

    @property
    def name(self) -> str:
        return f"{self.role}{DOMAIN}"


BEAMLINE_SUBNET = "10.77.1"
COMPUTE_SUBNET = "10.77.2"
WAN_A_ADDRESS = "10.77.255.1"
WAN_B_ADDRESS = "10.77.255.2"
RECEIVER_ROLES = ("recv1", "recv2", "recv3", "recv4")
# Member i of an aggregation tier runs on AGGREGATOR_ROLES[i]; the kvstore on the first.
AGGREGATOR_ROLES = ("agg", "agg2", "agg3", "agg4")
COMPUTE_ROLES = ("compute1", "compute2")
_ADDRESSES = {
    **{role: f"{BEAMLINE_SUBNET}.{11 + i}" for i, role in enumerate(RECEIVER_ROLES)},
    **{role: f"{BEAMLINE_SUBNET}.{20 + i}" for i, role in enumerate(AGGREGATOR_ROLES)},
    **{role: f"{COMPUTE_SUBNET}.{11 + i}" for i, role in enumerate(COMPUTE_ROLES)},
}


def run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    """Run one ``ip``/``tc``/``sysctl``/``iptables`` command; raise NetlabError naming it and its stderr on failure."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise NetlabError(f"{' '.join(argv)}: not done after {COMMAND_TIMEOUT_S:.0f} s") from None
    if check and done.returncode != 0:
        raise NetlabError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done


def _namespaces() -> list[str]:
    listing = run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in listing.splitlines() if line.strip()]


def _pids_in(namespace: str) -> list[int]:
    done = run(["ip", "netns", "pids", namespace], check=False)
    return [int(word) for word in done.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited: it holds no namespace resources worth waiting for.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _remove_namespace(namespace: str) -> None:
    """Kill what still runs in ``namespace`` (only processes a netlab run started there) and delete it."""
    pids = _pids_in(namespace)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until(lambda: not any(_alive(pid) for pid in pids), STOP_S, f"the processes of namespace {namespace} to exit")
    run(["ip", "netns", "del", namespace], check=False)
    etc = ETC_NETNS / namespace
    if etc.is_dir():
        for path in etc.iterdir():
            path.unlink()
        etc.rmdir()


def sweep_stale(prefix: str = PREFIX) -> list[str]:
    """Delete namespaces left by netlab runs whose process no longer exists; returns their names."""
    removed = []
    # A run killed between deleting a namespace and its /etc/netns folder leaves the folder alone.
    leftovers = [path.name for path in ETC_NETNS.glob(f"{prefix}*")] if ETC_NETNS.is_dir() else []
    for namespace in sorted(set(_namespaces()) | set(leftovers)):
        if not namespace.startswith(prefix):
            continue
        owner = namespace[len(prefix):].split("x", 1)[0]
        if owner.isdigit() and _alive(int(owner)):
            continue  # a live run (this one included) removes its own
        log.warning("removing namespace %s left by an earlier netlab run", namespace)
        _remove_namespace(namespace)
        removed.append(namespace)
    return removed


class Topology:
    """The namespaces of one test or benchmark run; a context manager that removes them all.

    Args:
        delay_ms: one-way delay of the WAN (the round trip is twice this).
        loss: fraction of packets the WAN drops, each direction (seeded).
        seed: the delay line's random seed.
        rate_mbit: WAN rate per direction via ``tc tbf``; None leaves it unshaped.
        mtu: MTU of every link (veth, bridge, TUN).
        sysctls: ``net.*`` settings applied inside every namespace (e.g. tuned socket buffers);
            they vanish with the namespaces, so nothing of the machine's own is changed.
        max_run_s: the delay line exits by itself after this (bounds a run that is never stopped).
        aggregators: how many aggregator hosts (``AGGREGATOR_ROLES``' first ones), 1 to 4.
        aggregator_rate_mbit: each aggregator host's link rate per direction via ``tc tbf`` (a NIC's
            bound); None leaves it unshaped.
    """

    def __init__(self, delay_ms: float = 0.0, loss: float = 0.0, seed: int = 1, rate_mbit: float | None = None,
                 mtu: int = 1500, sysctls: dict[str, str] | None = None, max_run_s: float = 900.0,
                 aggregators: int = 1, aggregator_rate_mbit: float | None = None) -> None:
        if not 1 <= aggregators <= len(AGGREGATOR_ROLES):
            raise NetlabError(f"aggregators = {aggregators}: the topology has 1 to {len(AGGREGATOR_ROLES)} "
                              f"aggregator hosts ({', '.join(AGGREGATOR_ROLES)})")
        self.run_id = f"{os.getpid()}x{next(_sequence)}"
        self.delay_ms = delay_ms
        self.loss = loss
        self.seed = seed
        self.rate_mbit = rate_mbit
        self.mtu = mtu
        self.sysctls = dict(sysctls or {})
        self.max_run_s = max_run_s
        self.aggregator_roles = AGGREGATOR_ROLES[:aggregators]
        self.aggregator_rate_mbit = aggregator_rate_mbit
        self.hosts: dict[str, Host] = {
            role: Host(role, self._ns(role), address, "compute" if role in COMPUTE_ROLES else "beamline")
            for role, address in _ADDRESSES.items()
            if role not in AGGREGATOR_ROLES or role in self.aggregator_roles
        }
        self.wan_a = self._ns("wan-a")
        self.wan_b = self._ns("wan-b")
        self.delay_line: DelayLine | None = None
        self.link_counters: LinkCounters | None = None
        self._created: list[str] = []

    def _ns(self, role: str) -> str:
        return f"{PREFIX}{self.run_id}-{role}"

    @property
    def namespaces(self) -> list[str]:
        return [self.wan_a, self.wan_b, *(host.namespace for host in self.hosts.values())]

    def address(self, role: str) -> str:
        return self.hosts[role].address

    def command(self, role: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run on host ``role``: in its namespace, with its host name. Every step execs the
        next (ip, unshare, sh), so the PID of the returned command is the program's."""
        host = self.hosts[role]
        return ["ip", "netns", "exec", host.namespace, "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                host.name, *argv]

    def hosts_file(self) -> str:
        """/etc/hosts of every namespace: localhost and the name of every host."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{host.address} {host.name} {host.role}" for host in self.hosts.values()]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Topology:
        sweep_stale()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _build(self) -> None:
        for namespace in self.namespaces:
            run(["ip", "netns", "add", namespace])
            self._created.append(namespace)
            etc = ETC_NETNS / namespace
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(self.hosts_file())
            run(["ip", "-n", namespace, "link", "set", "lo", "up"])
            # No IPv6: router solicitations would cross the WAN and muddle its packet counts.
            settings = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1", **self.sysctls}
            self._sysctl(namespace, settings)
        for router, subnet in ((self.wan_a, BEAMLINE_SUBNET), (self.wan_b, COMPUTE_SUBNET)):
            run(["ip", "netns", "exec", router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            run(["ip", "-n", router, "link", "add", "br0", "mtu", str(self.mtu), "type", "bridge"])
            run(["ip", "-n", router, "addr", "add", f"{subnet}.1/24", "dev", "br0"])
            run(["ip", "-n", router, "link", "set", "br0", "up"])
        for host in self.hosts.values():
            router, subnet = (self.wan_b, COMPUTE_SUBNET) if host.side == "compute" else (self.wan_a, BEAMLINE_SUBNET)
            port = f"v-{host.role}"
            run(["ip", "-n", router, "link", "add", port, "mtu", str(self.mtu), "type", "veth",
                 "peer", "name", "eth0", "netns", host.namespace])
            run(["ip", "-n", router, "link", "set", port, "master", "br0", "up"])
            run(["ip", "-n", host.namespace, "link", "set", "eth0", "mtu", str(self.mtu), "up"])
            run(["ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0"])
            run(["ip", "-n", host.namespace, "route", "add", "default", "via", f"{subnet}.1"])
            if host.role in self.aggregator_roles and self.aggregator_rate_mbit is not None:
                self._shape(host.namespace, "eth0", self.aggregator_rate_mbit)
                self._shape(router, port, self.aggregator_rate_mbit)
        self.delay_line = DelayLine.start(
            ["ip", "netns", "exec", self.wan_a], tun_a="wan0", tun_b="wan1", delay_ms=self.delay_ms,
            loss=self.loss, seed=self.seed, mtu=self.mtu, max_run_s=self.max_run_s)
        # The TUN stays open in the delay line; moving it keeps the descriptor working.
        run(["ip", "-n", self.wan_a, "link", "set", "wan1", "netns", self.wan_b])
        for router, tun, local, peer, far in ((self.wan_a, "wan0", WAN_A_ADDRESS, WAN_B_ADDRESS, COMPUTE_SUBNET),
                                              (self.wan_b, "wan1", WAN_B_ADDRESS, WAN_A_ADDRESS, BEAMLINE_SUBNET)):
            # A long queue: the TUN drops (uncounted by the delay line) what its queue cannot hold.
            run(["ip", "-n", router, "link", "set", tun, "mtu", str(self.mtu), "txqueuelen", "20000", "up"])
            run(["ip", "-n", router, "addr", "add", local, "peer", peer, "dev", tun])
            run(["ip", "-n", router, "route", "add", f"{far}.0/24", "dev", tun])
            if self.rate_mbit is not None:
                self._shape(router, tun, self.rate_mbit)
        log.info("netlab %s: %d namespaces, WAN %.1f ms one way, loss %g", self.run_id, len(self.namespaces),
                 self.delay_ms, self.loss)

    @staticmethod
    def _sysctl(namespace: str, settings: dict[str, str]) -> None:
        """Set ``settings`` inside ``namespace`` and read them back: some net.* keys (net.core.rmem_max,
        wmem_max on this kernel) belong to the machine and cannot be set in a namespace."""
        run(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings.items())],
            check=False)
        for key, value in settings.items():
            now = run(["ip", "netns", "exec", namespace, "sysctl", "-n", key]).stdout.split()
            if now != value.split():
                raise NetlabError(f"{key} = {value} did not take inside namespace {namespace} (it reads "
                                  f"{' '.join(now)}): the key is the machine's, not the namespace's, here")

    def _shape(self, namespace: str, device: str, rate_mbit: float) -> None:
        # tbf: the bucket holds at least one MTU and 1 ms of the rate; the queue 1/4 s of it.
        rate_bytes_s = rate_mbit * 1e6 / 8
        burst = max(self.mtu * 4, int(rate_bytes_s / 1000))
        run(["tc", "-n", namespace, "qdisc", "add", "dev", device, "root", "tbf", "rate", f"{rate_mbit}mbit",
             "burst", str(burst), "limit", str(max(burst * 2, int(rate_bytes_s / 4)))])

    def link_down(self) -> None:
        """Take the WAN down: the delay line drops (and counts) every packet until ``link_up``."""
        assert self.delay_line is not None
        self.delay_line.down()

    def link_up(self) -> None:
        assert self.delay_line is not None
        self.delay_line.up()

    def cut_port(self, role_a: str, role_b: str, port: int) -> None:
        """Cut one service's link between hosts ``role_a`` and ``role_b``: every TCP packet between
        them to or from ``port`` (on either host) is dropped, each way, until ``heal_port``; every
        other path between them stays up (a kvstore pair's peer link, P + 3, without its mirror)."""
        self._port_rules("-A", role_a, role_b, port)

    def heal_port(self, role_a: str, role_b: str, port: int) -> None:
        """Undo ``cut_port``: TCP retransmits what the cut held."""
        self._port_rules("-D", role_a, role_b, port)

    def _port_rules(self, action: str, role_a: str, role_b: str, port: int) -> None:
        # Each host drops what comes from the other to its port (the other's connection to it) and
        # from the other's port (the replies on its own connection there): both connections, both ways.
        for host, peer in ((role_a, role_b), (role_b, role_a)):
            for side in ("--dport", "--sport"):
                run(["ip", "netns", "exec", self.hosts[host].namespace, "iptables", action, "INPUT", "-s",
                     self.address(peer), "-p", "tcp", side, str(port), "-j", "DROP"])

    def _bridge_port(self, role: str) -> tuple[str, str]:
        host = self.hosts[role]
        return (self.wan_b if host.side == "compute" else self.wan_a), f"v-{role}"

    def cut_host(self, role: str) -> None:
        """Take host ``role``'s link down (its bridge port): its processes run on, and every packet to or
        from it is lost until ``heal_host``, as when a cable or a switch port fails."""
        router, port = self._bridge_port(role)
        run(["ip", "-n", router, "link", "set", port, "down"])

    def heal_host(self, role: str) -> None:
        """Bring host ``role``'s link back up after ``cut_host``."""
        router, port = self._bridge_port(role)
        run(["ip", "-n", router, "link", "set", port, "up"])

    def remove_host(self, role: str) -> None:
        """Kill everything running on ``role`` and delete its namespace: a node lost mid-scan."""
        namespace = self.hosts[role].namespace
        _remove_namespace(namespace)
        if namespace in self._created:
            self._created.remove(namespace)

    def close(self) -> None:
        """Remove everything this topology created; safe to call twice."""
        try:
            if self.delay_line is not None:
                self.link_counters = self.delay_line.stop()
                self.delay_line = None
        finally:  # whatever stopping the line did, the namespaces go
            for namespace in reversed(self._created):
                _remove_namespace(namespace)
            self._created.clear()
