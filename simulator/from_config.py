"""Build the detector simulator from a validated configuration."""

from __future__ import annotations

from sectorflow._core.simulator import Pacer, Simulator, SimulatorSettings
from sectorflow.configs import Config, SimulatorConfig


def settings_from_config(simulator: SimulatorConfig) -> SimulatorSettings:
    """The C++ settings for a ``[simulator]`` table (all but ``rate_hz``, the pacer's, and
    ``first_frame``, which numbers a scan's frames: the producer's ``ScanRequest.first_frame``).

    Raises SimulatorError if a value is outside what the generator supports (for example an
    electron spread above 10 pixels), naming the setting.
    """
    return SimulatorSettings(
        seed=simulator.seed,
        dose_per_frame=simulator.dose_per_frame,
        electron_adu=simulator.electron_adu,
        electron_spread_px=simulator.electron_spread_px,
        dark_mean_adu=simulator.dark_mean_adu,
        dark_sigma_adu=simulator.dark_sigma_adu,
        bright_field_radius_px=simulator.bright_field_radius_px,
        dropped_fraction=simulator.dropped_fraction,
        specimen=simulator.specimen,
        specimen_grain_px=simulator.specimen_grain_px,
        specimen_bright_field=simulator.specimen_bright_field,
        specimen_dark_field=simulator.specimen_dark_field,
        specimen_shift_px=simulator.specimen_shift_px,
    )


def simulator_from_config(config: Config) -> Simulator:
    """The simulator of ``config``: its ``[simulator]`` settings on its ``[detector]`` geometry."""
    return Simulator(settings_from_config(config.simulator), config.geometry())


def pacer_from_config(config: Config) -> Pacer:
    """A pacer at ``simulator.rate_hz`` frames per second (0: unpaced), its epoch now."""
    return Pacer(config.simulator.rate_hz)
