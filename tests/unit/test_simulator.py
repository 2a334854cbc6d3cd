"""The detector simulator: determinism, order independence, statistics, geometry and errors."""

from __future__ import annotations

import dataclasses
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from sectorflow.configs import SimulatorConfig, load_config
from sectorflow.errors import SectorflowError
from sectorflow.protocol import Geometry, ProtocolError, RawFileReader
from sectorflow.simulator import (
    Pacer,
    Simulator,
    SimulatorError,
    SimulatorSettings,
    settings_from_config,
    simulate_scan,
    simulator_from_config,
)

def simulator_settings(**values: Any) -> SimulatorSettings:
    """The schema's [simulator] defaults, changed where a test says."""
    return settings_from_config(SimulatorConfig(**values))


# Small geometries: four full-width sectors (like the 4D Camera, scaled down) and a 2 x 2 tiling.
STRIPS = Geometry(32, 32, 8, 32, 2)
TILES = Geometry(32, 32, 16, 16, 2)
SCAN = 3


def sectors_of(frame: np.ndarray, geometry: Geometry) -> list[np.ndarray]:
    """Cut a frame into its sectors the way the geometry tiles it."""
    rows, cols = geometry.sector_rows, geometry.sector_cols
    return [
        frame[geometry.sector_row0(s) : geometry.sector_row0(s) + rows, geometry.sector_col0(s) : geometry.sector_col0(s) + cols]
        for s in range(geometry.n_sectors)
    ]


def test_same_seed_gives_same_bytes() -> None:
    a = Simulator(simulator_settings(seed=11), STRIPS)
    b = Simulator(simulator_settings(seed=11), STRIPS)
    for frame in range(20):
        assert a.frame(SCAN, frame).tobytes() == b.frame(SCAN, frame).tobytes()
        assert np.array_equal(a.electrons(SCAN, frame), b.electrons(SCAN, frame))


def test_different_seed_scan_or_frame_gives_different_bytes() -> None:
    sim = Simulator(simulator_settings(seed=11), STRIPS)
    other = Simulator(simulator_settings(seed=12), STRIPS)
    reference = sim.frame(SCAN, 0).tobytes()
    assert other.frame(SCAN, 0).tobytes() != reference
    assert sim.frame(SCAN + 1, 0).tobytes() != reference
    assert sim.frame(SCAN, 1).tobytes() != reference
    # Sectors of one frame carry their own noise, not copies of each other.
    parts = [sim.sector(SCAN, 0, s).tobytes() for s in range(STRIPS.n_sectors)]
    assert len(set(parts)) == STRIPS.n_sectors


@pytest.mark.parametrize("geometry", [STRIPS, TILES], ids=["4x1 strips", "2x2 tiles"])
def test_sector_generated_alone_equals_sector_of_whole_frame(geometry: Geometry) -> None:
    sim = Simulator(simulator_settings(seed=5, dose_per_frame=60.0), geometry)
    for frame in range(10):
        whole = sim.frame(SCAN, frame)
        assert whole.shape == (geometry.frame_rows, geometry.frame_cols)
        for sector, expected in enumerate(sectors_of(whole, geometry)):
            alone = sim.sector(SCAN, frame, sector)
            assert alone.shape == (geometry.sector_rows, geometry.sector_cols)
            assert np.array_equal(alone, expected), f"frame {frame}, sector {sector}"


def test_generation_order_and_thread_do_not_matter() -> None:
    settings = simulator_settings(seed=8, dose_per_frame=40.0)
    in_order = Simulator(settings, TILES)
    expected = {(f, s): in_order.sector(SCAN, f, s).tobytes() for f in range(12) for s in range(TILES.n_sectors)}

    # A fresh simulator, the same sectors in a shuffled order, spread over two threads that
    # generate into buffers they own, as producer threads do.
    shuffled = Simulator(settings, TILES)
    keys = list(expected)
    random.Random(1).shuffle(keys)

    def generate(key: tuple[int, int]) -> bytes:
        buffer = np.empty((TILES.sector_rows, TILES.sector_cols), np.uint16)
        shuffled.generate_sector(SCAN, key[0], key[1], buffer)
        return buffer.tobytes()

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dict(zip(keys, pool.map(generate, keys)))
    assert got == expected


def test_strikes_straddling_sector_boundaries_keep_their_whole_charge() -> None:
    # No dark level and a big electron signal: a frame's total ADU is the electrons' charge up to
    # rounding (at most 0.5 ADU on each of a footprint's 7 x 7 pixels). Strikes stay well inside
    # the frame (bright-field disk), so charge is lost only if sectors disagreed about strikes
    # that cross their boundaries, which on 2 x 2 tiles of 16 x 16 many do.
    adu = 10000.0
    sim = Simulator(
        simulator_settings(seed=2, dose_per_frame=6.0, electron_adu=adu, dark_mean_adu=0.0, dark_sigma_adu=0.0,
                          bright_field_radius_px=10.0),
        Geometry(32, 32, 16, 16, 4),
    )
    straddling = 0
    for frame in range(50):
        electrons = sim.electrons(SCAN, frame)
        near_boundary = np.abs(electrons - 16.0) < 3.0
        straddling += int(near_boundary.any(axis=1).sum())
        total = int(sim.frame(SCAN, frame).sum(dtype=np.int64))
        assert abs(total - len(electrons) * adu) <= len(electrons) * 49 * 0.5, f"frame {frame}"
    assert straddling > 20  # the test exercised what it claims


def test_mean_dose_matches_the_configured_dose() -> None:
    for dose, frames in ((20.0, 4000), (150.0, 2000)):  # both Poisson samplers
        sim = Simulator(simulator_settings(seed=4, dose_per_frame=dose), STRIPS)
        counts = np.array([sim.electron_count(SCAN, f) for f in range(frames)])
        assert counts.mean() == pytest.approx(dose, rel=0.03)
        assert counts.var() == pytest.approx(dose, rel=0.15)  # Poisson: variance = mean
        assert len(sim.electrons(SCAN, 7)) == counts[7]


def test_electrons_are_where_the_frame_is_bright() -> None:
    sim = Simulator(simulator_settings(seed=6, dose_per_frame=10.0, electron_spread_px=0.5),
                    Geometry(64, 64, 16, 64, 2))
    for frame in range(5):
        image = sim.frame(SCAN, frame).astype(np.int64)
        for row, col in sim.electrons(SCAN, frame):
            r, c = int(row), int(col)
            # At least a quarter of 200 ADU lands on the strike's own pixel for a spread of 0.5.
            assert image[r, c] >= 20 + 50, f"frame {frame}: strike at ({row:.1f}, {col:.1f})"


def test_dark_level_mean_and_sigma_on_electron_free_pixels() -> None:
    settings = simulator_settings(seed=9, dose_per_frame=20.0, dark_mean_adu=20.0, dark_sigma_adu=2.2)
    geometry = Geometry(96, 96, 24, 96, 2)
    sim = Simulator(settings, geometry)
    rows, cols = np.mgrid[0 : geometry.frame_rows, 0 : geometry.frame_cols]
    dark = []
    for frame in range(40):
        image = sim.frame(SCAN, frame)
        free = np.ones(image.shape, bool)
        for row, col in sim.electrons(SCAN, frame):
            free &= (np.abs(rows - int(row)) > 4) | (np.abs(cols - int(col)) > 4)
        dark.append(image[free])
    dark = np.concatenate(dark).astype(np.float64)
    assert dark.size > 200_000
    assert dark.mean() == pytest.approx(20.0, abs=0.05)
    assert dark.std() == pytest.approx(2.2, rel=0.03)  # integer ADU adds 1/12 of variance


def test_dose_zero_gives_dark_frames_only() -> None:
    sim = Simulator(simulator_settings(seed=1, dose_per_frame=0.0), STRIPS)
    assert sim.electron_count(SCAN, 0) == 0
    assert sim.electrons(SCAN, 0).shape == (0, 2)
    assert sim.frame(SCAN, 0).max() < 20 + 5 * 2.2


@pytest.mark.parametrize("fraction, draws", [(0.001, 400_000), (0.1, 100_000)])
def test_dropped_fraction_matches_the_configured_fraction(fraction: float, draws: int) -> None:
    sim = Simulator(simulator_settings(seed=3, dropped_fraction=fraction), STRIPS)
    frames = draws // STRIPS.n_sectors
    dropped = sum(sim.dropped(SCAN, f, s) for f in range(frames) for s in range(STRIPS.n_sectors))
    # Four standard deviations of a binomial count.
    expected = fraction * draws
    assert abs(dropped - expected) <= 4 * np.sqrt(expected * (1 - fraction))
    assert [sim.dropped(SCAN, f, 0) for f in range(500)] == [sim.dropped(SCAN, f, 0) for f in range(500)]


def test_dropped_fraction_zero_and_one_are_exact() -> None:
    never = Simulator(simulator_settings(dropped_fraction=0.0), STRIPS)
    always = Simulator(simulator_settings(dropped_fraction=1.0), STRIPS)
    assert not any(never.dropped(SCAN, f, s) for f in range(2000) for s in range(4))
    assert all(always.dropped(SCAN, f, s) for f in range(2000) for s in range(4))


def test_bright_field_disk_keeps_strikes_inside_the_radius() -> None:
    radius, spread = 6.0, 0.7
    geometry = Geometry(64, 64, 16, 64, 2)
    sim = Simulator(simulator_settings(seed=7, dose_per_frame=30.0, bright_field_radius_px=radius,
                                      electron_spread_px=spread), geometry)
    rows, cols = np.mgrid[0:64, 0:64]
    # Pixel centres beyond the disk plus the footprint (3 sigma, rounded up, plus a pixel).
    outside = np.hypot(rows + 0.5 - 32.0, cols + 0.5 - 32.0) > radius + 3 + 2
    for frame in range(30):
        electrons = sim.electrons(SCAN, frame)
        assert len(electrons) > 0
        assert (np.hypot(electrons[:, 0] - 32.0, electrons[:, 1] - 32.0) <= radius).all()
        assert sim.frame(SCAN, frame)[outside].max() < 20 + 5 * 2.2, f"frame {frame}"


@pytest.mark.parametrize("itemsize, dtype", [(1, np.uint8), (2, np.uint16), (4, np.uint32)])
def test_pixels_have_the_geometry_dtype_and_saturate_at_its_maximum(itemsize: int, dtype: type) -> None:
    geometry = Geometry(16, 16, 8, 8, itemsize)
    sim = Simulator(simulator_settings(seed=1, dose_per_frame=30.0, electron_adu=1e6, electron_spread_px=0.0),
                    geometry)
    frame = sim.frame(SCAN, 0)
    assert frame.dtype == dtype and frame.shape == (16, 16)
    if itemsize < 4:
        assert frame.max() == np.iinfo(dtype).max  # clipped, not wrapped
    else:
        assert 1_000_000 <= frame.max() < np.iinfo(dtype).max  # room for the whole signal


def test_scan_summary_counts_every_sector_once() -> None:
    sim = Simulator(simulator_settings(seed=2, dropped_fraction=0.1), STRIPS)
    summary = simulate_scan(sim, SCAN, 5, 4)
    assert summary.frames == 20
    assert summary.sectors_generated + summary.sectors_dropped == 20 * STRIPS.n_sectors
    assert summary.sectors_dropped == sum(sim.dropped(SCAN, f, s) for f in range(20) for s in range(4))
    assert summary.bytes == summary.sectors_generated * STRIPS.sector_bytes
    assert summary.electrons == sum(sim.electron_count(SCAN, f) for f in range(20))
    assert summary.files == ()
    assert "20 frames (5 x 4)" in summary.describe()


def test_raw_files_of_a_scan_carry_the_detectors_counter_from_first_frame(tmp_path) -> None:
    sim = Simulator(simulator_settings(seed=4), STRIPS)
    summary = simulate_scan(sim, SCAN, 3, 2, out_dir=tmp_path, first_frame=4_000)
    assert len(summary.files) == STRIPS.n_sectors
    for path in summary.files:
        with RawFileReader(path, STRIPS) as records:
            for header, pixels in records:
                position = header.position_y * 3 + header.position_x
                assert header.frame_number == 4_000 + position
                assert np.array_equal(pixels, sim.sector(SCAN, position, header.sector))
    with pytest.raises(SectorflowError, match=r"first frame 4294967292 \+ 6 positions - 1 exceeds the largest frame "
                                              r"number, 4294967295 \(\[simulator\] first_frame\)"):
        simulate_scan(sim, SCAN, 3, 2, out_dir=tmp_path / "none", first_frame=2**32 - 4)


def test_settings_from_config_carries_every_simulator_key() -> None:
    config = load_config()
    sim = simulator_from_config(config)
    for field in dataclasses.fields(SimulatorConfig):
        # rate_hz is the pacer's, first_frame the producer's (a scan's frame numbers), not the generator's.
        if field.name not in ("rate_hz", "first_frame"):
            assert getattr(sim.settings, field.name) == getattr(config.simulator, field.name), field.name
    assert sim.geometry.n_sectors == config.detector.n_sectors
    assert settings_from_config(config.simulator).seed == config.simulator.seed


def test_bad_settings_name_the_setting() -> None:
    with pytest.raises(SimulatorError, match="'electron_spread_px' = 11: expected a value from 0 to 10"):
        simulator_settings(electron_spread_px=11.0)
    with pytest.raises(SimulatorError, match="'dropped_fraction' = 1.5"):
        simulator_settings(dropped_fraction=1.5)
    assert issubclass(SimulatorError, SectorflowError)


def test_bad_arguments_are_errors_that_say_what_was_expected() -> None:
    sim = Simulator(simulator_settings(), STRIPS)
    with pytest.raises(SimulatorError, match="scan 3, frame 0: sector 4 out of range; the geometry has 4 sectors"):
        sim.sector(SCAN, 0, 4)
    with pytest.raises(SimulatorError, match="buffer of 100 bytes, expected 512"):
        sim.generate_sector(SCAN, 0, 0, bytearray(100))
    with pytest.raises(SimulatorError, match="must be C-contiguous"):
        sim.generate_sector(SCAN, 0, 0, np.empty((8, 64), np.uint16)[:, ::2])
    with pytest.raises(SimulatorError, match="pixels of 3 bytes are not supported"):
        Simulator(simulator_settings(), Geometry(8, 8, 4, 8, 3))
    with pytest.raises(ProtocolError, match="do not tile"):
        Simulator(simulator_settings(), Geometry(10, 8, 4, 8, 2))


def test_pacer_unpaced_returns_at_once_and_paced_waits_for_the_frame() -> None:
    Pacer(0.0).wait(10**12)  # unpaced: would otherwise sleep for years
    paced = Pacer(1000.0)
    paced.restart()
    assert paced.seconds_until(10**9) > 0  # frame 10^9 at 1 kHz is due in about 11 days
    paced.wait(20)
    assert paced.seconds_until(20) <= 0  # wait returned only once frame 20 was due, by the pacer's own clock
    # A rate a request may carry, so slow that the last frame lies beyond the clock's range: capped.
    assert 0 < Pacer(1e-300).seconds_until(2**32) <= 100 * 365 * 24 * 3600
    with pytest.raises(SimulatorError, match="rate_hz"):
        Pacer(-1.0)
