"""treadle.ext.style: the detector's heuristics, the SQLite user model, the hint line, and
failures that must not break a run."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from treadle import Agent
from treadle.ext.style import (
    SqliteUserModel,
    StyleDetector,
    StyleHints,
    StyleObservation,
    StyleProfile,
    UserModel,
)
from treadle.testing import ScriptedProvider

detect = StyleDetector().observe


def test_language() -> None:
    assert detect("Kannst du mir bitte sagen, wie das Wetter ist?").language == "de"
    assert detect("Could you tell me what the weather is like this week?").language == "en"
    assert detect("Je voudrais une table pour deux, s'il vous plaît.").language == "fr"
    assert detect("ok").language == "unknown"


def test_formality_sentences_and_code() -> None:
    casual = detect("hey lol can u fix it?? thx!! i'm stuck")
    formal = detect(
        "Dear team, could you kindly review the attached specification? "
        "Furthermore, please confirm the implementation timeline."
    )
    assert casual.formality < 0.4 < 0.6 < formal.formality
    assert detect("One. Two words. Three words here.").sentence_words == pytest.approx(2.0)
    code = detect("Why does this fail?\n```python\nimport os\nprint(os.getcwd())\n```")
    assert code.code_density > 0.5 and code.words == 4
    assert detect("No code at all here.").code_density == 0


def test_profile_and_hint(tmp_path: Path) -> None:
    model = SqliteUserModel(tmp_path / "users.db")
    assert model.profile("ada") is None
    model.observe("ada", detect("hey, kannst du das bitte fixen? ist nicht gut"))
    model.observe("ada", detect("ich weiß nicht, wie das geht"))
    model.observe("bob", detect("Dear team, could you kindly review the specification?"))
    profile = SqliteUserModel(tmp_path / "users.db").profile("ada")  # persisted
    assert profile is not None and profile.observations == 2 and profile.language == "de"
    hint = profile.hint()
    assert "\n" not in hint and "German" in hint and "short sentences" in hint
    assert "formally" in (model.profile("bob") or profile).hint()
    assert isinstance(model, UserModel)


@pytest.mark.anyio
async def test_the_hint_reaches_the_system_prompt() -> None:
    provider = ScriptedProvider(["ok", "ok"])
    hints = StyleHints(user_id="ada")
    agent = Agent(provider, hooks=[hints], system_prompt="Base.")
    await agent.run("hey kannst du mir das bitte erklären? ich verstehe das nicht")
    system = provider.requests[0].system_prompt or ""
    assert system.startswith("Base.\n\nUser style") and "German" in system
    profile = hints.model.profile("ada")
    assert profile is not None and profile.observations == 1
    await agent.run("und das?")
    assert (hints.model.profile("ada") or profile).observations == 2


class Broken:
    def observe(self, user_id: str, observation: StyleObservation) -> None:
        raise RuntimeError("database is down")

    def profile(self, user_id: str) -> StyleProfile | None:
        raise RuntimeError("database is down")


@pytest.mark.anyio
async def test_failures_are_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    provider = ScriptedProvider(["fine"])
    with caplog.at_level(logging.WARNING, logger="treadle.ext"):
        result = await Agent(provider, hooks=[StyleHints(Broken())], system_prompt="S").run("hi")
    assert result.reason == "completed" and result.text == "fine"
    assert provider.requests[0].system_prompt == "S"
    assert "style observation failed" in caplog.text
