"""Build the detector simulator from a validated configuration."""

from __future__ import annotations

from sectorflow._core.simulator import Pacer, Simulator, SimulatorSettings, simulator_settings
from sectorflow.configs import Config, SimulatorConfig, beamline_of


def settings_from_config(simulator: SimulatorConfig) -> SimulatorSettings:
    """The C++ settings for a ``[simulator]`` table (all but ``rate_hz``, the pacer's, and
    ``first_frame``, which numbers a scan's frames: the producer's ``ScanRequest.first_frame``).

    Raises SimulatorError if a value is outside what the generator supports (for example an
    electron spread above 10 pixels), naming the setting.
    """
    # The keys are mapped once, in C++ (simulator/src/from_config.cpp), from a configuration at its
    # defaults whose [simulator] is this one.
    return simulator_settings(beamline_of(Config(simulator=simulator)))


def simulator_from_config(config: Config) -> Simulator:
    """The simulator of ``config``: its ``[simulator]`` settings on its ``[detector]`` geometry."""
    return Simulator(settings_from_config(config.simulator), config.geometry())


def pacer_from_config(config: Config) -> Pacer:
    """A pacer at ``simulator.rate_hz`` frames per second (0: unpaced), its epoch now."""
    return Pacer(config.simulator.rate_hz)
