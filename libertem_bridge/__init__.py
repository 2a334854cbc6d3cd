"""The counted frames served to LiberTEM-live (libertem_bridge/SPEC.md): ``sectorflow libertem``
reads the NodeGroups' live stream and serves every scan as one acquisition of LiberTEM-live's
``asi_tpx3`` detector, a sparse CSR stream over TCP."""

from .bridge import Bridge, BridgeCounters
from .server import AcquisitionServer, parse_listen

__all__ = ["AcquisitionServer", "Bridge", "BridgeCounters", "parse_listen"]
