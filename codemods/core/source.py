"""Source bytes as every reader takes them: UTF-8 or a SourceError saying where it is not."""

from __future__ import annotations


class SourceError(Exception):
    """The source cannot be decoded or parsed; the message says why."""


def decode(source: bytes) -> str:
    """Decode UTF-8 (a BOM is kept as U+FEFF); raise SourceError otherwise."""
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 (byte {exc.start}: {source[exc.start:exc.start + 1]!r})") from None
