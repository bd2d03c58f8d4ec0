"""The user's writing style: observed on each run's input, kept by a user model (SQLite by
default), and given to the model as one hint line in the system prompt.

::

    agent = Agent(model, hooks=[StyleHints(SqliteUserModel("users.db"), user_id="ada")])
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..loop import AgentContext
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
        sentences = [s for s in _SENTENCES.split(prose) if words(s)]
        per_sentence = len(tokens) / len(sentences) if sentences else 0.0
        return StyleObservation(
            words=len(tokens),
            sentence_words=round(per_sentence, 2),
            formality=_formality(prose, tokens),
            code_density=round(code / len(text), 3) if text else 0.0,
            language=_language(tokens),
        )


def _formality(prose: str, tokens: list[str]) -> float:
    casual = sum(1 for t in tokens if t in _CASUAL)
    casual += prose.count("!!") + len(re.findall(r"\b\w+'(?:m|re|s|ll|d|ve)\b|n't\b", prose))
    casual += sum(1 for s in re.split(r"[.!?]\s+", prose.strip()) if s[:1].islower())
    formal = sum(1 for t in tokens if t in _FORMAL)
    formal += sum(1 for t in tokens if len(t) >= 10)
    formal += sum(1 for s in re.split(r"[.!?]\s+", prose.strip()) if s[:1].isupper())
    if casual + formal == 0:
        return 0.5
    return round(formal / (casual + formal), 3)


def _language(tokens: list[str]) -> str:
    hits = {lang: sum(1 for t in tokens if t in stops) for lang, stops in _STOPS.items()}
    best = max(hits, key=lambda lang: hits[lang])
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


class SqliteUserModel:
    """The default :class:`UserModel`: observations in SQLite; a profile is the mean of the
    last ``window`` observations with text in them."""

    def __init__(self, path: str | Path = ":memory:", *, window: int = 20) -> None:
        self._db = Database(path, _OBSERVATIONS)
        self.window = window

    def observe(self, user_id: str, observation: StyleObservation) -> None:
        o = observation
        self._db.execute(
            "INSERT INTO style_observations VALUES (?, ?, ?, ?, ?, ?, ?)",
            (user_id, o.at, o.words, o.sentence_words, o.formality, o.code_density, o.language),
        )

    def profile(self, user_id: str) -> StyleProfile | None:
        rows = self._db.query(
            "SELECT sentence_words, formality, code_density, language FROM style_observations "
            "WHERE user_id = ? AND words > 0 ORDER BY at DESC LIMIT ?",
            (user_id, self.window),
        )
        if not rows:
            return None
        n = len(rows)
        known = Counter(r[3] for r in rows if r[3] != "unknown").most_common(1)
        return StyleProfile(
            observations=n,
            sentence_words=sum(r[0] for r in rows) / n,
            formality=sum(r[1] for r in rows) / n,
            code_density=sum(r[2] for r in rows) / n,
            language=known[0][0] if known else "unknown",
        )

    def close(self) -> None:
        self._db.close()


class StyleHints(RunTracker):
    """A hook: each run's first user message is observed (``detector``) and recorded in
    ``model`` for ``user_id``; the user's profile then adds one hint line to the system
    prompt of the run's model calls. Failures of the detector or the model are logged
    (logger ``treadle.ext``) and swallowed: the run goes on without a hint."""

    def __init__(
        self,
        model: UserModel | None = None,
        *,
        user_id: str = "default",
        detector: StyleDetector | None = None,
    ) -> None:
        super().__init__()
        self.model: UserModel = model if model is not None else SqliteUserModel()
        self.user_id = user_id
        self.detector = detector or StyleDetector()
        self.hint: str | None = None

    async def before_loop(self, context: AgentContext) -> bool:
        self.hint = None
        return await super().before_loop(context)

    async def on_message(self, message: AgentMessage) -> None:
        first = self.input is None and isinstance(message, UserMessage)
        await super().on_message(message)
        if not first or self.input is None:
            return
        text = self.input

        def observe() -> str | None:
            self.model.observe(self.user_id, self.detector.observe(text))
            profile = self.model.profile(self.user_id)
            return profile.hint() if profile is not None else None

        try:
            self.hint = await in_thread(observe)
        except Exception:
            log.warning("style observation failed; no style hint this run", exc_info=True)

    async def before_model_request(self, request: ModelRequest) -> ModelRequest:
        if self.hint is None:
            return request
        return request.model_copy(
            update={"system_prompt": add_to_system(request.system_prompt, self.hint)}
        )
