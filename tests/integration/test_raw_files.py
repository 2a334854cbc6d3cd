"""Raw v5 fallback files: our writer, our reader, and stempy's reader as the reference."""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import stempy.io

from sectorflow.protocol import (
    RAW_HEADER_BYTES,
    DataHeader,
    Geometry,
    ProtocolError,
    RawFileError,
    RawFileName,
    RawFileReader,
    RawFileWriter,
    find_raw_files,
    find_replay_files,
    parse_raw_file_name,
    raw_file_name,
)
from sectorflow.configs import SimulatorConfig
from sectorflow.simulator import Simulator, settings_from_config, simulator_from_config

SMALL = Geometry(32, 32, 8, 32, 2)
SCAN_X, SCAN_Y = 4, 3


def header(scan: int, frame: int, sector: int, thread: int = 0, scan_x: int = SCAN_X, scan_y: int = SCAN_Y) -> DataHeader:
    return DataHeader(scan_number=scan, frame_number=frame, sector=sector, scan_x=scan_x, scan_y=scan_y,
                      position_x=frame % scan_x, position_y=frame // scan_x, thread_id=thread)


def write_scan(sim: Simulator, directory: Path, scan: int, threads: int = 1, shuffle: bool = False) -> None:
    """Write every sector of a SCAN_X x SCAN_Y scan; frame f goes to thread f % threads."""
    geometry = sim.geometry
    frames = list(range(SCAN_X * SCAN_Y))
    if shuffle:
        random.Random(scan).shuffle(frames)
    writers = {(s, t): RawFileWriter(directory, scan, s, t, geometry)
               for s in range(geometry.n_sectors) for t in range(threads)}
    try:
        for frame in frames:
            for sector in range(geometry.n_sectors):
                writers[sector, frame % threads].write(header(scan, frame, sector, frame % threads),
                                                       sim.sector(scan, frame, sector))
    finally:
        for writer in writers.values():
            writer.close()


def read_with_stempy(files: list[str]) -> tuple[tuple[int, int], dict[int, np.ndarray]]:
    reader = stempy.io.reader(files, stempy.io.FileVersion.VERSION5, backend="multi-pass")
    frames = {}
    for position in range(SCAN_X * SCAN_Y):
        blocks = reader.read_frames(position)
        assert len(blocks) == 1, f"position {position}: {len(blocks)} blocks"
        frames[position] = np.asarray(blocks[0].data).reshape(576, 576)
    return tuple(reader.scan_shape), frames


@pytest.fixture
def camera_simulator(make_config) -> Simulator:
    config, _ = make_config()  # the real geometry: 576 x 576 in 4 sectors of 144 x 576
    return simulator_from_config(config)


def test_stempy_reads_our_files_frame_for_frame(camera_simulator: Simulator, tmp_path: Path) -> None:
    # Two producer threads per sector, frames written out of order: stempy must place each record
    # by its header's probe position.
    write_scan(camera_simulator, tmp_path, scan=12, threads=2, shuffle=True)
    files = find_raw_files(tmp_path, 12)
    assert len(files) == 8
    scan_shape, frames = read_with_stempy(files)
    assert scan_shape == (SCAN_Y, SCAN_X)
    for position, frame in frames.items():
        assert np.array_equal(frame, camera_simulator.frame(12, position)), f"position {position}"


def test_our_reader_returns_the_records_written(tmp_path: Path) -> None:
    sim = Simulator(settings_from_config(SimulatorConfig(seed=4)), SMALL)
    write_scan(sim, tmp_path, scan=3, threads=2, shuffle=True)
    seen = set()
    for path in find_raw_files(tmp_path, 3):
        with RawFileReader(path, SMALL) as reader:
            for got, pixels in reader:
                assert got == header(3, got.frame_number, reader.name.sector, reader.name.thread_id)
                assert np.array_equal(pixels, sim.sector(3, got.frame_number, got.sector))
                seen.add((got.frame_number, got.sector))
            assert reader.offset == os.path.getsize(path)
    assert seen == {(f, s) for f in range(SCAN_X * SCAN_Y) for s in range(SMALL.n_sectors)}


def test_record_layout_is_the_little_endian_v5_header_then_pixels(tmp_path: Path) -> None:
    pixels = np.arange(SMALL.sector_rows * SMALL.sector_cols, dtype=np.uint16).reshape(8, 32)
    with RawFileWriter(tmp_path, 70000, 2, 5, SMALL) as writer:
        writer.write(DataHeader(scan_number=70000, frame_number=9, sector=2, scan_x=300, scan_y=2,
                                position_x=299, position_y=1, thread_id=5), pixels)
    path = tmp_path / "data_scan0000070000_module2_5.data"
    data = path.read_bytes()
    assert len(data) == RAW_HEADER_BYTES + SMALL.sector_bytes
    assert struct.unpack("<IIHHHH", data[:16]) == (70000, 9, 300, 2, 299, 1)
    assert data[16:] == pixels.astype("<u2").tobytes()


def test_file_names_follow_the_pattern_and_find_sorts_by_sector_then_thread(tmp_path: Path) -> None:
    assert raw_file_name(7, 3, 1) == "data_scan0000000007_module3_1.data"
    assert parse_raw_file_name("/x/data_scan0000000007_module3_1.data") == RawFileName(scan_number=7, sector=3, thread_id=1)
    assert parse_raw_file_name("data_scan7_module3.data") is None
    for name in ("data_scan0000000007_module10_0.data", "data_scan0000000007_module2_1.data",
                 "data_scan0000000007_module2_0.data", "data_scan0000000008_module0_0.data", "notes.txt"):
        (tmp_path / name).touch()
    assert [Path(p).name for p in find_raw_files(tmp_path, 7)] == [
        "data_scan0000000007_module2_0.data", "data_scan0000000007_module2_1.data",
        "data_scan0000000007_module10_0.data",
    ]
    with pytest.raises(RawFileError, match=f"{tmp_path / 'missing'}: cannot list raw files of scan 7"):
        find_raw_files(tmp_path / "missing", 7)


def test_replay_finds_the_partial_files_too_and_never_a_file_being_written(tmp_path: Path) -> None:
    for name in ("data_scan0000000007_module2_0.data", "data_scan0000000007_module2_0.data.partial",
                 "data_scan0000000007_module2_0.data.1.partial", "data_scan0000000007_module2_1.data.writing",
                 "data_scan0000000007_module1_1.data.partial", "data_scan0000000007_module1_1.data.x.partial",
                 "data_scan0000000008_module0_0.data.partial"):
        (tmp_path / name).touch()
    assert [Path(p).name for p in find_replay_files(tmp_path, 7)] == [
        "data_scan0000000007_module1_1.data.partial", "data_scan0000000007_module2_0.data",
        "data_scan0000000007_module2_0.data.1.partial", "data_scan0000000007_module2_0.data.partial",
    ]
    # stempy's pattern (and every reader of whole files) still sees the whole file only.
    assert [Path(p).name for p in find_raw_files(tmp_path, 7)] == ["data_scan0000000007_module2_0.data"]


def test_truncated_file_names_the_file_record_and_byte_offset(tmp_path: Path) -> None:
    sim = Simulator(settings_from_config(SimulatorConfig()), SMALL)
    with RawFileWriter(tmp_path, 1, 0, 0, SMALL) as writer:
        for frame in range(3):
            writer.write(header(1, frame, 0), sim.sector(1, frame, 0))
    path = Path(writer.path)
    record = RAW_HEADER_BYTES + SMALL.sector_bytes
    with open(path, "r+b") as f:
        f.truncate(3 * record - 10)
    reader = RawFileReader(path, SMALL)
    assert next(reader)[0].frame_number == 0
    assert next(reader)[0].frame_number == 1
    with pytest.raises(RawFileError, match=rf"{path}: record 2 at byte {2 * record}: truncated record, "
                                           rf"{record - 10} of {record} bytes"):
        next(reader)


def test_records_of_another_geometry_are_reported_with_the_file(tmp_path: Path) -> None:
    sim = Simulator(settings_from_config(SimulatorConfig()), SMALL)
    with RawFileWriter(tmp_path, 1, 0, 0, SMALL) as writer:
        for frame in range(3):
            writer.write(header(1, frame, 0), sim.sector(1, frame, 0))
    narrow = Geometry(32, 16, 8, 16, 2)
    with pytest.raises(RawFileError, match=rf"{writer.path}: record 1 at byte 272 .*not a whole number of "
                                           r"272-byte records .*written for another geometry"):
        list(RawFileReader(writer.path, narrow))


def test_reader_rejects_a_record_of_another_scan(tmp_path: Path) -> None:
    sim = Simulator(settings_from_config(SimulatorConfig()), SMALL)
    with RawFileWriter(tmp_path, 1, 0, 0, SMALL) as writer:
        writer.write(header(1, 0, 0), sim.sector(1, 0, 0))
    renamed = tmp_path / raw_file_name(2, 0, 0)
    os.rename(writer.path, renamed)
    with pytest.raises(RawFileError, match=rf"{renamed}: record 0 at byte 0 .*scan number 1, but the file name says 2"):
        list(RawFileReader(renamed, SMALL))
    with pytest.raises(RawFileError, match="not a raw file name"):
        RawFileReader(tmp_path / "scan.bin", SMALL)


def test_writer_rejects_what_does_not_belong_in_its_file(tmp_path: Path) -> None:
    sector = np.zeros((8, 32), np.uint16)
    with RawFileWriter(tmp_path, 1, 0, 0, SMALL) as writer:
        with pytest.raises(RawFileError, match=r"this file holds scan 1, sector 0"):
            writer.write(header(1, 0, 1), sector)
        with pytest.raises(RawFileError, match=r"payload of 256 bytes, expected 512"):
            writer.write(header(1, 0, 0), sector[:4])
        with pytest.raises(RawFileError, match=r"probe position \(4, 0\) lies outside the scan of 4 x 3"):
            writer.write(DataHeader(scan_number=1, frame_number=0, sector=0, scan_x=4, scan_y=3, position_x=4,
                                    position_y=0), sector)
        writer.write(header(1, 0, 0), sector)
        with pytest.raises(RawFileError, match=r"scan shape 5 x 3 differs from the file's 4 x 3"):
            writer.write(header(1, 1, 0, scan_x=5), sector)
    assert not writer.is_open and writer.records == 1
    with pytest.raises(RawFileError, match="the file is closed"):
        writer.write(header(1, 1, 0), sector)
    with pytest.raises(RawFileError, match=r"data_scan0000000001_module0_0.data: cannot create: File exists .*"
                                           r"never overwritten"):
        RawFileWriter(tmp_path, 1, 0, 0, SMALL)
    assert issubclass(RawFileError, ProtocolError)


def test_simulate_cli_writes_files_stempy_reads(make_config, tmp_path: Path) -> None:
    config, config_path = make_config()
    out = tmp_path / "raw"
    result = subprocess.run(
        [sys.executable, "-m", "sectorflow", "simulate", "--config", str(config_path),
         "--scan-shape", f"{SCAN_X}x{SCAN_Y}", "--scan-number", "5", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "scan 5: 12 frames (4 x 3) of 4 sectors" in result.stdout
    assert f"wrote 4 raw files to {out}" in result.stdout
    scan_shape, frames = read_with_stempy(find_raw_files(out, 5))
    assert scan_shape == (SCAN_Y, SCAN_X)
    sim = simulator_from_config(config)
    for position, frame in frames.items():
        assert np.array_equal(frame, sim.frame(5, position)), f"position {position}"
