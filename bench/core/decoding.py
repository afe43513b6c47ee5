"""Content-Encoding (gzip, deflate, br) of recorded bodies: decoded read by read, and encoded again for redaction.

The proxy forwards and records a compressed body as the upstream sent it (the client must get the exact bytes); every
reader of a body (outcome, first token, parsing, `cassette show`, export, redaction) goes through `decoded_reads`.
Decoding is incremental, one piece per recorded read, so each decoded piece keeps its read's arrival time: an SSE
event inside a gzip stream is complete at the read whose decoded bytes complete it, as for an uncompressed stream.
A body that cannot be decoded (corrupt, cut, an unknown coding) yields what decoded before the fault and the reason.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import brotli

CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br"})

# A few hundred bytes of gzip can expand to gigabytes: decoding stops past this many bytes for one body (an LLM
# answer is far smaller: the largest, 50 MB, fits), and says so, rather than letting one hostile upstream
# exhaust the proxy's memory. A recording proxy decodes a compressed body whole when it builds its record (twice with
# a key to search for), so this bounds what one such body costs it. Measured (benchmarks/record_memory.py --bomb 1024
# --key: 1 MiB of gzip decoding to 1 GiB): at 256 MiB +439 MiB of peak RSS per bomb, at 64 MiB see docs/proxy.md.
MAX_DECODED = 64 << 20


class _TooLarge(Exception):
    """Decoding passed the limit; `kept` is what it had decoded up to the limit (kept: what was received is recorded
    as far as it was decoded, not dropped with the rest)."""

    def __init__(self, kept: bytes = b"") -> None:
        super().__init__()
        self.kept = kept


class _Coder(Protocol):
    def feed(self, data: bytes, limit: int) -> bytes: ...
    def end(self) -> bytes: ...
    def finished(self) -> bool: ...


class _Zlib:
    """gzip, or HTTP `deflate`: zlib-wrapped as RFC 9110 says, or raw deflate as some servers send it."""

    __slots__ = ("gzip", "head", "obj")

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.head = b""
        self.obj: zlib._Decompress | None = zlib.decompressobj(zlib.MAX_WBITS | 16) if gzip else None

    def feed(self, data: bytes, limit: int) -> bytes:
        if self.obj is None:
            # A zlib header is two bytes whose big-endian value is a multiple of 31, with method 8: else raw deflate.
            self.head += data
            if len(self.head) < 2:
                return b""
            data, self.head = self.head, b""
            zlib_wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self.obj = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
        out = self.obj.decompress(data, limit + 1)
        if len(out) > limit:
            raise _TooLarge(out[:limit])
        return out

    def end(self) -> bytes:
        return self.obj.flush() if self.obj is not None else b""

    def finished(self) -> bool:
        return self.obj is not None and self.obj.eof


class _Brotli:
    __slots__ = ("obj",)

    def __init__(self) -> None:
        self.obj = brotli.Decompressor()

    def feed(self, data: bytes, limit: int) -> bytes:
        if not data:
            return b""
        out = bytes(self.obj.process(data, output_buffer_limit=limit + 1))
        if len(out) > limit:
            raise _TooLarge(out[:limit])
        return out

    def end(self) -> bytes:
        return b""

    def finished(self) -> bool:
        return bool(self.obj.is_finished())


def _decoder(coding: str) -> _Coder:
    if coding == "br":
        return _Brotli()
    return _Zlib(gzip=coding != "deflate")


def content_codings(headers: Iterable[Sequence[str]]) -> list[str]:
    """The codings a body was sent with, in the order they were applied (`identity` dropped, lower-cased)."""
    codings: list[str] = []
    for header in headers:
        if len(header) == 2 and str(header[0]).lower() == "content-encoding":
            codings += [c.strip().lower() for c in str(header[1]).split(",") if c.strip()]
    return [c for c in codings if c != "identity"]


@dataclass(slots=True)
class Decoded:
    pieces: list[bytes]  # one per recorded read (b"" where a read completed nothing)
    codings: list[str]  # as applied by the sender; empty for a plain body (then `pieces` are the reads themselves)
    error: str | None = None  # why decoding stopped early, if it did
    too_large: bool = False  # it stopped at MAX_DECODED: the rest may be good data, unread

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)


def decode_reads(chunks: Sequence[bytes], codings: Sequence[str], limit: int | None = None) -> Decoded:
    """The decoded piece of each read (at most `limit` bytes in all, MAX_DECODED by default). The last read's piece
    includes whatever the decoders held back."""
    if limit is None:
        limit = MAX_DECODED
    if not codings:
        return Decoded(list(chunks), [])
    unknown = [c for c in codings if c not in CODINGS]
    if unknown:
        return Decoded([b""] * len(chunks), list(codings), f"unknown Content-Encoding {unknown[0]!r}")
    chain = [_decoder(c) for c in reversed(codings)]  # the last coding applied is undone first
    name = "+".join(codings)
    pieces: list[bytes] = []
    error: str | None = None
    left = limit
    for i, chunk in enumerate(chunks):
        if error is not None:
            pieces.append(b"")
            continue
        data = b""
        try:
            for k, coder in enumerate(chain):
                try:
                    data = coder.feed(chunk if k == 0 else data, left)
                except _TooLarge as exc:
                    # The last decoder's output is the body itself: what it decoded up to the limit is kept.
                    data = exc.kept if k == len(chain) - 1 else b""
                    raise
            if i == len(chunks) - 1:
                for j, coder in enumerate(chain):
                    tail = coder.end()
                    for later in chain[j + 1 :]:
                        tail = later.feed(tail, left)
                    data += tail
            if len(data) > left:
                data = data[:left]
                raise _TooLarge
            left -= len(data)
        except (zlib.error, brotli.error) as exc:
            error = f"cannot decode the {name} body: {exc}"
            data = b""
        except _TooLarge:
            error = f"the {name} body decodes to more than {limit} bytes; the rest is not decoded"
        pieces.append(data)
    if error is None and chunks and not all(coder.finished() for coder in chain):
        error = f"the {name} body ends before its compressed stream does (cut short)"
    return Decoded(pieces, list(codings), error, too_large=error is not None and "more than" in error)


def decoded_record_reads(headers: Iterable[Sequence[str]], chunks: Sequence[bytes]) -> Decoded:
    """`decode_reads` for a recorded response given its headers: the reads as they are when the body is plain."""
    return decode_reads(chunks, content_codings(headers))


class _Encoder(Protocol):
    def piece(self, data: bytes) -> bytes: ...
    def finish(self) -> bytes: ...


class _ZlibEncoder:
    __slots__ = ("obj",)

    def __init__(self, wbits: int) -> None:
        self.obj = zlib.compressobj(6, zlib.DEFLATED, wbits)

    def piece(self, data: bytes) -> bytes:
        return self.obj.compress(data) + self.obj.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        return self.obj.flush(zlib.Z_FINISH)


class _BrotliEncoder:
    __slots__ = ("obj",)

    def __init__(self) -> None:
        self.obj = brotli.Compressor()

    def piece(self, data: bytes) -> bytes:
        return bytes(self.obj.process(data)) + bytes(self.obj.flush())

    def finish(self) -> bytes:
        return bytes(self.obj.finish())


def _encoder(coding: str) -> _Encoder:
    if coding == "br":
        return _BrotliEncoder()
    return _ZlibEncoder(zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS)


def encode_reads(pieces: Sequence[bytes], codings: Sequence[str]) -> list[bytes]:
    """Encode decoded pieces again, one flushed piece per read, so that each read decodes to its own piece (used
    when redaction changed a compressed body: read boundaries and arrival times stay as recorded)."""
    if not codings:
        return list(pieces)
    out = list(pieces)
    for coding in codings:
        enc = _encoder(coding)
        out = [enc.piece(p) for p in out]
        if out:
            out[-1] += enc.finish()
    return out
