"""One scan's counted frames put back in position order, as the asi_tpx3 stream needs them
(libertem_bridge/SPEC.md, "Positions in order"): frames arrive from several NodeGroups in any
order; a position that does not come is given up as empty after ``empty_after_s`` or at the scan's
end, and a frame that comes after its position was sent is counted late and left out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Frames held ahead of a missing position, at most: beyond, the gap is given up at once (its
#: positions go empty) so that a lost position cannot make the bridge hold a whole scan.
MAX_PENDING_FRAMES = 65536
#: Frames a scan holds at most, whatever comes: a scan waiting behind an earlier one (which is
#: released only once that one is over) leaves further frames out, counted late.
MAX_HELD_FRAMES = 4 * MAX_PENDING_FRAMES


@dataclass
class Released:
    """Consecutive positions ready to send: ``indptr`` (u32, from 0) cuts ``indices`` per frame."""

    first: int
    indptr: np.ndarray
    indices: np.ndarray
    empty: int  # positions among them sent empty because they never came (in time)

    @property
    def frames(self) -> int:
        return len(self.indptr) - 1


@dataclass
class InOrder:
    """Frames of one scan of ``positions`` positions, released in order.

    :param empty_after_s: how long a missing position is waited for once a later one arrived.
    """

    positions: int
    empty_after_s: float
    next: int = 0
    pending: dict[int, np.ndarray] = field(default_factory=dict)
    arrived: dict[int, float] = field(default_factory=dict)  # when each pending frame came
    late: int = 0  # frames that came after their position was sent (or twice), left out
    empty: int = 0  # positions released empty

    def add(self, position: int, events: np.ndarray, now: float) -> None:
        if position < self.next or position >= self.positions or position in self.pending or \
                len(self.pending) >= MAX_HELD_FRAMES:
            self.late += 1
            return
        self.pending[position] = events
        self.arrived[position] = now

    @property
    def done(self) -> bool:
        return self.next >= self.positions

    def release(self, now: float, closed: bool) -> Released | None:
        """The positions that can go now, from ``next`` on: every frame in order, and a missing
        position given up when the scan is ``closed``, when frames waited behind it for
        ``empty_after_s``, or when MAX_PENDING_FRAMES wait. None if none can go."""
        first = self.next
        chunks: list[np.ndarray] = []
        lengths: list[int] = []
        empty = 0
        while self.next < self.positions:
            events = self.pending.pop(self.next, None)
            if events is not None:
                del self.arrived[self.next]
                chunks.append(events)
                lengths.append(len(events))
                self.next += 1
                continue
            # Every pending frame is behind the gap: the oldest has waited the longest for it.
            waited = bool(self.arrived) and now - min(self.arrived.values()) >= self.empty_after_s
            if not (closed or waited or len(self.pending) >= MAX_PENDING_FRAMES):
                break
            # Give up the missing positions up to the next one that came (all of them if closed).
            upto = min(self.pending) if self.pending else self.positions
            gap = upto - self.next
            lengths.extend([0] * gap)
            empty += gap
            self.next = upto
        if self.next == first:
            return None
        self.empty += empty
        indptr = np.zeros(len(lengths) + 1, dtype=np.uint32)
        np.cumsum(lengths, out=indptr[1:])
        indices = np.concatenate(chunks).astype(np.uint32, copy=False) if chunks else np.zeros(0, np.uint32)
        return Released(first, indptr, indices, empty)
