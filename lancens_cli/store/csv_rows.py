"""How every command reads a CSV file: `write`, `merge` and `create table --from` in this
process, and the Spark tasks of `ingest` and `merge` (`pipeline/files_source.py`). One reader, so
one file gives one set of rows whichever engine the input's size picks (docs/decisions.md,
decision 30).

pyarrow's streaming reader types a column from the first block of the file (1 MiB): a column
empty there is typed NULL, and one of whole numbers there typed int64, and a later `1.5` is then
an error in a file that is right. So when the rows go into a known schema (`target`), the
columns it holds are parsed straight into its types, and the reading does not depend on where a
value falls in the file. Timestamps are read as text and parsed here: pyarrow's parser of a
type with a time zone refuses a time without an offset (which is UTC, as Spark's session and
DuckDB read it), and its parser of microseconds refuses the nine digits of a fraction pandas
writes (`.123456000`) though the value is exact. Whole numbers are read as text and cast here
too: pyarrow's parser of an integer refuses a leading `+` (`+5`), which its float and decimal
parsers, Spark's and DuckDB's take. A quoted field may hold line breaks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.types as t

# Spark's and DuckDB's spellings of a boolean in a CSV; pyarrow's own also take 1 and 0, which
# Spark refuses
TRUE_VALUES = ["true", "True", "TRUE"]
FALSE_VALUES = ["false", "False", "FALSE"]
TYPED_WHOLE = 256 << 20  # a new table's CSV read whole to type its columns, up to this size
# an ISO 8601 time that names its offset (a date alone ends in `-DD`, which is no offset)
_ZONED = r"\d:\d\d(:\d\d(\.\d*)?)?(Z|[+-]\d\d(:?\d\d)?)$"
# zeros past a fraction's sixth (ninth) digit, before any offset: dropped, the value is the same
_ZEROS_PAST = r"(\.\d{%d})0+(Z|[+-]\d\d(:?\d\d)?)?$"
_PARSE = pcsv.ParseOptions(newlines_in_values=True)
_REFUSED = (pa.ArrowInvalid, pa.ArrowNotImplementedError)  # a value a parse or cast refuses


def csv_options(target: Any = None) -> pcsv.ConvertOptions:
    """How every CSV is read here, as Spark's and DuckDB's CSV readers read it: an empty field,
    quoted or not, is NULL in every column (text too), and any other field is a value (`NULL`
    and `N/A` are text, `NaN` and `Infinity` are floats). pyarrow's own defaults read an empty
    text field as "" and `NaN` in a float column as NULL, so the same file would give other
    rows here than on Spark. A column `target` (a schema) holds is parsed as its type (text
    stays text: `02139` keeps its zero); other columns are typed from their values."""
    types = None
    if target is not None:
        types = {f.name: parsed for f in target if (parsed := _parsed_as(f.type)) is not None}
    return pcsv.ConvertOptions(
        column_types=types,
        null_values=[""],
        strings_can_be_null=True,
        true_values=TRUE_VALUES,
        false_values=FALSE_VALUES,
    )


def open_csv(source: Any, target: Any = None) -> pa.RecordBatchReader:
    """A reader over a CSV file's rows (a path or a binary file object), the columns `target`
    holds in its types. Without a target (a table made from the file), a file path of up to
    `TYPED_WHOLE` bytes is read whole, so that each column's type is told from all its values;
    a bigger one from its first block, and a later value of another type is refused."""
    if target is None and isinstance(source, str) and os.path.getsize(source) <= TYPED_WHOLE:
        table = pcsv.read_csv(source, parse_options=_PARSE, convert_options=csv_options())
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    reader = pcsv.open_csv(source, parse_options=_PARSE, convert_options=csv_options(target))
    as_text = {
        f.name: f.type for f in target or () if t.is_timestamp(f.type) or t.is_integer(f.type)
    }
    if not as_text.keys() & set(reader.schema.names):
        return reader
    schema = pa.schema(
        [pa.field(f.name, as_text.get(f.name, f.type), f.nullable) for f in reader.schema]
    )
    return pa.RecordBatchReader.from_batches(schema, _converted(reader, schema, as_text))


def _parsed_as(kind: Any) -> Any | None:
    """The type pyarrow's CSV parser reads a target column as (None: typed from its values,
    then cast like any other input)."""
    if t.is_string(kind) or t.is_large_string(kind):
        return kind
    if t.is_integer(kind):
        return pa.string()  # parsed by `_integers`
    if t.is_floating(kind) or t.is_boolean(kind) or t.is_decimal(kind):
        return kind
    if t.is_date(kind):
        return kind
    if t.is_timestamp(kind):
        return pa.string()  # parsed by `_times`
    if t.is_binary(kind) or t.is_large_binary(kind):
        return kind  # the bytes of the text as written (`02139` keeps its zero)
    return None


def _converted(reader: Any, schema: Any, as_text: dict[str, Any]) -> Iterator[Any]:
    """The reader's batches, the columns read as text (`as_text`: their types) converted."""
    for batch in reader:
        columns = [
            _as(column, as_text[name], name) if name in as_text else column
            for name, column in zip(batch.schema.names, batch.columns, strict=True)
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _as(text: Any, kind: Any, name: str) -> Any:
    return _times(text, kind, name) if t.is_timestamp(kind) else _integers(text, kind, name)


def _integers(text: Any, kind: Any, name: str) -> Any:
    """Whole numbers as `kind`, as pyarrow's CSV parser reads them (spaces around dropped,
    `0x` hexadecimal taken), and a leading `+` taken too; anything else, or a number `kind`
    cannot hold, refused in pyarrow's words, naming the column and the value."""
    return _checked(
        text,
        lambda part: _whole(part, kind),
        lambda value: (
            f"In CSV column {name!r}: CSV conversion error to {kind}: invalid value {value!r}"
        ),
    )


def _whole(text: Any, kind: Any) -> Any:
    try:  # the usual column: plain digits, cast as they are
        return text.cast(kind, safe=True)
    except _REFUSED:
        trimmed = pc.utf8_trim_whitespace(text)
        return pc.replace_substring_regex(trimmed, r"^\+(\d)", "\\1").cast(kind, safe=True)


def _times(text: Any, kind: Any, name: str) -> Any:
    """ISO 8601 times as `kind` (a timestamp): a time naming its offset at that offset, one
    without it (or a date alone) in UTC; a target without a time zone holds them as UTC's
    clock. A fraction finer than `kind` holds is refused, as is a value that is no time, in
    one line naming the column and the value."""
    shown = f"In CSV column {name!r}: %s is not a time a {kind} column holds exactly"
    return _checked(
        text,
        lambda part: _parsed(part, kind),
        lambda value: shown % ("a value" if value is None else repr(value)),
    )


def _parsed(text: Any, kind: Any) -> Any:
    unit = "ns" if kind.unit == "ns" else "us"
    text = pc.replace_substring_regex(pc.utf8_trim_whitespace(text), "z$", "Z")
    digits = 9 if unit == "ns" else 6
    text = pc.replace_substring_regex(text, _ZEROS_PAST % digits, "\\1\\2")
    zoned = pc.match_substring_regex(text, _ZONED)
    with_offset = pc.if_else(zoned, text, None).cast(pa.timestamp(unit, "UTC"))
    naive = pc.if_else(zoned, None, text).cast(pa.timestamp(unit))
    instants = pc.if_else(zoned, with_offset, pc.assume_timezone(naive, "UTC"))
    held = instants.cast(pa.timestamp(unit, kind.tz))  # no zone: UTC's clock
    return held.cast(kind, safe=True)


def _checked(text: Any, parse: Callable[[Any], Any], words: Callable[[Any], str]) -> Any:
    """`parse(text)`; when it refuses, one line (`words` of the first value it refuses, None
    if no one value is) instead of the whole column's error."""
    try:
        return parse(text)
    except _REFUSED:
        raise pa.ArrowInvalid(words(_first_refused(text, parse))) from None


def _first_refused(text: Any, parse: Callable[[Any], Any]) -> Any:
    """The first value of `text` that `parse` refuses (None: it takes them all), found by
    halving (a value parses alike whatever its neighbours): a few calls, not one a row."""
    if _parses(text, parse):
        return None
    low, high = 0, len(text)  # the first refused value lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if _parses(text.slice(low, middle - low), parse):
            low = middle
        else:
            high = middle
    return text[low].as_py()


def _parses(text: Any, parse: Callable[[Any], Any]) -> bool:
    try:
        parse(text)
    except _REFUSED:
        return False
    return True
