"""Configuration: the TOML files of this folder and the code that loads and validates them.

``load_config(path)`` returns a frozen ``Config``; ``configs/local.toml`` is the default.
``configs/defaults.toml`` is every key at its default, generated from the schema for the C++ side;
``beamline_of(config)`` hands a loaded configuration to the C++ mappings of the option structs.
"""

from .beamline import beamline_of
from .loader import CONFIG_DIR, DEFAULT_CONFIG, DEFAULTS_TABLE, ConfigError, config_from_dict, load_config
from .schema import (
    AggregatorConfig,
    AnalysisConfig,
    Config,
    CountingConfig,
    DashboardConfig,
    InstrumentConfig,
    LibertemConfig,
    DetectorConfig,
    KvstoreConfig,
    LimitsConfig,
    LoggingConfig,
    NodegroupConfig,
    ProducerConfig,
    ReceiverConfig,
    SecurityConfig,
    SimulatorConfig,
    SlurmConfig,
)

__all__ = [
    "CONFIG_DIR",
    "DEFAULT_CONFIG",
    "DEFAULTS_TABLE",
    "AggregatorConfig",
    "AnalysisConfig",
    "Config",
    "ConfigError",
    "CountingConfig",
    "DashboardConfig",
    "InstrumentConfig",
    "LibertemConfig",
    "DetectorConfig",
    "KvstoreConfig",
    "LimitsConfig",
    "LoggingConfig",
    "NodegroupConfig",
    "ProducerConfig",
    "ReceiverConfig",
    "SecurityConfig",
    "SimulatorConfig",
    "SlurmConfig",
    "beamline_of",
    "config_from_dict",
    "load_config",
]
