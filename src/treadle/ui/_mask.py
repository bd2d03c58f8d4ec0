"""Secrets masked in what a server sends, on the stream rather than per piece.

A value can reach a response in several spellings: as it is (UTF-8), or inside a JSON
string with its ``"`` ``\\`` ``/`` and control characters escaped (``\\"``, ``\\\\``, ``\\/``,
``\\n``) and any character as ``\\uXXXX`` (what ``json.dumps`` does to non-ASCII with
``ensure_ascii=True``; other encoders use upper-case hex, or escape ``<`` and ``/``). A
:class:`Secrets` matches every mix of these, character by character.

A stream is masked as it goes (:class:`StreamMask`): what could still be the beginning of a
secret (the end of a chunk that matches the start of one of its spellings) is held back
until the next chunk shows whether it is, and released at the end. Only such a tail is
held, so a stream that pauses after an ordinary frame is not delayed. A secret is replaced
by as many ``*`` as it took bytes (or characters), so lengths hold.

Long values are masked in pieces of at most 64 characters (and line by line), each piece
wherever it appears: a PEM key's lines are masked even when they reach the page one at a
time, and the patterns stay small.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import Any, AnyStr, Generic

__all__ = ["MASKED_HEADER", "MIN_SECRET", "Secrets", "StreamMask", "masking_send"]

MIN_SECRET = 8
"""Shorter values (and pieces) are not masked: they would match ordinary text."""
PIECE = 64

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_HEX_BOTH = {d: f"[{d.lower()}{d.upper()}]" for d in "abcdef"}

Form = list[str]  # one spelling of one character: regex atoms, each matching one unit


def pieces(value: str) -> list[str]:
    """The parts of ``value`` masked on their own: its lines, cut to :data:`PIECE`
    characters, stripped; a short tail joins the piece before it."""
    out: list[str] = []
    for line in value.splitlines():
        line = line.strip()
        cuts = [line[i : i + PIECE] for i in range(0, len(line), PIECE)]
        if len(cuts) > 1 and len(cuts[-1]) < MIN_SECRET:
            cuts[-2:] = [cuts[-2] + cuts[-1]]
        out += [c for c in cuts if len(c) >= MIN_SECRET]
    return out


def _escape_atom(unit: str) -> str:
    return re.escape(unit)


def _u_escape(code: int) -> Form:
    return ["\\\\", "u", *(_HEX_BOTH.get(d, d) for d in f"{code:04x}")]


def _forms(char: str, *, raw: bool) -> list[Form]:
    """Every spelling of ``char`` in a response; ``raw`` spells its own form in UTF-8 bytes
    (each byte one atom, as latin-1 characters), else as the character itself."""
    own = (
        [_escape_atom(chr(b)) for b in char.encode("utf-8", "surrogateescape")]
        if raw
        else [_escape_atom(char)]
    )
    forms: list[Form] = [own]
    if char in _SHORT_ESCAPES:
        forms.append([_escape_atom(u) for u in _SHORT_ESCAPES[char]])
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of the environment: only itself
        return forms
    if code > 0xFFFF:  # a surrogate pair, as JSON writes it
        code -= 0x10000
        forms.append(_u_escape(0xD800 + (code >> 10)) + _u_escape(0xDC00 + (code & 0x3FF)))
    else:
        forms.append(_u_escape(code))
    return forms


def _group(forms: Sequence[Form]) -> str:
    return "(?:" + "|".join("".join(f) for f in forms) + ")"


def _partial(forms: Sequence[Form]) -> str:
    """Any non-empty proper beginning of one of ``forms``."""
    starts = {"".join(f[:n]) for f in forms for n in range(1, len(f))}
    return "(?:" + "|".join(sorted(starts)) + ")" if starts else "(?!)"


def _proper_prefix(chars: Sequence[list[Form]]) -> str:
    """A pattern for every proper beginning of a spelling of the whole value."""
    pattern = _partial(chars[-1])
    for forms in reversed(chars[:-1]):
        pattern = f"(?:{_group(forms)}(?:{pattern})?|{_partial(forms)})"
    return pattern


class _Patterns:
    """The compiled patterns of a set of values: ``full`` (a whole value, in any spelling),
    ``prefix`` (a proper beginning of one, matched to the end) and ``first`` (the units a
    spelling can start with, to skip the rest quickly)."""

    def __init__(self, values: Sequence[str], *, raw: bool) -> None:
        spelled = [[_forms(c, raw=raw) for c in v] for v in values]
        self.longest = max(sum(max(len(f) for f in forms) for forms in chars) for chars in spelled)
        firsts = sorted({f[0] for chars in spelled for f in chars[0]})
        starts = "(?=" + "|".join(firsts) + ")"  # a cheap test before the alternatives
        full = starts + "(?:" + "|".join("".join(_group(f) for f in c) for c in spelled) + ")"
        prefix = "|".join(_proper_prefix(chars) for chars in spelled)
        units = [re.sub(r"\\(.)", r"\1", a, flags=re.DOTALL) for a in firsts]
        self.full: re.Pattern[Any]
        self.prefix: re.Pattern[Any]
        self.first: frozenset[Any]
        if raw:
            self.full = re.compile(full.encode("latin-1"))
            self.prefix = re.compile(prefix.encode("latin-1"))
            self.first = frozenset(u.encode("latin-1")[0] for u in units)
        else:
            self.full = re.compile(full)
            self.prefix = re.compile(prefix)
            self.first = frozenset(units)


class Secrets:
    """The values to mask, in every spelling (see the module). ``values`` are strings or
    UTF-8 bytes; whitespace around them is ignored and values shorter than
    :data:`MIN_SECRET` characters are left out."""

    def __init__(self, values: Iterable[str | bytes]) -> None:
        texts = {
            v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for v in values
        }
        found = {p for v in texts for p in pieces(v)}
        self.values: tuple[str, ...] = tuple(sorted(found, key=len, reverse=True))
        self._bytes = _Patterns(self.values, raw=True) if self.values else None
        self._text = _Patterns(self.values, raw=False) if self.values else None

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:  # never the values
        return f"Secrets({len(self.values)} values)"

    def bytes_stream(self) -> StreamMask[bytes]:
        """A mask for one response body (or any byte stream)."""
        return StreamMask(self._bytes, b"*")

    def text_stream(self) -> StreamMask[str]:
        """A mask for one stream of text deltas (a streamed answer, a call's arguments)."""
        return StreamMask(self._text, "*")

    def mask_text(self, text: str) -> str:
        """``text`` with every secret in it masked (one piece, no stream)."""
        if self._text is None:
            return text
        return _mask_all(self._text.full, text, "*")

    def mask_bytes(self, data: bytes) -> bytes:
        """``data`` with every secret in it masked, in any spelling (one piece, no stream)."""
        if self._bytes is None:
            return data
        return _mask_all(self._bytes.full, data, b"*")

    def mask_value(self, value: Any) -> Any:
        """A JSON-like value with every secret masked in its strings (keys too)."""
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, dict):
            return {self.mask_value(k): self.mask_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.mask_value(v) for v in value]
        return value


class StreamMask(Generic[AnyStr]):
    """Masks one stream: :meth:`feed` each chunk and send what it returns, then send what
    :meth:`flush` returns at the end. Holds back only a tail that could begin a secret."""

    def __init__(self, patterns: _Patterns | None, star: AnyStr) -> None:
        self._patterns = patterns
        self._star: AnyStr = star
        self._held: AnyStr = star[:0]

    def feed(self, chunk: AnyStr) -> AnyStr:
        patterns = self._patterns
        if patterns is None:
            return chunk
        buf = self._held + chunk
        hold = self._hold_from(buf, patterns)
        out, end = self._masked(buf, hold, patterns)
        self._held = buf[end:]
        return out

    def flush(self) -> AnyStr:
        """What is still held back (masked): the stream ended."""
        buf, self._held = self._held, self._star[:0]
        if self._patterns is None or not buf:
            return buf
        return self._masked(buf, len(buf), self._patterns)[0]

    def _hold_from(self, buf: AnyStr, patterns: _Patterns) -> int:
        """Where the tail that could begin a secret starts (``len(buf)``: none)."""
        first, prefix = patterns.first, patterns.prefix
        for at in range(max(0, len(buf) - patterns.longest + 1), len(buf)):
            if buf[at] in first and prefix.fullmatch(buf, at):
                return at
        return len(buf)

    def _masked(self, buf: AnyStr, hold: int, patterns: _Patterns) -> tuple[AnyStr, int]:
        """``buf`` up to ``hold`` with the secrets in it masked (a secret that starts before
        ``hold`` and ends after it is taken whole), and where that stops."""
        parts: list[AnyStr] = []
        pos = 0
        for match in patterns.full.finditer(buf):
            if match.start() >= hold:
                break
            parts += [buf[pos : match.start()], self._star * (match.end() - match.start())]
            pos = match.end()
        end = max(pos, hold)
        parts.append(buf[pos:end])
        return self._star[:0].join(parts), end


def _mask_all(pattern: re.Pattern[Any], text: AnyStr, star: AnyStr) -> AnyStr:
    masked: AnyStr = pattern.sub(lambda m: star * (m.end() - m.start()), text)
    return masked


# ---- on an ASGI response ----

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

MASKED_HEADER = b"x-treadle-masked"
"""A response header an app sets on a body it masked itself, once at its source (a run's
frames, shared by every reader): :func:`masking_send` passes that body as it is and drops
the header."""

_ASSETS = (b"text/html", b"text/css", b"text/javascript", b"application/javascript")


def masking_send(send: Send, secrets: Secrets) -> Send:
    """``send`` with the secrets masked in the response body as it streams (a secret split
    between two chunks included: see :class:`StreamMask`). Not masked: the page's own
    assets (HTML, CSS, JavaScript: a mask would break a script that happens to hold a
    secret's text), and bodies marked :data:`MASKED_HEADER`."""
    if not secrets:
        return send
    stream: StreamMask[bytes] | None = None

    async def masked(message: Message) -> None:
        nonlocal stream
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
            premasked = any(k.lower() == MASKED_HEADER for k, _ in headers)
            if premasked:
                message["headers"] = [(k, v) for k, v in headers if k.lower() != MASKED_HEADER]
            if not premasked and not kind.lower().startswith(_ASSETS):
                stream = secrets.bytes_stream()
        elif message["type"] == "http.response.body" and stream is not None:
            body = stream.feed(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                body += stream.flush()
            message["body"] = body
        await send(message)

    return masked
