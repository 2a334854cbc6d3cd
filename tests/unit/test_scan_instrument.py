"""A scan's instrument settings (protocol/scan_instrument.py): the configuration's [instrument], each
replaced by an acquire option, through the kvstore record, to what the file's /metadata/instrument holds."""

from __future__ import annotations

import msgpack
import pytest

from sectorflow.configs import InstrumentConfig
from sectorflow.protocol import ProtocolError
from sectorflow.protocol.scan_instrument import ScanInstrument, describe, fields, instrument_key, quantity


def test_the_acquire_options_replace_the_configuration_and_the_record_round_trips() -> None:
    config = InstrumentConfig(scan_step_nm=1.0, detector_pixel_um=10.0, camera_length_mm=200.0)
    record = ScanInstrument.of(config, {"scan_step_nm": 2.5, "convergence_mrad": 25.0, "beam_energy_kev": None})
    assert ScanInstrument.decode(record.encode()) == record
    assert instrument_key(7) == "scans/0000000007/instrument"
    assert record.known() == {
        "scan_step": {"value": 2.5, "units": "nm", "source": "acquire"},
        "detector_pixel": {"value": 10.0, "units": "um", "source": "configuration"},
        "camera_length": {"value": 200.0, "units": "mm", "source": "configuration"},
        "convergence": {"value": 25.0, "units": "mrad", "source": "acquire"},
        # 10 um at 200 mm: 0.05 mrad a pixel
        "detector_pixel_angle": {"value": 0.05, "units": "mrad", "source": "configuration"},
    }
    assert describe(record.known()) == ("scan step 2.5 nm, detector pixel 10 um, camera length 200 mm, "
                                        "convergence 25 mrad, detector pixel angle 0.05 mrad")


def test_nothing_known_records_nothing() -> None:
    assert ScanInstrument.of(InstrumentConfig()).known() == {}
    assert describe({}) == ""


def test_every_field_names_its_unit() -> None:
    assert [quantity(name) for name in fields()] == [
        ("scan_step", "nm"), ("detector_pixel", "um"), ("camera_length", "mm"), ("beam_energy", "keV"),
        ("convergence", "mrad")]


@pytest.mark.parametrize(("change", "message"), [
    ({"version": 2}, "expected a map with version 1"),
    ({"values": None}, "'values' and 'sources' must be maps"),
    ({"values": {"scan_step_nm": -1.0}}, r"values\['scan_step_nm'\]: expected a finite number >= 0, got -1.0"),
    ({"sources": {"scan_step_nm": "guess"}}, r"sources\['scan_step_nm'\]: expected 'configuration' or 'acquire'"),
])
def test_a_record_that_does_not_decode_names_the_field(change: dict, message: str) -> None:
    record = msgpack.unpackb(ScanInstrument.of(InstrumentConfig()).encode())
    for key, value in change.items():
        record[key] = value if not isinstance(value, dict) else {**record[key], **value}
    with pytest.raises(ProtocolError, match=message):
        ScanInstrument.decode(msgpack.packb(record))
