"""The two protobuf wire-format pieces we read and write by hand: varints and field keys.

A Lance manifest is a protobuf message after a small footer; `describe` reads its feature flags
and `rename` rewrites its base paths without a protobuf library.
"""

from __future__ import annotations


class ManifestFormatError(ValueError):
    """A manifest file we do not understand well enough to read or rewrite."""


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The varint at `position` and the position after it."""
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
