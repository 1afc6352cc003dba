"""A pure-Python reference of Esper's data windows over a table, event by event.

Each function replays the rows in table order (time, then the tie-breakers) the way Esper's
window would see them arrive, following the chapter's text rather than the engine's code, and
returns what docs/windows.md says the table function gives: for window kinds a list of
``(window_key, [row ids])``, for retention kinds the list of row ids kept. Times are integers
(microseconds); an event is ``(id, t, key)``.

Example:
    >>> rows = [(1, 10, "a"), (2, 20, "b"), (3, 30, "a")]
    >>> length(rows, 2)
    [(1, [1]), (2, [1, 2]), (3, [2, 3])]
    >>> unique(rows)
    [2, 3]
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

Event = tuple[int, int, Any]


def ordered(rows: list[Event]) -> list[Event]:
    """Table order: time, then id as the tie-breaker (rows whose time is None are dropped)."""
    return sorted((r for r in rows if r[1] is not None), key=lambda r: (r[1], r[0]))


def length(rows: list[Event], n: int) -> list[tuple[int, list[int]]]:
    """win:length(n): at each arrival the window holds the last n events; keyed by arrival number."""
    window: deque[int] = deque(maxlen=n)
    out = []
    for seq, (rid, _, _) in enumerate(ordered(rows), start=1):
        window.append(rid)
        out.append((seq, list(window)))
    return out


def time(rows: list[Event], size: int) -> list[tuple[int, list[int]]]:
    """win:time(size): when an event arrives at t, events at or before t - size have expired.

    Events with equal times arrive together, so each distinct time has one window.
    """
    events = ordered(rows)
    out = []
    for t in sorted({r[1] for r in events}):
        out.append((t, [rid for rid, u, _ in events if t - size < u <= t]))
    return out


def time_accum(rows: list[Event], size: int) -> list[tuple[tuple[int, int], list[int]]]:
    """win:time_accum(size): released when no event arrives for size; keyed by (first t, last t + size)."""
    out: list[tuple[tuple[int, int], list[int]]] = []
    current: list[Event] = []
    for event in ordered(rows):
        if current and event[1] >= current[-1][1] + size:
            out.append(((current[0][1], current[-1][1] + size), [r[0] for r in current]))
            current = []
        current.append(event)
    if current:
        out.append(((current[0][1], current[-1][1] + size), [r[0] for r in current]))
    return out


def length_batch(rows: list[Event], n: int) -> list[tuple[int, list[int]]]:
    """win:length_batch(n): a batch is released when its n-th event arrives."""
    ids = [r[0] for r in ordered(rows)]
    return [(k // n + 1, ids[k:k + n]) for k in range(0, len(ids) - n + 1, n)]


def time_batch(rows: list[Event], size: int, reference: int | None = None) -> list[tuple[int, list[int]]]:
    """win:time_batch(size[, reference]): batches every size from the reference or the first event."""
    events = ordered(rows)
    if not events:
        return []
    ref = events[0][1] if reference is None else reference
    batches: dict[int, list[int]] = {}
    for rid, t, _ in events:
        start = t - (t - ref) % size
        batches.setdefault(start, []).append(rid)
    return sorted(batches.items())


def expr_batch(rows: list[Event], condition: Callable[[Event], bool],
               include_triggering: bool = True) -> list[tuple[int, list[int]]]:
    """win:expr_batch(condition[, include]): the batch is released when an arriving event meets it."""
    out, batch, number = [], [], 1
    for event in ordered(rows):
        if condition(event) and not include_triggering:
            if batch:
                out.append((number, batch))
            batch, number = [], number + 1
        batch.append(event[0])
        if condition(event) and include_triggering:
            out.append((number, batch))
            batch, number = [], number + 1
    return out


def firstlength(rows: list[Event], n: int) -> list[int]:
    return [r[0] for r in ordered(rows)[:n]]


def firsttime(rows: list[Event], size: int) -> list[int]:
    events = ordered(rows)
    return [r[0] for r in events if r[1] < events[0][1] + size]


def unique(rows: list[Event]) -> list[int]:
    """std:unique(key): each arrival replaces the previous event of its key."""
    latest: dict[Any, int] = {}
    for rid, _, key in ordered(rows):
        latest.pop(key, None)
        latest[key] = rid
    return sorted(latest.values())


def firstunique(rows: list[Event]) -> list[int]:
    first: dict[Any, int] = {}
    for rid, _, key in ordered(rows):
        first.setdefault(key, rid)
    return sorted(first.values())


def sort(rows: list[Event], n: int, value: Callable[[Event], Any]) -> list[int]:
    """ext:sort(n, value asc): insert each arrival, then drop the worst; among equal values the newest goes."""
    window: list[tuple[Any, int, int]] = []
    for arrival, event in enumerate(ordered(rows)):
        window.append((value(event), arrival, event[0]))
        window.sort()
        if len(window) > n:
            window.pop()
    return sorted(rid for _, _, rid in window)


def time_length_batch(rows: list[Event], size: int, count: int) -> list[tuple[tuple[int, int], list[int]]]:
    """win:time_length_batch(size, count): released after size or at the count-th event, whichever first.

    Keyed by (interval start, release time). A release by count restarts the interval at that event;
    a release by time starts the next interval at once if this or the previous interval had events.
    The last batch, still open, is keyed by its interval's end.
    """
    out: list[tuple[tuple[int, int], list[int]]] = []
    batch: list[int] = []
    deadline = start = None
    previous_had_events = False
    for rid, t, _ in ordered(rows):
        while deadline is not None and t >= deadline:
            had_events = bool(batch)
            if batch:
                out.append(((start, deadline), batch))
                batch = []
            if had_events or previous_had_events:
                start, deadline = deadline, deadline + size
            else:
                deadline = None
            previous_had_events = had_events
        if deadline is None:
            start, deadline = t, t + size
        batch.append(rid)
        if len(batch) == count:
            out.append(((start, t + 1), batch))
            batch, previous_had_events, start, deadline = [], True, t, t + size
    if batch:
        out.append(((start, deadline), batch))
    return out
