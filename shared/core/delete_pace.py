"""How many deletes a store is sent at once: a window that follows how fast the store answers.

Deleting thousands of objects (vacuum, a group commit's cleanup, checkpoint pruning) goes out in batches
(an Azure blob batch, an S3 ``DeleteObjects``). A store that answers them quickly gets several large
batches at once; one that answers slowly gets fewer, then smaller ones, so that its queue stays short and
the table's other readers and writers are still answered. Sending everything at once to a slow store
(an emulator whose every delete costs more as the container grows, a throttled account) queues more work
than the client's timeout covers: the requests time out after the store took them, are sent again, and
the store falls further behind.

The window halves (first the batches in flight, then the keys per batch) after a round in which a batch
took longer than ``slow`` seconds or failed, and grows back (keys per batch first, then batches in
flight) after a round in which every batch took less than ``fast`` seconds.

Example:
    >>> pace = DeletePace(batch=128, most_lanes=8, start_lanes=2)
    >>> pace.lanes, pace.size
    (2, 128)
    >>> pace.update(longest=0.1, failed=False); pace.lanes
    3
    >>> pace.update(longest=5.0, failed=False); (pace.lanes, pace.size)
    (1, 128)
    >>> pace.update(longest=0.3, failed=True); (pace.lanes, pace.size)
    (1, 64)
    >>> pace.update(longest=0.1, failed=False); (pace.lanes, pace.size)
    (1, 128)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DeletePace:
    """The window of deletes in flight: ``lanes`` batches of ``size`` keys per round (see the module)."""

    batch: int  # the most keys a batch carries
    most_lanes: int  # the most batches in flight
    start_lanes: int = 2
    slow: float = 2.0  # a batch slower than this (seconds) narrows the window
    fast: float = 0.5  # a round whose batches all took less than this widens it
    min_size: int = 8
    lanes: int = field(init=False)  # batches in flight now
    size: int = field(init=False)  # keys per batch now

    def __post_init__(self) -> None:
        self.most_lanes = max(1, self.most_lanes)
        self.lanes = max(1, min(self.start_lanes, self.most_lanes))
        self.size = max(1, self.batch)

    def update(self, longest: float, failed: bool) -> None:
        """Adjust the window after a round whose slowest batch took ``longest`` seconds (``failed``: a
        batch of the round failed)."""
        if failed or longest > self.slow:
            if self.lanes > 1:
                self.lanes //= 2
            else:
                self.size = max(min(self.min_size, self.batch), self.size // 2)
        elif longest < self.fast:
            if self.size < self.batch:
                self.size = min(self.batch, self.size * 2)
            else:
                self.lanes = min(self.most_lanes, self.lanes + 1)
