"""The NodeGroup's reduction: electron counting (stempy's algorithm, event for event) and the
counted-scan HDF5 file in stempy's layout.

``counting`` is the numpy face of the C++ kernels (``sectorflow._core.consumer``);
``counted_file`` writes and reads the per-scan file.
"""

from sectorflow._core.consumer import (
    BatchCounter,
    Calibration,
    CountingOptions,
    ElectronCounter,
    FrameShape,
    RowDark,
)

from .counted_file import FILE_VERSION, CountedScan, read_counted_scan, write_counted_scan
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
    "RowDark",
    "ThresholdStatistics",
    "calculate_thresholds",
    "count_frame",
    "given_thresholds",
    "make_calibration",
    "read_counted_scan",
    "statistics_dict",
    "thresholds_for_scan",
    "write_counted_scan",
]
