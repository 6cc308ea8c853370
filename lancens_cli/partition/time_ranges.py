"""Time arithmetic of partition selection: the month / day / hour values a closed range of
dates or times spans, and how far a bound moves so that `year` in a time zone stays safe.

It stands apart because it reasons about calendars and zones (a zone's wall clock, whole
minutes, offset changes), not predicates; `zone_of` also tells `check` which time partition
values an older lancens took in UTC.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as t

from lancens_cli.partition import transforms
from lancens_cli.partition.filter_values import NoSelection
from lancens_cli.partition.spec import PartitionField

CYCLIC = {"month": 12, "day": 31, "hour": 24}  # unit steps in one cycle


# --------------------------------------------------------------------------- zones

_ZONE_SETBACK = dt.timedelta(days=3)  # beyond any backward jump of a zone's wall clock


def bound_slack(field: PartitionField, kind: Any) -> tuple[Any, Any]:
    """How to move a lower and an upper bound so that a monotone transform stays safe."""
    year = field.transform is not None and field.transform.type == "year"
    if year and zone_of(kind) not in (None, "fixed"):

        def down(value: Any) -> Any:
            return value - _ZONE_SETBACK if isinstance(value, dt.datetime) else value

        def up(value: Any) -> Any:
            return value + _ZONE_SETBACK if isinstance(value, dt.datetime) else value

        return down, up
    return (lambda value: value), (lambda value: value)


_FIXED_OFFSET = re.compile(r"^[+-]\d{2}:?\d{2}$")


def zone_of(kind: Any) -> str | None:
    """None for dates, naive timestamps and UTC; "fixed" for a fixed offset; else the name."""
    if not t.is_timestamp(kind) or kind.tz is None or kind.tz.upper() in ("UTC", "Z", "ETC/UTC"):
        return None
    return "fixed" if _FIXED_OFFSET.match(kind.tz) else kind.tz


# --------------------------------------------------------------------------- cyclic ranges


def unit_starts(low: Any, high: Any, unit: str, kind: Any) -> list[Any]:
    """`low` and every instant in (low, high] where the transform's value may change.

    Each value in [low, high] shares its partition value with the latest of these points at
    or before it. Dates, naive and UTC timestamps: the starts of each month / day / hour. A
    timestamp in another zone: every whole minute, for wall time there moves by whole minutes
    between changes of offset, and those fall on whole minutes too (checked: an offset of
    seconds, a zone's local mean time before standard time, is refused). Refused beyond one
    cycle: it would keep every partition anyway.
    """
    if t.is_date(kind):
        return _walk(low, high, "month" if unit == "month" else "day", _next_date)
    if zone_of(kind) is not None:
        return _zoned_minutes(low, high, unit, kind)
    if isinstance(low, dt.datetime) and low.tzinfo is not None:
        low, high = low.astimezone(dt.UTC), high.astimezone(dt.UTC)
    return _walk(low, high, unit, _next_stamp)


_CYCLE_SPAN = {
    "hour": dt.timedelta(days=1),
    "day": dt.timedelta(days=31),
    "month": dt.timedelta(days=366),
}


def _zoned_minutes(low: dt.datetime, high: dt.datetime, unit: str, kind: Any) -> Any:
    """`low` and every whole minute in (low, high], as an array of `kind` (wall time in a
    zone other than UTC changes value only at whole minutes, as long as its offsets are
    whole minutes)."""
    if high - low > _CYCLE_SPAN[unit]:
        raise NoSelection
    minute = 60_000_000
    start = _epoch_micros(low)
    first = -(-start // minute) * minute
    micros = np.concatenate(([start], np.arange(first, _epoch_micros(high) + 1, minute)))
    instants = pa.array(micros, pa.timestamp("us", tz=kind.tz))
    offsets = pc.subtract(
        pc.local_timestamp(instants).cast(pa.int64()), instants.cast(pa.int64())
    ).to_numpy()
    if (offsets % minute).any():
        raise NoSelection  # a zone's local mean time: offsets of seconds
    return instants


def _epoch_micros(value: dt.datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _walk(low: Any, high: Any, unit: str, step: Any) -> list[Any]:
    points, point = [low], step(low, unit)
    while point <= high:
        points.append(point)
        if len(points) > CYCLIC[unit]:
            raise NoSelection
        point = step(point, unit)
    return points


def _next_date(day: dt.date, unit: str) -> dt.date:
    if unit == "month":
        return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return day + dt.timedelta(days=1)


def _next_stamp(stamp: dt.datetime, unit: str) -> dt.datetime:
    if unit == "hour":
        return stamp.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    midnight = stamp.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return midnight + dt.timedelta(days=1)
    return midnight.replace(year=stamp.year + stamp.month // 12, month=stamp.month % 12 + 1, day=1)


def partition_values(field: PartitionField, points: list[Any], kind: Any) -> list[Any]:
    """Partition values of `points`, through the same vectorized code the writer uses."""
    try:
        if isinstance(points, pa.Array):  # whole minutes already: floor `low` to the unit
            array = pc.floor_temporal(points, unit="second").cast(kind)
        else:
            array = pa.array([_floor_to_unit(p, kind) for p in points], type=kind)
        return list(dict.fromkeys(transforms.apply_field(field, [array], len(points)).to_pylist()))
    except Exception:  # noqa: BLE001 - no pruning rather than a guess
        raise NoSelection from None


def _floor_to_unit(point: Any, kind: Any) -> Any:
    """A coarser column cannot hold sub-unit parts; flooring keeps the same date parts."""
    if not t.is_timestamp(kind) or kind.unit in ("us", "ns"):
        return point
    micro = point.microsecond
    return point.replace(microsecond=0 if kind.unit == "s" else micro - micro % 1000)
