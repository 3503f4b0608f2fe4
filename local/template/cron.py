"""EventBridge ``cron(minutes hours day-of-month month day-of-week year)`` expressions, evaluated in UTC.

Supported as AWS documents them: ``*``, ``?``, values, ranges ``a-b``, lists ``a,b``, steps ``*/n`` and
``a-b/n``, month names JAN-DEC, day names SUN-SAT (1 = Sunday), ``L`` (last day of the month), ``nL`` (last
given weekday of the month) and ``n#k`` (k-th given weekday). One of day-of-month and day-of-week must be
``?``. ``W`` (nearest weekday) is refused with a clear error rather than guessed.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

MONTHS = {name: i for i, name in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT",
                                            "NOV", "DEC"], start=1)}
DAYS = {name: i for i, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], start=1)}
_CRON = re.compile(r"^cron\((.*)\)$")


class CronError(ValueError):
    """A cron expression the local engine cannot read; the message says which part and why."""


def _number(text: str, names: dict[str, int], field: str) -> int:
    value = names.get(text.upper()) if names else None
    if value is not None:
        return value
    if not text.isdigit():
        raise CronError(f"{field}: {text!r} is not a number{' or a name' if names else ''}")
    return int(text)


def _values(text: str, lo: int, hi: int, field: str, names: dict[str, int] | None = None) -> frozenset[int]:
    """The set of values a field allows (``*``, values, ranges, lists, steps)."""
    out: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step_text and (not step_text.isdigit() or step < 1):
            raise CronError(f"{field}: bad step in {part!r}")
        if base == "*":
            start, end = lo, hi
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = _number(a, names or {}, field), _number(b, names or {}, field)
        else:
            start = _number(base, names or {}, field)
            end = hi if step_text else start
        if not (lo <= start <= hi and lo <= end <= hi) or start > end:
            raise CronError(f"{field}: {part!r} is outside {lo}-{hi}")
        out.update(range(start, end + 1, step))
    return frozenset(out)


def _aws_weekday(day: dt.date) -> int:
    return (day.weekday() + 1) % 7 + 1  # Python: Monday 0; AWS: Sunday 1


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    days: frozenset[int] | None  # day-of-month values; None when the field is "?"
    last_day: bool  # day-of-month "L"
    weekdays: str | None  # the day-of-week field as written (upper case); None when "?"

    @classmethod
    def parse(cls, expression: str) -> Cron:
        match = _CRON.match(expression.strip())
        if not match:
            raise CronError(f"{expression!r} is not cron(minutes hours day-of-month month day-of-week year)")
        fields = match.group(1).split()
        if len(fields) != 6:
            raise CronError(f"{expression!r}: cron() takes 6 fields, got {len(fields)}")
        minute, hour, dom, month, dow, year = (f.upper() for f in fields)
        if (dom == "?") == (dow == "?"):
            raise CronError(f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'")
        if "W" in dom:
            raise CronError(f"{expression!r}: 'W' (nearest weekday) is not supported by the local engine")
        last_day = dom == "L"
        days = None if dom in ("?", "L") else _values(dom, 1, 31, "day-of-month")
        weekdays = None if dow == "?" else dow
        if weekdays is not None:
            cls._weekday_matches(weekdays, dt.date(2024, 1, 7))  # validate now, not at the first firing
        return cls(_values(minute, 0, 59, "minutes"), _values(hour, 0, 23, "hours"),
                   _values(month, 1, 12, "month", MONTHS), _values(year, 1970, 2199, "year"), days, last_day, weekdays)

    @staticmethod
    def _weekday_matches(spec: str, day: dt.date) -> bool:
        weekday = _aws_weekday(day)
        for part in spec.split(","):
            if "#" in part:
                name, _, nth = part.partition("#")
                if not nth.isdigit() or not 1 <= int(nth) <= 5:
                    raise CronError(f"day-of-week: bad '#' in {part!r}")
                if weekday == _number(name, DAYS, "day-of-week") and (day.day - 1) // 7 + 1 == int(nth):
                    return True
            elif part.endswith("L") and part != "L":
                last = calendar.monthrange(day.year, day.month)[1]
                if weekday == _number(part[:-1], DAYS, "day-of-week") and day.day + 7 > last:
                    return True
            elif weekday in _values("7" if part == "L" else part, 1, 7, "day-of-week", DAYS):
                return True
        return False

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months or day.year not in self.years:
            return False
        if self.weekdays is not None:
            return self._weekday_matches(self.weekdays, day)
        if self.last_day:
            return day.day == calendar.monthrange(day.year, day.month)[1]
        return self.days is not None and day.day in self.days

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        """The first firing strictly after ``moment`` (UTC, whole minutes)."""
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        start = moment.astimezone(dt.UTC).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        day = start.date()
        for _ in range(366 * 8):  # far enough for any expression that fires at all (29 February, leap years)
            if self.day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=dt.UTC)
                        if candidate >= start:
                            return candidate
            day += dt.timedelta(days=1)
        raise CronError("the expression never fires in the next eight years")
