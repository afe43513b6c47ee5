"""OpenAI's `obfuscation` field in recorded streams: random characters on every streamed delta event (on by default,
"to normalize payload sizes"), the last field of each event's object."""

from __future__ import annotations

import json
import random
import string

ALNUM = string.ascii_letters + string.digits
# How a stream's reads get it: as OpenAI sends it; holding escapes and non-ASCII; one read without it; one read with
# the key twice.
KINDS = ("random", "escapes", "missing", "second")


def obfuscation(rng: random.Random, escapes: bool = False) -> bytes:
    """A JSON string of 1-15 random alphanumerics, as OpenAI sends it (`escapes`: also quotes, backslashes, control
    and non-ASCII characters, written escaped or not)."""
    pool = ALNUM + '"\\/\t\u00e9\u4e2d\u2028\U0001f642' if escapes else ALNUM
    value = "".join(rng.choice(pool) for _ in range(rng.randint(1, 15)))
    return json.dumps(value, ensure_ascii=escapes and rng.random() < 0.5).encode()


def obfuscate(reads: list[bytes], how: str, seed: int) -> list[bytes]:
    """Each read that is one JSON object's event (`data: {...}` LF LF) with `"obfuscation":...` added last."""
    rng = random.Random(seed)
    out = [
        read[:-3] + b',"obfuscation":' + obfuscation(rng, how == "escapes") + b"}\n\n"
        if read.endswith(b"}\n\n") and b"data: {" in read
        else read
        for read in reads
    ]
    events = [i for i, read in enumerate(out) if b'"obfuscation":' in read]
    if events and how in ("missing", "second"):
        at = rng.choice(events)
        cut = out[at].rindex(b',"obfuscation":')
        if how == "missing":
            out[at] = out[at][:cut] + b"}\n\n"
        else:
            out[at] = out[at][:cut] + b',"obfuscation":"zz"' + out[at][cut:]
    return out
