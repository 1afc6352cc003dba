"""Watermarks and when windows close, in microseconds (docs/design.md, rules 10-12).

Watermark = max event time ever processed - delay; it never decreases. A window [start, end) is
closed when watermark >= end - 1 µs, and final (no late row may change it) when
watermark >= end + grace; a row whose window is final goes to the view's __late table.

Example:
    >>> advance(None, max_event_time=600_000_000, delay=60_000_000)
    540000000
    >>> is_closed(window_end=540_000_001, watermark=540_000_000)
    True
"""
from __future__ import annotations

from mv.query import time_sql


def advance(previous: int | None, max_event_time: int | None, delay: int) -> int | None:
    """The watermark after seeing events up to `max_event_time`: never below `previous`."""
    if max_event_time is None:
        return previous
    candidate = max_event_time - delay
    return candidate if previous is None else max(previous, candidate)


def is_closed(window_end: int, watermark: int | None) -> bool:
    return watermark is not None and watermark >= window_end - 1


def closed_sql(window_end: str, watermark: int | None, time_type: str) -> str:
    """SQL of is_closed for the column `window_end` (of `time_type`): false before any watermark.

    Example: closed_sql("window_end", 540_000_000, "timestamp") == "window_end <= timestamp_micros(540000001)"
    """
    return f"{window_end} <= {time_sql(watermark + 1, time_type)}" if watermark is not None else "false"


def is_final(window_end: int, watermark: int | None, grace: int) -> bool:
    return watermark is not None and watermark >= window_end + grace
