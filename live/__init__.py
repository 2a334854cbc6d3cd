"""The live stream of a running scan (live/SPEC.md).

Each NodeGroup publishes, a few times a second, the virtual-image values and the electron events
of the frames it counted since its previous update (``publisher.LivePublisher``). Readers:

- ``subscribe(config, scan=..., timeout_s=...)`` yields ``LiveView``: the scan's bright-field,
  dark-field and centre-of-mass images and summed diffraction pattern so far, merged over every
  NodeGroup (what the dashboard and ``sectorflow view`` show);
- ``frames(config, scan=..., timeout_s=...)`` yields ``CountedFrame`` (position, electron events)
  for an analysis of one's own (examples/radial_profile.py).

Neither can slow the counting: a reader that falls behind loses messages, counted by the
NodeGroups (``live_*_dropped`` in their status).
"""

from .subscriber import CountedFrame, LiveView, frames, subscribe

__all__ = ["CountedFrame", "LiveView", "frames", "subscribe"]
