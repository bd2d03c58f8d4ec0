"""The user's writing style: observed on each run's input, kept by a user model (SQLite by
default), and given to the model as one hint line in the system prompt.

::

    agent = Agent(model, hooks=[StyleHints(SqliteUserModel("users.db"), user_id="ada")])
"""

from __future__ import annotations

import re
import string
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..loop import RunEnding, RunHandle
from ..providers import ModelRequest
from ..types import AgentMessage, UserMessage
from ._db import Database
from ._run import RunTracker, add_to_system, in_thread, log
from ._text import words

__all__ = [
    "SqliteUserModel",
    "StyleDetector",
    "StyleHints",
    "StyleObservation",
    "StyleProfile",
    "UserModel",
]

_LANGUAGES = {
    "en": "the and is are you this that with have for not what",
    "de": "der die das und ist nicht ich du sie mit ein eine wie bitte",
    "fr": "le la les et est une des pas je vous que pour avec",
    "es": "el la los las y es una por que con para no como",
    "it": "il lo la gli e che non una per con sono come",
    "pt": "o a os as e que não um uma para com por você",
    "nl": "de het een en is niet ik je wat met van dat",
}
_STOPS = {lang: frozenset(text.split()) for lang, text in _LANGUAGES.items()}
_NAMES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
}
_CASUAL = frozenset(
    "hey hi lol pls plz thx thanks yeah yep nope gonna wanna ok okay btw u ur".split()
)
_FORMAL = frozenset(
    "please kindly would could regards dear sincerely therefore however furthermore".split()
)
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_INLINE = re.compile(r"`[^`\n]+`")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import|\$ |#include|function |const |let |SELECT )"
    r"|[;{}]\s*$"
)
_SENTENCES = re.compile(r"[.!?]+(?:\s+|$)")
_CLAUSES = re.compile(r"[.!?]\s+")
_CONTRACTION = re.compile(r"\b\w+'(?:m|re|s|ll|d|ve)\b|n't\b")
_WORD_CHAR = re.compile(r"[^\s" + re.escape(string.punctuation) + r"]")  # words(s) non-empty
_LANGS_OF: dict[str, tuple[str, ...]] = {}
for _lang, _stops in _STOPS.items():
    for _word in _stops:
        _LANGS_OF[_word] = (*_LANGS_OF.get(_word, ()), _lang)


@dataclass(frozen=True)
class StyleObservation:
    """One input's style: ``words``, mean words per sentence, ``formality`` (0 casual to 1
    formal), ``code_density`` (the share of characters that are code) and ``language``
    (an ISO 639-1 code, or ``"unknown"``)."""

    words: int
    sentence_words: float
    formality: float
    code_density: float
    language: str
    at: float = field(default_factory=time.time)


class StyleDetector:
    """Heuristics, no model calls: cheap enough to run on every input."""

    def observe(self, text: str) -> StyleObservation:
        code, prose = 0, text
        if "`" in text:  # fenced blocks and inline code
            code = sum(len(m) for m in _FENCE.findall(text))
            prose = _FENCE.sub(" ", text)
            code += sum(len(m) for m in _INLINE.findall(prose))
            prose = _INLINE.sub(" ", prose)
        kept = []
        for line in prose.splitlines():
            if _CODE_LINE.search(line):
                code += len(line)
            else:
                kept.append(line)
        prose = "\n".join(kept)
        tokens = words(prose)
        sentences = [s for s in _SENTENCES.split(prose) if _WORD_CHAR.search(s)]
        per_sentence = len(tokens) / len(sentences) if sentences else 0.0
        return StyleObservation(
            words=len(tokens),
            sentence_words=round(per_sentence, 2),
            formality=_formality(prose, tokens),
            code_density=round(code / len(text), 3) if text else 0.0,
            language=_language(tokens),
        )


def _formality(prose: str, tokens: list[str]) -> float:
    casual = formal = 0
    for t in tokens:
        if t in _CASUAL:
            casual += 1
        elif t in _FORMAL:
            formal += 1
        if len(t) >= 10:
            formal += 1
    casual += prose.count("!!") + len(_CONTRACTION.findall(prose))
    for clause in _CLAUSES.split(prose.strip()):
        first = clause[:1]
        if first.islower():
            casual += 1
        elif first.isupper():
            formal += 1
    if casual + formal == 0:
        return 0.5
    return round(formal / (casual + formal), 3)


def _language(tokens: list[str]) -> str:
    hits = dict.fromkeys(_STOPS, 0)
    for t in tokens:
        for lang in _LANGS_OF.get(t, ()):
            hits[lang] += 1
    best = max(hits, key=hits.__getitem__)
    return best if hits[best] >= 2 else "unknown"


@dataclass(frozen=True)
class StyleProfile:
    """A user's style over their recent inputs (means, and the most common language)."""

    observations: int
    sentence_words: float
    formality: float
    code_density: float
    language: str

    def hint(self) -> str:
        """The one line the model sees."""
        length = (
            "short"
            if self.sentence_words < 10
            else "long"
            if self.sentence_words > 20
            else "medium-length"
        )
        tone = (
            "informally"
            if self.formality < 0.4
            else "formally"
            if self.formality > 0.6
            else "neutrally"
        )
        parts = [f"writes {length} sentences", tone]
        if self.code_density >= 0.2:
            parts.append("often with code")
        if self.language != "unknown":
            parts.append(f"in {_NAMES.get(self.language, self.language)}")
        return f"User style (a hint, not a rule): {', '.join(parts)}; match it."


@runtime_checkable
class UserModel(Protocol):
    """Where observations of a user go and their profile comes from (blocking calls; the
    hook runs them in a worker thread)."""

    def observe(self, user_id: str, observation: StyleObservation) -> None: ...

    def profile(self, user_id: str) -> StyleProfile | None: ...


_OBSERVATIONS = """
CREATE TABLE IF NOT EXISTS style_observations (
    user_id TEXT NOT NULL,
    at REAL NOT NULL,
    words INTEGER NOT NULL,
    sentence_words REAL NOT NULL,
    formality REAL NOT NULL,
    code_density REAL NOT NULL,
    language TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS style_by_user ON style_observations(user_id, at);
"""


INLINE_CHARS = 1000
"""Inputs up to this long are observed on the event loop (about 15 µs per 100 characters
with the default detector); longer ones, and any other detector, in a worker thread."""
_INSERT = "INSERT INTO style_observations VALUES (?, ?, ?, ?, ?, ?, ?)"
_Row = tuple[
    float, float, float, float, str
]  # at, sentence_words, formality, code_density, language


class SqliteUserModel:
    """The default :class:`UserModel`: observations in SQLite; a profile is the mean of the
    last ``window`` observations with text in them.

    For :class:`StyleHints` it also answers without blocking: :meth:`observe_later`
    queues an observation (written by :meth:`flush`, or before any read) and
    :meth:`cached_profile` answers from the rows it read last, as long as nobody else has
    written since — the steady state of one process costs no database read per run.
    """

    def __init__(self, path: str | Path = ":memory:", *, window: int = 20) -> None:
        self._db = Database(path, _OBSERVATIONS)
        self.window = window
        self._rows: dict[str, list[_Row]] = {}  # newest first, per user, at _rows_at
        self._rows_at: tuple[int, int] | None = None

    def observe(self, user_id: str, observation: StyleObservation) -> None:
        self.observe_later(user_id, observation)
        self._db.flush()

    def observe_later(self, user_id: str, observation: StyleObservation) -> None:
        """Queue an observation (no I/O): written by :meth:`flush` or before any read."""
        o = observation
        self._db.defer(
            _INSERT,
            (user_id, o.at, o.words, o.sentence_words, o.formality, o.code_density, o.language),
        )
        rows = self._rows.get(user_id)
        if rows is not None and o.words > 0:  # the cached rows take the same step
            row = (o.at, o.sentence_words, o.formality, o.code_density, o.language)
            if rows and o.at < rows[0][0]:  # not the newest (a clock step): keep the order
                rows = sorted([row, *rows], key=lambda r: -r[0])
            else:
                rows = [row, *rows]
            self._rows[user_id] = rows[: self.window]

    def flush(self) -> None:
        """Write the queued observations (blocking)."""
        at = self._rows_at
        self._db.flush()
        self._rows_at = self._db.advance(at)

    async def flush_soon(self) -> None:
        """Write the queued observations: inline when that cannot block, else in a worker
        thread."""
        at = self._rows_at
        await self._db.flush_soon()
        self._rows_at = self._db.advance(at)

    def profile(self, user_id: str) -> StyleProfile | None:
        self.flush()
        stamp = self._db.stamp()  # before the read: a change after it shows next time
        rows = self._db.query(
            "SELECT at, sentence_words, formality, code_density, language "
            "FROM style_observations WHERE user_id = ? AND words > 0 ORDER BY at DESC LIMIT ?",
            (user_id, self.window),
        )
        if stamp is None or stamp != self._rows_at:
            self._rows = {}
        self._rows[user_id] = [(r[0], r[1], r[2], r[3], r[4]) for r in rows]
        self._rows_at = stamp
        return _profile(self._rows[user_id])

    def cached_profile(self, user_id: str) -> tuple[bool, StyleProfile | None]:
        """``(True, profile)`` when the rows read last still hold (no I/O); ``(False,
        None)`` when :meth:`profile` has to read."""
        rows = self._rows.get(user_id)
        if rows is None or self._rows_at is None or self._db.stamp() != self._rows_at:
            return False, None
        return True, _profile(rows)

    def close(self) -> None:
        self._db.close()


def _profile(rows: list[_Row]) -> StyleProfile | None:
    if not rows:
        return None
    n = len(rows)
    sentence_words = formality = code_density = 0.0
    languages: dict[str, int] = {}
    for _, words_, formal, code, language in rows:
        sentence_words += words_
        formality += formal
        code_density += code
        if language != "unknown":
            languages[language] = languages.get(language, 0) + 1
    # the most common language; on a tie the one seen first (newest), like Counter
    language = max(languages, key=languages.__getitem__) if languages else "unknown"
    return StyleProfile(
        observations=n,
        sentence_words=sentence_words / n,
        formality=formality / n,
        code_density=code_density / n,
        language=language,
    )


class StyleHints(RunTracker):
    """A hook: each run's first user message is observed (``detector``) and recorded in
    ``model`` for ``user_id``; the user's profile then adds one hint line to the system
    prompt of the run's model calls (kept in ``run.state_for(self)``; ``hint`` is the
    hint of the run that observed last, to look at). Failures of the detector or the model
    are logged (logger ``treadle.ext``) and swallowed: the run goes on without a hint."""

    def __init__(
        self,
        model: UserModel | None = None,
        *,
        user_id: str = "default",
        detector: StyleDetector | None = None,
    ) -> None:
        self.model: UserModel = model if model is not None else SqliteUserModel()
        self.user_id = user_id
        self.detector = detector or StyleDetector()
        self.hint: str | None = None

    async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
        if self.input(run) is not None or not isinstance(message, UserMessage):
            return  # the run's input is seen already, or this is not it
        await super().on_message(run, message)
        text = message.text
        model = self.model
        try:
            if isinstance(model, SqliteUserModel) and self._inline(text):
                # The usual case costs no thread trip: the detector is quick on a short
                # input, the observation is written when the run ends (after_loop) and the
                # profile comes from the rows read last, unless another writer changed them.
                model.observe_later(self.user_id, self.detector.observe(text))
                known, profile = model.cached_profile(self.user_id)
                if not known:
                    profile = await in_thread(lambda: model.profile(self.user_id))
                hint = profile.hint() if profile is not None else None
            else:

                def observe() -> str | None:
                    model.observe(self.user_id, self.detector.observe(text))
                    profile = model.profile(self.user_id)
                    return profile.hint() if profile is not None else None

                hint = await in_thread(observe)
        except Exception:
            log.warning("style observation failed; no style hint this run", exc_info=True)
            return
        run.state_for(self)["hint"] = self.hint = hint

    def _inline(self, text: str) -> bool:
        return type(self.detector) is StyleDetector and len(text) <= INLINE_CHARS

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        if isinstance(self.model, SqliteUserModel):
            try:
                await self.model.flush_soon()
            except Exception:
                log.warning("style observation not saved", exc_info=True)

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        hint = run.state_for(self).get("hint")
        if hint is None:
            return request
        return request.model_copy(
            update={"system_prompt": add_to_system(request.system_prompt, hint)}
        )
