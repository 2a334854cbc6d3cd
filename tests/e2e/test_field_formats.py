"""A scan's counted file as the field reads it: the pipeline's own file holds
NeXus NXevent_data beside stempy's layout, which scippnexus (a NeXus reader from PyPI) reads into the
events stempy reads; ``sectorflow export`` (a real process) writes it as LiberTEM's raw_csr, which
LiberTEM's own loader reads into the same events, and as HyperSpy's .hspy, which RosettaSciIO reads
into the same electrons; bad input ends in one line and exit code 2 or 1."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scippnexus
import stempy.io
from rsciio.hspy import file_reader
from support import sectorflow_command, stack_up

from sectorflow.consumer.nodegroup import scan_file_name

DETECTOR = {"frame_rows": 128, "frame_cols": 128, "sector_rows": 32, "sector_cols": 128}
SIMULATOR = {"bright_field_radius_px": 20.0, "dose_per_frame": 40.0}
COUNTING = {"background_threshold": 30.0, "xray_threshold": 1000.0}
INSTRUMENT = {"scan_step_nm": 2.0, "detector_pixel_um": 10.0, "camera_length_mm": 200.0, "beam_energy_kev": 300.0}
SCAN = 7
ROWS, COLS = 6, 8


@pytest.fixture(scope="module")
def counted(make_module_config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6 x 8 scan's counted file, written by the stack's NodeGroups."""
    tmp_path = tmp_path_factory.mktemp("field_formats")
    config, path = make_module_config(detector=DETECTOR, simulator=SIMULATOR, counting=COUNTING,
                                      instrument=INSTRUMENT)
    output = tmp_path / "h5"
    with stack_up(config, path, tmp_path / "run", output):
        acquired = sectorflow_command("acquire", "--config", str(path), "--scan-number", str(SCAN), "--scan-shape",
                                      f"{COLS}x{ROWS}", "--wait", "--timeout", "120")
        assert acquired.returncode == 0, acquired.stdout + acquired.stderr
    return output / scan_file_name(SCAN)


def stempy_events(path: Path) -> list[np.ndarray]:
    """Each position's events as stempy reads them, scan-major."""
    array = stempy.io.load_electron_counts(str(path))
    assert tuple(array.scan_shape) == (ROWS, COLS)
    return [np.sort(np.asarray(e, dtype=np.int64)) for e in array.data[:, 0]]


def test_scippnexus_reads_the_files_nxevent_data_into_the_events_stempy_reads(counted: Path) -> None:
    ours = stempy_events(counted)
    assert sum(len(e) for e in ours) > 0
    with h5py.File(counted, "r") as f:
        assert f.attrs["NX_class"] == "NXroot" and f.attrs["default"] == "entry"
        assert f["entry"].attrs["NX_class"] == "NXentry" and f["entry"].attrs["default"] == "data"
        assert f["entry/events"].attrs["NX_class"] == "NXevent_data"
        # The NXdata's image is the virtual image itself (a hard link), not a copy.
        data = f["entry/data"]
        assert data.attrs["NX_class"] == "NXdata"
        assert data[data.attrs["signal"]].id == f[f"virtual_images/{data.attrs['signal']}"].id
    entry = scippnexus.load(counted, root="entry")
    events = entry["events"]
    assert events.sizes == {"event_time_zero": ROWS * COLS}
    theirs = [np.asarray(events.values[p].coords["event_id"].values, dtype=np.int64) for p in range(ROWS * COLS)]
    assert all(np.array_equal(a, b) for a, b in zip(theirs, ours, strict=True))
    instrument = entry["instrument"]
    assert instrument["beam"]["incident_energy"].value == 300.0
    assert str(instrument["beam"]["incident_energy"].unit) == "keV"
    # The detector, ESS's way: its events per pixel, the summed diffraction pattern the NodeGroups wrote.
    per_pixel = instrument["detector"]["events"]
    assert per_pixel.coords["distance"].value == 200.0 and str(per_pixel.coords["distance"].unit) == "mm"
    with h5py.File(counted, "r") as f:
        assert np.array_equal(per_pixel.bins.size().values, f["virtual_images/diffraction"][()])
    assert instrument["scan_step"].value == 2.0 and str(instrument["scan_step"].unit) == "nm"


def test_export_to_raw_csr_is_read_by_libertems_loader_into_the_same_events(counted: Path, tmp_path: Path) -> None:
    from libertem.api import Context
    from libertem.udf import UDF

    class Frames(UDF):
        def get_result_buffers(self):  # type: ignore[no-untyped-def]
            return {"frames": self.buffer(kind="nav", extra_shape=tuple(self.meta.dataset_shape.sig), dtype=np.uint8)}

        def process_frame(self, frame):  # type: ignore[no-untyped-def]
            self.results.frames[:] = frame

    toml = tmp_path / "scan7.toml"
    exported = sectorflow_command("export", str(counted), "--to", "raw_csr", str(toml))
    assert exported.returncode == 0, exported.stderr
    assert str(toml) in exported.stdout
    with Context.make_with("inline") as ctx:
        dataset = ctx.load("raw_csr", path=str(toml))
        assert tuple(dataset.shape) == (ROWS, COLS, DETECTOR["frame_rows"], DETECTOR["frame_cols"])
        frames = ctx.run_udf(dataset=dataset, udf=Frames())["frames"].data
    theirs = [np.flatnonzero(frame) for frame in frames.reshape(ROWS * COLS, -1)]
    assert frames.max() == 1
    assert all(np.array_equal(a, b) for a, b in zip(theirs, stempy_events(counted), strict=True))


def test_export_to_hspy_holds_the_regions_electrons_as_hyperspy_reads_them(counted: Path, tmp_path: Path) -> None:
    out = tmp_path / "scan7.hspy"
    exported = sectorflow_command("export", str(counted), "--to", "hspy", str(out), "--region", "1:4,2:7")
    assert exported.returncode == 0, exported.stderr
    [signal] = file_reader(str(out))
    assert signal["data"].shape == (3, 5, DETECTOR["frame_rows"], DETECTOR["frame_cols"])
    assert [a["navigate"] for a in signal["axes"]] == [True, True, False, False]
    assert (signal["axes"][0]["scale"], signal["axes"][0]["offset"], signal["axes"][0]["units"]) == (2.0, 2.0, "nm")
    ours = stempy_events(counted)
    for r in range(3):
        for c in range(5):
            assert np.array_equal(np.flatnonzero(signal["data"][r, c]), ours[(r + 1) * COLS + c + 2])


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--to", "hspy", "OUT.hspy", "--region", "0:9,0:2"], 2, "region '0:9,0:2' is empty or outside the scan of 6 x 8"),
    (["--to", "hspy", "OUT.hspy", "--region", "rows"], 2, "region 'rows': expected ROW0:ROW1,COL0:COL1"),
    (["--to", "hspy", "OUT.h5"], 2, "name the output *.hspy"),
    (["--to", "raw_csr", "OUT.toml", "--region", "0:2,0:2"], 2, "--region applies to --to hspy"),
    (["--to", "hspy", "OUT.hspy", "--max-gb", "0.0001"], 2, "over --max-gb 0.0001: choose a smaller --region"),
])
def test_export_refuses_bad_arguments_in_one_line_with_exit_code_2(counted: Path, tmp_path: Path, args: list[str],
                                                                   code: int, message: str) -> None:
    args = [str(tmp_path / a) if a.startswith("OUT") else a for a in args]
    refused = sectorflow_command("export", str(counted), *args)
    assert refused.returncode == code
    assert message in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not any(tmp_path.iterdir())


def test_export_of_a_file_that_is_not_a_counted_scan_or_onto_an_existing_one_fails_in_one_line(
        counted: Path, tmp_path: Path) -> None:
    missing = sectorflow_command("export", str(tmp_path / "none.h5"), "--to", "raw_csr", str(tmp_path / "a.toml"))
    assert missing.returncode == 2 and "none.h5: no such file" in missing.stderr
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    foreign = sectorflow_command("export", str(other), "--to", "raw_csr", str(tmp_path / "b.toml"))
    assert foreign.returncode == 1 and "not a counted scan in stempy's layout" in foreign.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.h5"]  # nothing begun is left
    taken = tmp_path / "taken.hspy"
    taken.write_text("mine")
    refused = sectorflow_command("export", str(counted), "--to", "hspy", str(taken))
    assert refused.returncode == 1 and "exists; export never replaces a file" in refused.stderr
    assert taken.read_text() == "mine"
    for result in (missing, foreign, refused):
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
