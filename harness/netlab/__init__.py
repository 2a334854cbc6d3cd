"""The beamline on one machine: network namespaces for its hosts and a packet-level WAN between the
aggregator side and the compute side (docs/deployment.md "Testing many hosts"). Shared by tests/netlab and
bench/wan.py; needs root.
"""

from .delay_line import DelayLine, DelayLineError, DirectionCounters, LinkCounters
from .topology import AGGREGATOR_ROLES, COMPUTE_ROLES, RECEIVER_ROLES, Host, NetlabError, Topology, sweep_stale

__all__ = ["AGGREGATOR_ROLES", "COMPUTE_ROLES", "RECEIVER_ROLES", "DelayLine", "DelayLineError", "DirectionCounters",
           "Host", "LinkCounters", "NetlabError", "Topology", "sweep_stale"]
