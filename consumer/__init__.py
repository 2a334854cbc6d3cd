"""The consumer side: NodeGroups that receive, assemble and count scans on compute nodes, electron
counting (stempy's algorithm, event for event) and the counted-scan HDF5 file in stempy's layout.

``NodeGroup`` is the C++ data path (``sectorflow._core.consumer``); ``nodegroup_service`` runs
NodeGroups in an MPI rank with their kvstore presence; ``gather`` merges a scan's parts on rank 0
and writes ``FOURD_<scan:010d>_counted.h5``; ``counting`` is the numpy face of the counting
kernels; ``counted_file`` writes and reads the per-scan file.
"""

from sectorflow._core.consumer import (
    BatchCounter,
    Calibration,
    CountingOptions,
    ElectronCounter,
    FrameShape,
    NodeGroup,
    NodeGroupError,
    NodeGroupSettings,
    RowDark,
    ScanProgress,
    ScanResult,
    ThresholdSettings,
)

from .counted_file import FILE_VERSION, CountedScan, read_counted_scan, write_counted_scan
from .gather import GroupResult, ScanGatherer, scan_file_name, wait_for_scan_file
from .nodegroup_service import LocalGroup, NodeGroupService, ServiceOptions, options_from, settings_from
from .counting import (
    STATISTICS_FIELDS,
    Counter,
    CountingError,
    ThresholdStatistics,
    calculate_thresholds,
    count_frame,
    given_thresholds,
    make_calibration,
    statistics_dict,
    thresholds_for_scan,
)

__all__ = [
    "FILE_VERSION",
    "STATISTICS_FIELDS",
    "BatchCounter",
    "Calibration",
    "CountedScan",
    "Counter",
    "CountingError",
    "CountingOptions",
    "ElectronCounter",
    "FrameShape",
    "GroupResult",
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
    "RowDark",
    "ThresholdStatistics",
    "calculate_thresholds",
    "count_frame",
    "given_thresholds",
    "make_calibration",
    "options_from",
    "read_counted_scan",
    "scan_file_name",
    "settings_from",
    "statistics_dict",
    "thresholds_for_scan",
    "wait_for_scan_file",
    "write_counted_scan",
]
