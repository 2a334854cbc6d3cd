"""Electron counting as stempy does it, event for event, and the counted-scan file stempy opens.

The kernels are C++ (``sectorflow::consumer::counting``, ``sectorflow._core.counting``), run with the GIL
released; ``arrays`` is their numpy face (thresholds from a sample, one frame, a batch, with dark
reference and gain) and ``counted_file`` writes and reads the per-scan HDF5 file in stempy's
layout with a record of what did not arrive. The NodeGroups count with the same kernels.
"""

from sectorflow._core.counting import (
    BatchCounter,
    Calibration,
    CountingOptions,
    ElectronCounter,
    FrameShape,
    RowDark,
    SampleHistogram,
)

from .arrays import (
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
from .counted_file import FILE_VERSION, CountedScan, read_counted_scan, write_counted_scan

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
    "SampleHistogram",
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
