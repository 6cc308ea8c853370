"""The two protobuf wire-format pieces we read and write by hand: varints and field keys.

A Lance manifest is a protobuf message after a small footer; `describe` reads its feature flags
and `rename` rewrites its base paths without a protobuf library.
"""

from __future__ import annotations


class ManifestFormatError(ValueError):
    """A manifest file we do not understand well enough to read or rewrite."""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint at `position` and the position after it."""
    if position < len(data) and data[position] < 0x80:  # one byte: most keys and lengths
        return data[position], position + 1
    result = shift = 0
    while position < len(data):
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            break
    raise ManifestFormatError("truncated or malformed varint")


def encode_varint(value: int) -> bytes:
    """`value` as a varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def value_end(data: bytes, position: int, wire: int) -> int:
    """The position after the value of wire type `wire` that starts at `position`."""
    if wire == 0:
        return read_varint(data, position)[1]
    if wire == 2:
        length, position = read_varint(data, position)
        return position + length
    if wire == 1:
        return position + 8
    if wire == 5:
        return position + 4
    raise ManifestFormatError(f"unsupported protobuf wire type {wire}")


def field_spans(data: bytes, start: int, end: int, number: int) -> list[tuple[int, int]]:
    """(start, end) of the payload of every length-delimited field `number` of the message in
    `data[start:end]`, without copying any of it (a manifest's fragments are most of it)."""
    spans = []
    position = start
    wanted = number << 3 | 2
    while position < end:
        key, position = read_varint(data, position)
        if key & 7 == 2:
            length, payload = read_varint(data, position)
            position = payload + length
            if key == wanted:
                spans.append((payload, position))
        else:
            position = value_end(data, position, key & 7)
    if position != end:
        raise ManifestFormatError("a field runs past the end of its message")
    return spans


def has_field(data: bytes, start: int, end: int, number: int) -> bool:
    """Whether the message in `data[start:end]` holds a field `number` (of any wire type)."""
    position = start
    while position < end:
        key, position = read_varint(data, position)
        if key >> 3 == number:
            return True
        position = value_end(data, position, key & 7)
    if position != end:
        raise ManifestFormatError("a field runs past the end of its message")
    return False
