"""NodeGroups: receive a scan's sectors on compute nodes, assemble and count its frames, gather
the parts on MPI rank 0 and write ``FOURD_<scan:010d>_counted.h5``.

``NodeGroup`` is the C++ data path (``sectorflow._core.nodegroup``); ``nodegroup_service`` runs
the NodeGroups of an MPI rank with their kvstore presence; ``gather`` merges a scan's parts on
rank 0 and writes the file with :mod:`sectorflow.consumer.counting.counted_file`. ``virtual_images``
computes the virtual images of events as a NodeGroup does while counting, with the per-frame kernels
``KernelChoice`` names (frame_kernel.hpp; ``frame_kernels()``: every registered one).
"""

from sectorflow._core.nodegroup import (
    KernelChoice,
    NodeGroup,
    NodeGroupError,
    NodeGroupSettings,
    ScanProgress,
    ScanResult,
    ThresholdSettings,
    VirtualDetector,
    VirtualDetectors,
    frame_kernels,
    virtual_images,
)

from .gather import GroupResult, ScanGatherer, scan_file_name
from .nodegroup_service import LocalGroup, NodeGroupService, ServiceOptions, options_from, settings_from

__all__ = [
    "GroupResult",
    "KernelChoice",
    "LocalGroup",
    "NodeGroup",
    "NodeGroupError",
    "NodeGroupService",
    "NodeGroupSettings",
    "ScanGatherer",
    "ScanProgress",
    "ScanResult",
    "ServiceOptions",
    "ThresholdSettings",
    "VirtualDetector",
    "VirtualDetectors",
    "frame_kernels",
    "options_from",
    "scan_file_name",
    "settings_from",
    "virtual_images",
]
