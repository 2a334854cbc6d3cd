"""A scan's instrument settings: the microscope's scan step, detector pixel, camera length, beam energy
and convergence angle (``[instrument]``, configs/schema.py), as ``sectorflow acquire`` fixes them for
one scan (kvstore/SPEC.md, "Keys and records").

``scans/<n:010d>/instrument`` (ScanInstrument) is written by ``sectorflow acquire`` before the request:
the configuration's ``[instrument]`` values, each replaced by the acquire's option when it gave one
(``--scan-step-nm``, ...), as a microscope's control software would. MPI rank 0 of the NodeGroups reads
it when it writes the scan's file (its own configuration's when the key is absent) and records each
known quantity under ``/metadata/instrument/<quantity>`` with attributes ``value``, ``units`` and
``source`` ("configuration" or "acquire"); unknown ones (0) are left out. The record is a msgpack
map with ``version`` = 1 and ``values`` and ``sources`` keyed by the schema's field names; the
decoder checks every field and raises ProtocolError naming the record and the field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from sectorflow.configs import InstrumentConfig
from sectorflow.protocol import ProtocolError, scan_prefix
from sectorflow.protocol.versioned_map import versioned_map

VERSION = 1
FROM_CONFIGURATION = "configuration"
FROM_ACQUIRE = "acquire"
#: Each [instrument] field's unit suffix as the file writes it (its ``units`` attribute).
UNITS = {"nm": "nm", "um": "um", "mm": "mm", "kev": "keV", "mrad": "mrad"}
#: The scattering angle one detector pixel spans, written when the pixel size and camera length are known.
PIXEL_ANGLE = "detector_pixel_angle"


def instrument_key(scan: int) -> str:
    return scan_prefix(scan) + "instrument"


def fields() -> list[str]:
    """The [instrument] fields, in the schema's order (each name ends in its unit)."""
    return [f.name for f in dataclasses.fields(InstrumentConfig)]


def quantity(name: str) -> tuple[str, str]:
    """A field's quantity and unit: ``scan_step_nm`` -> (``scan_step``, ``nm``)."""
    stem, _, suffix = name.rpartition("_")
    return stem, UNITS[suffix]


@dataclass(frozen=True)
class ScanInstrument:
    """One scan's instrument settings: every [instrument] field's value (0: unknown) and where it came from."""

    values: Mapping[str, float]
    sources: Mapping[str, str]

    @classmethod
    def of(cls, config: InstrumentConfig, given: Mapping[str, float | None] | None = None) -> ScanInstrument:
        """The configuration's values, each replaced by ``given``'s when that is not None."""
        given = given or {}
        values, sources = {}, {}
        for name in fields():
            chosen = given.get(name)
            values[name] = float(getattr(config, name) if chosen is None else chosen)
            sources[name] = FROM_CONFIGURATION if chosen is None else FROM_ACQUIRE
        return cls(values, sources)

    def encode(self) -> bytes:
        return msgpack.packb({"version": VERSION, "values": dict(self.values), "sources": dict(self.sources)})

    @classmethod
    def decode(cls, raw: bytes) -> ScanInstrument:
        """:raises ProtocolError: not a version-1 map of every field's finite value >= 0 and its source."""
        value = versioned_map(raw, "ScanInstrument", VERSION)
        values, sources = value.get("values"), value.get("sources")
        if not isinstance(values, dict) or not isinstance(sources, dict):
            raise ProtocolError("ScanInstrument: fields 'values' and 'sources' must be maps")
        for name in fields():
            number, source = values.get(name), sources.get(name)
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not math.isfinite(number) \
                    or number < 0:
                raise ProtocolError(f"ScanInstrument: values[{name!r}]: expected a finite number >= 0, got {number!r:.80}")
            if source not in (FROM_CONFIGURATION, FROM_ACQUIRE):
                raise ProtocolError(f"ScanInstrument: sources[{name!r}]: expected '{FROM_CONFIGURATION}' or "
                                    f"'{FROM_ACQUIRE}', got {source!r:.80}")
        return cls({n: float(values[n]) for n in fields()}, {n: sources[n] for n in fields()})

    def known(self) -> dict[str, dict[str, Any]]:
        """The known quantities as the file's /metadata/instrument holds them: {quantity: {value, units,
        source}}; with the pixel size and camera length known, also the angle a detector pixel spans."""
        out: dict[str, dict[str, Any]] = {}
        for name, number in self.values.items():
            if number > 0:
                stem, units = quantity(name)
                out[stem] = {"value": number, "units": units, "source": self.sources[name]}
        pixel, length = self.values.get("detector_pixel_um", 0.0), self.values.get("camera_length_mm", 0.0)
        if pixel > 0 and length > 0:
            # um / mm = mrad, for the small angles of a diffraction pattern
            source = FROM_ACQUIRE if FROM_ACQUIRE in (self.sources["detector_pixel_um"],
                                                      self.sources["camera_length_mm"]) else FROM_CONFIGURATION
            out[PIXEL_ANGLE] = {"value": pixel / length, "units": "mrad", "source": source}
        return out


def describe(known: Mapping[str, Mapping[str, Any]]) -> str:
    """One line of the known quantities for a person ("scan step 2.5 nm, beam energy 300 keV"), or "", in the
    schema's order whatever order ``known`` has (a file's groups come back sorted by name)."""
    order = [quantity(name)[0] for name in fields()] + [PIXEL_ANGLE]
    names = sorted(known, key=lambda name: order.index(name) if name in order else len(order))
    return ", ".join(f"{name.replace('_', ' ')} {float(known[name]['value']):g} {known[name]['units']}" for name in names)


__all__ = ["FROM_ACQUIRE", "FROM_CONFIGURATION", "PIXEL_ANGLE", "ScanInstrument", "describe", "fields",
           "instrument_key", "quantity"]
