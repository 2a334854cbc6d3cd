"""A loaded configuration handed to the C++ side as the beamline file it reads.

Each component maps its option struct from a ``Beamline`` once, in C++ beside the component
(``sectorflow/<component>/from_config.hpp``); a receiver program calls that mapping on its file,
and the services on their ``Config`` rendered as TOML here, so that a key reaches its struct by
one path whether C++ or Python read the file.
"""

from __future__ import annotations

import dataclasses

from sectorflow._core.configs import Beamline

from .defaults import config_toml
from .schema import Config, ReceiverConfig


# The last configuration rendered and its Beamline (immutable, thread-safe to read): a service maps
# its one Config again and again (every producer thread of every scan, every kvstore client), and a
# rendering is a TOML text of every key and its parse, about 2 ms. Held by reference, so the
# identity test cannot match a new Config at a freed one's address.
_last: tuple[Config, Beamline] | None = None


def beamline_of(config: Config) -> Beamline:
    """``config`` as a C++ ``Beamline``: every key at the value ``config`` holds (overrides included).

    A configuration made in code without ``[[receivers]]`` (a table alone, as the simulator's
    settings or a test's kvstore client are made from) reads as one default receiver per sector of
    its detector, as configs/defaults.toml does: the C++ reader takes only whole beamlines.

    Raises:
        ConfigError: a value the C++ reader refuses (one the loader would have refused first).
    """
    global _last
    last = _last
    if last is not None and last[0] is config:
        return last[1]
    whole = config if config.receivers else dataclasses.replace(
        config, receivers=tuple(ReceiverConfig() for _ in range(config.detector.n_sectors)))
    beamline = Beamline.parse(config_toml(whole), whole.source)
    _last = (config, beamline)
    return beamline
