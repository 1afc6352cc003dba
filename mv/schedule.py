"""When a view's SCHEDULE or TRIGGER clause says it is due for a refresh.

The clause is stored as written (statements.py); its three forms mean:
    SCHEDULE EVERY 15 MINUTES                        due 15 minutes after the last refresh started
    SCHEDULE CRON '0 * * * *' [AT TIME ZONE 'tz']    due once a cron time has passed since the last
                                                     refresh (the view's time zone unless AT TIME ZONE)
    TRIGGER ON UPDATE [AT MOST EVERY INTERVAL ...]   due when a source has a Delta version the last
                                                     refresh did not process (or, under IDLE AFTER, the
                                                     clock closes windows), and the interval is over
A view never refreshed is due; a view without the clause never is (refresh it by name).
`is_due` is pure, so a test drives it with any clock; `due` gathers its inputs from Spark.

Example:
    >>> now = datetime(2024, 1, 1, 12, 5, tzinfo=timezone.utc)
    >>> is_due("SCHEDULE CRON '0 * * * *'", now, last_refresh=now - timedelta(minutes=10))
    True
    >>> is_due("SCHEDULE EVERY 15 MINUTES", now, last_refresh=now - timedelta(minutes=10))
    False
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pyspark.sql import SparkSession

from mv import errors
from mv.catalog import View
from mv.delta_tables import lookup
from mv.query import interval_micros
from mv.run import clock_closes
from mv.state import read
from mv.statements import tokenize

UNITS = {"MINUTE": timedelta(minutes=1), "HOUR": timedelta(hours=1), "DAY": timedelta(days=1),
         "SECOND": timedelta(seconds=1)}
# Five cron fields: name, smallest and largest value, names allowed in place of numbers.
FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
          ("month", 1, 12, {m: i + 1 for i, m in enumerate(
              "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}),
          ("day of week", 0, 7, {d: i for i, d in enumerate("SUN MON TUE WED THU FRI SAT".split())}))
MACROS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}
LOOK_BACK_DAYS = 5 * 366  # a cron that has not fired in five years is taken to never fire


@dataclass(frozen=True)
class Cron:
    """A five-field cron expression (minute hour day-of-month month day-of-week), as Vixie cron reads it."""
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day of month written as *: only the weekday restricts the day
    any_weekday: bool  # day of week written as *: only the day of month restricts the day

    @classmethod
    def parse(cls, expression: str) -> Cron:
        text = MACROS.get(expression.strip().lower(), expression)
        parts = text.split()
        if len(parts) != 5:
            raise errors.schedule(f"CRON '{expression}'", f"it has {len(parts)} fields, not 5")
        sets = [_field(part, spec, expression) for part, spec in zip(parts, FIELDS)]
        weekdays = frozenset(d % 7 for d in sets[4])
        return cls(*sets[:4], weekdays, parts[2].startswith("*"), parts[4].startswith("*"))

    def day_matches(self, day: date) -> bool:
        in_days, in_weekdays = day.day in self.days, (day.isoweekday() % 7) in self.weekdays
        if day.month not in self.months:
            return False
        if self.any_day or self.any_weekday:
            return in_days and in_weekdays
        return in_days or in_weekdays  # both restricted: either one will do, as in cron

    def previous(self, moment: datetime) -> datetime | None:
        """The latest minute at or before `moment` (a wall-clock time) the expression names, or None."""
        latest = moment.replace(second=0, microsecond=0, tzinfo=None)
        for back in range(LOOK_BACK_DAYS):
            day = moment.date() - timedelta(days=back)
            if not self.day_matches(day):
                continue
            for hour in sorted(self.hours, reverse=True):
                for minute in sorted(self.minutes, reverse=True):
                    candidate = datetime.combine(day, datetime.min.time()).replace(hour=hour, minute=minute)
                    if candidate <= latest:
                        return candidate
        return None


def _field(part: str, spec: tuple, expression: str) -> frozenset[int]:
    """One cron field: `*`, `5`, `1-5`, `*/15`, `10-50/10`, `MON-FRI` and lists of them."""
    name, low, high, names = spec
    values: set[int] = set()
    for item in part.upper().split(","):
        match = re.fullmatch(r"(\*|\w+)(?:-(\w+))?(?:/(\d+))?", item)
        if match is None:
            raise errors.schedule(f"CRON '{expression}'", f"the {name} field has '{item}'")
        first, last, step = match.groups()
        start = low if first == "*" else _value(first, names, name, expression)
        end = (high if first == "*" or step else start) if last is None else _value(last, names, name, expression)
        if not (low <= start <= end <= high) or (step is not None and int(step) == 0):
            raise errors.schedule(f"CRON '{expression}'", f"the {name} field's '{item}' is outside {low}-{high}")
        values.update(range(start, end + 1, int(step or 1)))
    return frozenset(values)


def _value(text: str, names: dict[str, int], name: str, expression: str) -> int:
    if text.isdigit():
        return int(text)
    if text in names:
        return names[text]
    raise errors.schedule(f"CRON '{expression}'", f"the {name} field has '{text}'")


@dataclass(frozen=True)
class Schedule:
    """A parsed SCHEDULE or TRIGGER clause."""
    kind: str  # "every", "cron" or "trigger"
    period: timedelta | None = None
    cron: Cron | None = None
    time_zone: str | None = None
    at_most_every: str | None = None  # the interval as written, e.g. INTERVAL '10' MINUTES


def parse(text: str) -> Schedule:
    """The clause as statements.py stores it, e.g. "SCHEDULE EVERY 15 MINUTES"."""
    tokens = tokenize(text)
    words = [t.text.upper() for t in tokens]
    if words[:3] == ["TRIGGER", "ON", "UPDATE"]:
        interval = text[tokens[6].start:].strip() if words[3:6] == ["AT", "MOST", "EVERY"] else None
        return Schedule("trigger", at_most_every=interval)
    if words[:2] == ["SCHEDULE", "EVERY"] and len(words) == 4 and words[2].isdigit():
        unit = words[3].rstrip("S")
        if unit in UNITS and int(words[2]) > 0:
            return Schedule("every", period=int(words[2]) * UNITS[unit])
    if words[:2] == ["SCHEDULE", "CRON"] and len(tokens) >= 3 and tokens[2].kind == "string":
        zone = _unquote(tokens[6].text) if words[3:6] == ["AT", "TIME", "ZONE"] and len(tokens) > 6 else None
        if zone is not None:
            _zone(zone, text)
        return Schedule("cron", cron=Cron.parse(_unquote(tokens[2].text)), time_zone=zone)
    raise errors.schedule(text, "it is not SCHEDULE EVERY, SCHEDULE CRON or TRIGGER ON UPDATE")


def _unquote(literal: str) -> str:
    return literal[1:-1].replace("''", "'").replace("\\'", "'")


def _zone(name: str, text: str) -> tzinfo:
    """A region (Europe/Paris) or, as Spark's session time zone may be, a fixed offset (+01:00, Z)."""
    offset = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?", name)
    if offset:
        sign = -1 if offset.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(offset.group(2)), minutes=int(offset.group(3) or 0)))
    try:
        return timezone.utc if name == "Z" else ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.schedule(text, f"'{name}' is not a time zone") from None


def simple_interval(text: str) -> timedelta:
    """INTERVAL '10' MINUTES or INTERVAL '10 minutes' (what `due` does not hand to Spark)."""
    match = re.fullmatch(r"INTERVAL\s+'(\d+)(?:\s+(\w+?)S?)?'\s*(?:(\w+?)S?)?", text.strip(), re.IGNORECASE)
    unit = match and (match.group(2) or match.group(3) or "").upper()
    if not match or unit not in UNITS:
        raise errors.schedule(text, "the interval is not of the form INTERVAL '10' MINUTES")
    return int(match.group(1)) * UNITS[unit]


def is_due(schedule: str | None, now: datetime, last_refresh: datetime | None, *, time_zone: str = "UTC",
           sources_changed: bool = False, interval: Callable[[str], timedelta] = simple_interval) -> bool:
    """Whether a view with this SCHEDULE/TRIGGER clause is due at `now` (times are timezone-aware).

    Args:
        schedule: the clause as stored in Definition.schedule, or None (never due).
        last_refresh: when the view's last refresh started, None if it never ran (then it is due).
        time_zone: the view's time zone, for a CRON without AT TIME ZONE.
        sources_changed: for TRIGGER ON UPDATE, whether a source has a version not yet processed.
        interval: turns AT MOST EVERY's interval into a timedelta.
    """
    if schedule is None:
        return False
    parsed = parse(schedule)
    if last_refresh is None:
        return True
    if parsed.kind == "every":
        return now - last_refresh >= parsed.period
    if parsed.kind == "cron":
        fired = last_fire(parsed.cron, now, parsed.time_zone or time_zone)
        return fired is not None and fired > last_refresh
    wait = interval(parsed.at_most_every) if parsed.at_most_every else timedelta(0)
    return sources_changed and now - last_refresh >= wait


def last_fire(cron: Cron, now: datetime, time_zone: str) -> datetime | None:
    """The latest time at or before `now` that `cron` names on the clocks of `time_zone`."""
    zone = _zone(time_zone, time_zone)
    wall = cron.previous(now.astimezone(zone).replace(tzinfo=None))
    for fold in (0, 1):  # fold 1: a wall time skipped when clocks went forward, read with the new offset
        fired = wall.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc) if wall else None
        if fired is not None and fired <= now:
            return fired
    return None


def due(spark: SparkSession, view: View, now: datetime, last_refresh: datetime | None) -> bool:
    """Whether the materialized view `view` is due at `now`, asking Spark what it must."""
    schedule = view.definition.schedule
    if schedule is None:
        return False
    changed = False
    if parse(schedule).kind == "trigger":
        state = read(spark, view.name)
        tables = lookup(spark, list(state.sources)) if state is not None else {}
        changed = state is None or any(tables[t].version != v for t, v in state.sources.items()) \
            or clock_closes(spark, view.definition, state, int(now.timestamp() * 1_000_000))  # IDLE AFTER
    return is_due(schedule, now, last_refresh, time_zone=view.time_zone, sources_changed=changed,
                  interval=lambda text: timedelta(microseconds=interval_micros(spark, text)))


def now_utc() -> datetime:
    return datetime.now(timezone.utc)
