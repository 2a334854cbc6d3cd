"""The counted scan's events as NeXus ``NXevent_data``, in the counted file beside stempy's layout.

The layout of ESS's file writer, ISIS and SNS (read by scippnexus and Mantid); our events already are
CSR, which is exactly its shape: ``event_id`` the concatenated per-frame pixel indices,
``event_index`` where each frame's events begin. Layout (docs/contracts.md, "NeXus events")::

    /                               attrs: NX_class = NXroot, default = entry (and stempy's version = 3)
    /entry                          NXentry; attrs: default = data (when the file has virtual images)
      program_name                  "sectorflow", attrs: version
      events                        NXevent_data, one "pulse" per frame, scan-major (position p =
                                    row * scan_cols + col); a missing position has no events
        event_id                    uint32 (events,): flat pixel index row * frame_cols + col
        event_index                 int64 (frames,): the frame's first event in event_id
        event_time_offset           float32 (events,), units ns: 0, a frame integrates its
                                    exposure; chunked and never written, so it takes no bytes
                                    (HDF5 returns its fill value); scippnexus requires the field
        scan_row, scan_col          uint32 (frames,): the frame's probe position
        attrs: frame_rows, frame_cols, scan_rows, scan_cols
      instrument                    NXinstrument: every known [instrument] quantity of the scan
                                    (/metadata/instrument) as a field with units and source;
                                    the standard ones also where NeXus names them:
        detector                    NXdetector: detector_number (frame rows, frame cols) int32, the
                                    pixels as event_id numbers them; events, a hard link to
                                    ENTRY/events (ESS's layout: scippnexus reads events per pixel);
                                    x_pixel_size, y_pixel_size (detector_pixel), distance
                                    (camera_length)
        beam                        NXbeam: incident_energy (beam_energy)
      data                          NXdata, when the file has virtual images: signal = the first
                                    virtual detector's image, a hard link to its /virtual_images
                                    dataset (no bytes of its own); axes scan_row, scan_col

No event_time_zero: frames have no time stamps here (the base class makes it optional, scippnexus
reads events without it; Mantid's LoadEventNexus wants it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import h5py

#: The NXentry's path; NXevent_data is ENTRY/events.
ENTRY = "entry"
#: Frames whose events are joined and written at once: the flat copy never holds the whole scan.
_BLOCK_FRAMES = 8192
_CHUNK_EVENTS = 1 << 16  # 256 KiB: a small scan's file is not padded to a large chunk
#: [instrument] quantities NeXus has a field for: (group, NX_class, field names).
_STANDARD = {
    "detector_pixel": ("detector", "NXdetector", ("x_pixel_size", "y_pixel_size")),
    "camera_length": ("detector", "NXdetector", ("distance",)),
    "beam_energy": ("beam", "NXbeam", ("incident_energy",)),
}


def write_nexus_events(f: h5py.File, events: Sequence[np.ndarray], *, scan_shape: tuple[int, int],
                       frame_shape: tuple[int, int], instrument: Mapping[str, Any] | None = None,
                       version: str = "", filters: Mapping[str, Any] | None = None) -> None:
    """Write /entry (NXentry with the scan's NXevent_data and instrument) into an open counted file.

    :param f: the counted file, open for writing, its stempy layout (and any virtual images) written.
    :param events: one uint32 array of ascending flat pixel indices per frame, scan-major (empty
        for a missing position).
    :param scan_shape: (rows, cols) of probe positions.
    :param frame_shape: (rows, cols) of a frame.
    :param instrument: /metadata/instrument's content: {quantity: {value, units, source}}.
    :param version: sectorflow's version, recorded with program_name.
    :param filters: event_id's compression keywords (counted_file.COMPRESSIONS[...]); None: uncompressed.
    """
    f.attrs["NX_class"] = "NXroot"
    f.attrs["default"] = ENTRY
    entry = f.create_group(ENTRY)
    entry.attrs["NX_class"] = "NXentry"
    program = entry.create_dataset("program_name", data="sectorflow")
    program.attrs["version"] = version
    _write_events(entry.create_group("events"), events, scan_shape, frame_shape, filters or {})
    _write_instrument(entry.create_group("instrument"), instrument or {}, frame_shape)
    if _write_default_data(f, entry, scan_shape):
        entry.attrs["default"] = "data"


def _write_events(group: h5py.Group, events: Sequence[np.ndarray], scan_shape: tuple[int, int],
                  frame_shape: tuple[int, int], filters: Mapping[str, Any]) -> None:
    """The events in one pass over blocks of frames: ``events`` may be a list or the file's own
    /electron_events/frames dataset, never read whole."""
    group.attrs["NX_class"] = "NXevent_data"
    frames = len(events)
    event_id = group.create_dataset("event_id", (0,), dtype=np.uint32, chunks=(_CHUNK_EVENTS,), maxshape=(None,),
                                    **filters)
    event_id.attrs["long_name"] = "flat pixel index row * frame_cols + col"
    index = np.zeros(frames, dtype=np.int64)
    total = 0
    for start in range(0, frames, _BLOCK_FRAMES):
        block = events[start:start + _BLOCK_FRAMES]
        lengths = np.fromiter((len(e) for e in block), dtype=np.int64, count=len(block))
        index[start:start + len(block)] = total + np.cumsum(lengths) - lengths
        if lengths.sum():
            event_id.resize((total + int(lengths.sum()),))
            event_id[total:] = np.concatenate([np.asarray(e, dtype=np.uint32) for e in block])
            total += int(lengths.sum())
    group.create_dataset("event_index", data=index)
    offset = group.create_dataset("event_time_offset", (total,), dtype=np.float32, chunks=(_CHUNK_EVENTS,),
                                  maxshape=(None,), fillvalue=0.0)
    offset.attrs["units"] = "ns"
    positions = np.arange(frames, dtype=np.uint32)
    for name, values in (("scan_row", positions // scan_shape[1]), ("scan_col", positions % scan_shape[1])):
        group.create_dataset(name, data=values).attrs["long_name"] = f"probe position's {name[5:]}"
    for name, value in (("frame_rows", frame_shape[0]), ("frame_cols", frame_shape[1]),
                        ("scan_rows", scan_shape[0]), ("scan_cols", scan_shape[1])):
        group.attrs[name] = np.int64(value)


def _write_instrument(group: h5py.Group, instrument: Mapping[str, Any], frame_shape: tuple[int, int]) -> None:
    group.attrs["NX_class"] = "NXinstrument"
    # ESS's layout: the detector's pixels numbered as event_id numbers them, its events a link to
    # ENTRY/events (the same group, no second copy): scippnexus reads the detector as events per pixel.
    detector = group.create_group("detector")
    detector.attrs["NX_class"] = "NXdetector"
    pixels = np.arange(frame_shape[0] * frame_shape[1], dtype=np.int32).reshape(frame_shape)
    detector.create_dataset("detector_number", data=pixels, chunks=(min(frame_shape[0], 64), frame_shape[1]),
                            compression="gzip", compression_opts=4, shuffle=True)
    detector["events"] = group.parent["events"]
    for quantity, known in instrument.items():
        if not isinstance(known, Mapping) or "value" not in known:
            continue
        units = str(known.get("units", ""))
        field = group.create_dataset(quantity, data=np.float64(known["value"]))
        field.attrs["units"] = units
        field.attrs["source"] = str(known.get("source", ""))
        if quantity in _STANDARD:
            name, nx_class, names = _STANDARD[quantity]
            sub = group.require_group(name)
            sub.attrs["NX_class"] = nx_class
            for standard in names:
                sub.create_dataset(standard, data=np.float64(known["value"])).attrs["units"] = units


def _write_default_data(f: h5py.File, entry: h5py.Group, scan_shape: tuple[int, int]) -> bool:
    """An NXdata of the first virtual detector's image (what a NeXus viewer plots first), if any."""
    images = f.get("virtual_images")
    names = [str(n) for n in images.attrs.get("detectors", [])] if images is not None else []
    names = [n for n in names if n in images and images[n].shape == scan_shape] if names else []
    if not names:
        return False
    data = entry.create_group("data")
    data.attrs["NX_class"] = "NXdata"
    data.attrs["signal"] = names[0]
    data.attrs["axes"] = ["scan_row", "scan_col"]
    data[names[0]] = images[names[0]]  # a hard link: the same dataset, no second copy
    data.create_dataset("scan_row", data=np.arange(scan_shape[0], dtype=np.uint32))
    data.create_dataset("scan_col", data=np.arange(scan_shape[1], dtype=np.uint32))
    return True


def read_nexus_events(f: h5py.File) -> list[np.ndarray]:
    """The per-frame events of /entry/events, scan-major, read with h5py.

    :raises KeyError: the file has no NeXus events.
    """
    group = f[f"{ENTRY}/events"]
    flat = group["event_id"][()]
    index = group["event_index"][()]
    ends = np.append(index[1:], len(flat))
    return [flat[start:end] for start, end in zip(index, ends)]


__all__ = ["ENTRY", "read_nexus_events", "write_nexus_events"]
