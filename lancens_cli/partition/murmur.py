"""Bucket hashing of spec 004: `abs(murmur3(col0)) % N` and `murmur3_multi`, as Iceberg hashes.

The hash is murmur3 x86 32-bit with seed 0, read as a signed int32, over Iceberg's byte encoding
of each value, so that equal values hash equally whatever their Arrow width (the spec demands
type-promotion resistance):

* every integer width as 8-byte little-endian int64; uint64 values above the int64 maximum are
  encoded as 8-byte little-endian unsigned (the same bytes as their int64 two's-complement view);
* date32 / date64 as days since the epoch (int64; date64 milliseconds are floored to days);
* time32 / time64 and timestamp (any unit, any or no time zone) as microseconds (int64;
  nanoseconds are floored); a timestamp's stored value is UTC, so the zone does not matter;
* string / large_string / string_view as UTF-8; binary / large_binary / binary_view /
  fixed_size_binary raw;
* decimal as the minimal big-endian two's-complement bytes of the unscaled value.

Floats, booleans and anything else are refused: they have no promotion-safe encoding.

Fixed 8-byte encodings are hashed with a vectorised numpy murmur3 (checked against `mmh3` in the
tests); variable-length values go through `mmh3.hash` one by one.
"""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from lancens_cli.errors import InvalidInputError

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_N = np.uint32(0xE6546B64)
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_DAY_MS = 86_400_000
_INT32_MAX = 2**31 - 1


def _plain(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous, non-dictionary array."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pt.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _is_string(kind: pa.DataType) -> bool:
    return pt.is_string(kind) or pt.is_large_string(kind) or pt.is_string_view(kind)


def _is_binary(kind: pa.DataType) -> bool:
    return (
        pt.is_binary(kind)
        or pt.is_large_binary(kind)
        or pt.is_binary_view(kind)
        or pt.is_fixed_size_binary(kind)
    )


def _is_int64_encoded(kind: pa.DataType) -> bool:
    return pt.is_integer(kind) or pt.is_date(kind) or pt.is_time(kind) or pt.is_timestamp(kind)


def check_hashable(kind: pa.DataType) -> None:
    """Refuse a type murmur3 has no promotion-safe encoding for."""
    if pt.is_dictionary(kind):
        kind = kind.value_type
    if _is_int64_encoded(kind) or _is_string(kind) or _is_binary(kind) or pt.is_decimal(kind):
        return
    raise InvalidInputError(f"murmur3 cannot hash a {kind} value (no promotion-safe encoding)")


def _valid(array: pa.Array) -> np.ndarray:
    """True where the value is not NULL."""
    if array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    return array.is_valid().to_numpy(zero_copy_only=False)


def _numbers(array: pa.Array, storage: pa.DataType) -> np.ndarray:
    """The array's raw integers as numpy, NULLs read as 0 (the validity is kept apart)."""
    if array.type != storage:
        array = (
            array.view(storage)
            if array.type.bit_width == storage.bit_width
            else array.cast(storage)
        )
    if array.null_count:
        array = array.fill_null(0)
    return array.to_numpy(zero_copy_only=False)


def _int64_values(array: pa.Array) -> np.ndarray:
    """The int64 Iceberg encodes each value as."""
    kind = array.type
    if pt.is_uint64(kind):
        return _numbers(array, pa.uint64()).view(np.int64)
    if pt.is_integer(kind):
        return _numbers(array, pa.int64())
    raw = _numbers(array, pa.int32() if kind.bit_width == 32 else pa.int64()).astype(np.int64)
    if pt.is_date64(kind):
        return raw // _DAY_MS
    if pt.is_date32(kind):
        return raw
    if kind.unit == "ns":
        return raw // 1_000
    return raw * _MICROS[kind.unit]


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One 4-byte block of the murmur3 x86_32 body, for a column of states."""
    k = _rotl(k * _C1, 15) * _C2
    return _rotl(h ^ k, 13) * np.uint32(5) + _N


def _finish(h: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    """murmur3's length xor and fmix32, read as signed int32."""
    h = h ^ np.asarray(length, dtype=np.uint32)
    h = (h ^ (h >> np.uint32(16))) * np.uint32(0x85EBCA6B)
    h = (h ^ (h >> np.uint32(13))) * np.uint32(0xC2B2AE35)
    return (h ^ (h >> np.uint32(16))).view(np.int32)


def _words(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The low and high little-endian 32-bit words of int64 values."""
    pairs = np.ascontiguousarray(values, dtype="<i8").view("<u4").reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def _hash_int64(values: np.ndarray) -> np.ndarray:
    low, high = _words(values)
    h = _mix(_mix(np.zeros(len(values), dtype=np.uint32), low), high)
    return _finish(h, 8)


def _decimal_bytes(array: pa.Array) -> list[bytes | None]:
    """Minimal big-endian two's complement of each unscaled value (Java BigInteger's bytes)."""
    width = array.type.byte_width
    raw = array.buffers()[1].to_pybytes()[
        array.offset * width : (array.offset + len(array)) * width
    ]
    out: list[bytes | None] = []
    for i, ok in enumerate(_valid(array)):
        if not ok:
            out.append(None)
            continue
        value = int.from_bytes(raw[i * width : (i + 1) * width], "little", signed=True)
        size = (value + (value < 0)).bit_length() // 8 + 1
        out.append(value.to_bytes(size, "big", signed=True))
    return out


def encodings(array: pa.Array | pa.ChunkedArray, prefix: bytes = b"") -> list[bytes | None]:
    """Each value's hashed bytes after `prefix` (None for NULL); the general, per-value path."""
    array = _plain(array)
    check_hashable(array.type)
    kind = array.type
    valid = _valid(array).tolist()
    if _is_int64_encoded(kind):
        width = len(prefix) + 8
        rows = np.empty((len(array), width), dtype=np.uint8)
        rows[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
        rows[:, len(prefix) :] = _int64_values(array).astype("<i8").view(np.uint8).reshape(-1, 8)
        raw = rows.tobytes()
        return [raw[width * i : width * (i + 1)] if ok else None for i, ok in enumerate(valid)]
    if pt.is_decimal(kind):
        values = _decimal_bytes(array)
    elif _is_string(kind) or not pt.is_fixed_size_binary(kind):
        values = array.cast(pa.large_binary()).to_pylist()
    else:
        values = array.to_pylist()
    if not prefix:
        return values
    return [None if v is None else prefix + v for v in values]


def _to_int32(hashes: np.ndarray, valid: np.ndarray) -> pa.Array:
    mask = None if valid.all() else ~valid
    return pa.array(hashes.astype(np.int32, copy=False), type=pa.int32(), mask=mask)


def hash_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """murmur3 of each value as int32; NULL where the value is NULL."""
    array = _plain(array)
    check_hashable(array.type)
    if _is_int64_encoded(array.type):
        return _to_int32(_hash_int64(_int64_values(array)), _valid(array))
    murmur = mmh3.hash
    keys = array.to_pylist() if _is_string(array.type) else encodings(array)
    return pa.array([None if k is None else murmur(k, 0, True) for k in keys], type=pa.int32())


def _hash_multi_int64(columns: list[tuple[int, pa.Array]], length: int) -> pa.Array:
    """The multi-column rule, vectorised for columns whose encodings are all 8 bytes."""
    h = np.zeros(length, dtype=np.uint32)
    size = np.zeros(length, dtype=np.uint32)
    any_valid = np.zeros(length, dtype=bool)
    for position, array in columns:
        valid = _valid(array)
        low, high = _words(_int64_values(array))
        mixed = _mix(_mix(_mix(h, np.full(length, position, dtype=np.uint32)), low), high)
        h = np.where(valid, mixed, h)
        size += np.uint32(12) * valid
        any_valid |= valid
    return _to_int32(_finish(h, size), any_valid)


def hash_multi(arrays: list[pa.Array | pa.ChunkedArray | None]) -> pa.Array:
    """murmur3_multi of each row as int32: NULL fields are skipped, NULL only if all are NULL.

    Combination rule: the row's key is the concatenation, in column order, of
    `position.to_bytes(4, "little") + encoding(value)` for every non-NULL value, where
    `position` is the column's index in `arrays` (0 for col0, 1 for col1, ...) and `encoding`
    is the single-column byte encoding; the hash is murmur3 x86_32 (seed 0, signed) of that key.
    The position prefix keeps (a, NULL) and (NULL, a) apart. A None entry is a column that is
    no longer in the schema and reads as all NULL; at least one entry must be an array.
    """
    present = [(i, _plain(a)) for i, a in enumerate(arrays) if a is not None]
    if not present:
        raise ValueError("hash_multi needs at least one column")
    length = len(present[0][1])
    if any(len(a) != length for _, a in present):
        raise ValueError("hash_multi columns differ in length")
    for _, array in present:
        check_hashable(array.type)
    if all(_is_int64_encoded(a.type) for _, a in present):
        return _hash_multi_int64(present, length)
    parts = [encodings(a, i.to_bytes(4, "little")) for i, a in present]
    murmur = mmh3.hash
    if not any(a.null_count for _, a in present):
        return pa.array(
            [murmur(b"".join(r), 0, True) for r in zip(*parts, strict=True)], type=pa.int32()
        )
    out = []
    for row in zip(*parts, strict=True):
        values = [v for v in row if v is not None]
        out.append(murmur(b"".join(values), 0, True) if values else None)
    return pa.array(out, type=pa.int32())


def bucket_of(hashes: pa.Array | pa.ChunkedArray, n: int) -> pa.Array:
    """`abs(h) % n` as int32, computed in int64 so abs(INT32_MIN) = 2147483648 (no overflow)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _INT32_MAX:
        raise InvalidInputError(f"the number of buckets must be in 1..{_INT32_MAX}, got {n!r}")
    hashes = _plain(hashes)
    values = pc.cast(hashes, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return _to_int32(np.abs(values) % n, _valid(hashes))
