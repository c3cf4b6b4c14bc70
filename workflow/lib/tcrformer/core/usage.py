"""What a job cost and how busy the machine was while it ran: the process's CPU time (user
plus system, over all its threads; not its child processes), the wall time between two
readings, and the machine's 1-, 5- and 15-minute load averages at each.

A job prices itself from these: CPU seconds are what it used, wall seconds what it waited
too, and the load averages say how many other processes shared the cores meanwhile. Like
any time they vary from run to run: they are recorded beside a job's results, never
compared as results.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reading:
    """One reading of the clocks: CPU seconds (time.process_time), wall seconds
    (time.perf_counter, an arbitrary origin) and the load averages (None where the system
    has none)."""

    cpu_seconds: float
    wall_seconds: float
    load_average: tuple[float, float, float] | None


def load_average() -> tuple[float, float, float] | None:
    """The machine's 1-, 5- and 15-minute load averages (runnable processes, averaged); None
    where the system cannot say."""
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return None
    return one, five, fifteen


def reading() -> Reading:
    """The clocks and the load now."""
    return Reading(time.process_time(), time.perf_counter(), load_average())


def usage_since(start: Reading, end: Reading | None = None) -> dict[str, Any]:
    """What a job used from `start` to `end` (None: now): cpu_seconds, wall_seconds, and
    load_average {"start": [1, 5, 15 min], "end": [...]} (each None where the system has
    none)."""
    end = end or reading()

    def listed(load):
        return None if load is None else list(load)

    return {
        "cpu_seconds": end.cpu_seconds - start.cpu_seconds,
        "wall_seconds": end.wall_seconds - start.wall_seconds,
        "load_average": {"start": listed(start.load_average), "end": listed(end.load_average)},
    }
