"""treadle.ext.memory: the SQLite store (FTS5 and the LIKE fallback), the recall hook and the
remember tool, across two processes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from tests.preloaded import Preloader

import treadle
from treadle import Agent, AssistantMessage, ToolCall, UserMessage
from treadle.ext.memory import RECALL_HEADER, MemoryRecall, MemoryStore
from treadle.loop import InputFilter, Reject
from treadle.testing import ScriptedProvider

SRC = str(Path(treadle.__file__).resolve().parents[1])


def _texts(message: object) -> str:
    assert isinstance(message, UserMessage)
    return message.text


@pytest.fixture(params=[True, False], ids=["fts5", "like"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory.db", fts=request.param)


def test_search_ranks_the_best_match_first(store: MemoryStore) -> None:
    store.remember("The user prefers green tea in the morning")
    store.remember("The deploy target is a Raspberry Pi cluster")
    store.remember("Green is the colour of the company logo")
    found = store.search("Which tea does the user prefer?")
    assert found[0].text == "The user prefers green tea in the morning"
    assert all(a.score >= b.score for a, b in itertools.pairwise(found))
    assert [f.text for f in store.search("raspberry deploy")] == [
        "The deploy target is a Raspberry Pi cluster"
    ]
    assert store.search("quantum chromodynamics") == []
    assert store.search("the of and") == []  # only stopwords: nothing to look for


def test_remember_is_idempotent_and_forget_removes(store: MemoryStore) -> None:
    first = store.remember("Cats are called  Miso and Tofu")
    again = store.remember("Cats are called Miso and Tofu")
    assert first.id == again.id and len(store) == 1
    assert store.forget(first.id) is True
    assert store.forget(first.id) is False
    assert store.search("Miso") == [] and len(store) == 0
    store.remember("Dog is called Rex")
    assert store.forget("Dog is called Rex") and store.facts() == []
    with pytest.raises(ValueError):
        store.remember("   ")


def test_fts_is_used_when_available_and_like_on_request(tmp_path: Path) -> None:
    assert MemoryStore().fts is True  # this SQLite has FTS5
    assert MemoryStore(fts=False).fts is False


def test_an_index_out_of_step_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    plain = MemoryStore(path, fts=False)  # a writer without FTS5
    plain.remember("The staging database lives in Frankfurt")
    plain.close()
    indexed = MemoryStore(path)
    assert indexed.fts
    assert [f.text for f in indexed.search("staging database")] == [
        "The staging database lives in Frankfurt"
    ]


@pytest.mark.anyio
async def test_recall_goes_in_front_of_every_request_of_a_fresh_conversation(
    store: MemoryStore,
) -> None:
    store.remember("The user's name is Ada")
    store.remember("The user's favourite language is OCaml")
    store.remember("Unrelated: the office plant is a fern")
    call = ToolCall(id="c1", name="remember", arguments={"fact": "Ada likes short answers"})
    provider = ScriptedProvider([AssistantMessage(content=[call]), "Hello Ada", "Again"])
    recall = MemoryRecall(store, limit=2)
    agent = Agent(provider, hooks=[recall], tools=[store.remember_tool()])
    result = await agent.run("What is my favourite language?")
    assert result.reason == "completed"
    first, second = provider.requests[0], provider.requests[1]
    block = _texts(first.messages[0])
    assert block.startswith(RECALL_HEADER)
    assert "OCaml" in block and "fern" not in block
    assert _texts(first.messages[1]) == "What is my favourite language?"
    assert _texts(second.messages[0]) == block  # the next turn keeps it
    assert not any(RECALL_HEADER in getattr(m, "text", "") for m in agent.messages)
    assert "Ada likes short answers" in [f.text for f in store.facts()]  # the tool saved it
    # a later run of the same conversation: no new search, the same block
    store.remember("The user's favourite language is now Rust")
    await agent.run("And now?")
    assert _texts(provider.requests[2].messages[0]) == block


@pytest.mark.anyio
async def test_no_recall_when_nothing_matches_or_the_conversation_is_resumed(
    store: MemoryStore,
) -> None:
    store.remember("The user's favourite language is OCaml")
    provider = ScriptedProvider(["a", "b"])
    agent = Agent(provider, hooks=[MemoryRecall(store)])
    await agent.run("Tell me about penguins")
    assert [_texts(m) for m in provider.requests[0].messages] == ["Tell me about penguins"]
    # a conversation that already has history (a resumed session) is not searched
    resumed = Agent(provider, hooks=[MemoryRecall(store)])
    resumed.messages.extend(agent.messages)
    await resumed.run("What is my favourite language?")
    assert len(provider.requests[1].messages) == 3
    assert not any(RECALL_HEADER in getattr(m, "text", "") for m in provider.requests[1].messages)


@pytest.mark.anyio
async def test_a_rejected_input_is_not_searched(store: MemoryStore) -> None:
    class No(InputFilter):
        def filter(self, text: str) -> Reject:
            return Reject("no")

    store.remember("The user's favourite language is OCaml")
    recall = MemoryRecall(store)
    agent = Agent(ScriptedProvider([]), hooks=[recall], input_filters=[No()])
    result = await agent.run("favourite language?")
    assert result.reason == "rejected" and recall.recalled == []


WRITER = """
import anyio
from treadle import Agent, AssistantMessage, ToolCall
from treadle.ext.memory import MemoryRecall, MemoryStore
from treadle.testing import ScriptedProvider

store = MemoryStore({path!r})
call = ToolCall(id="c1", name="remember", arguments={{"fact": "The user's cat is called Miso"}})
agent = Agent(ScriptedProvider([AssistantMessage(content=[call]), "Noted."]),
              tools=[store.remember_tool()], hooks=[MemoryRecall(store)])
result = anyio.run(agent.run, "My cat is called Miso, remember that.")
assert result.reason == "completed", result
print("pid", __import__("os").getpid())
"""


@pytest.mark.anyio
async def test_a_fact_remembered_in_one_process_is_recalled_in_the_next(
    tmp_path: Path, server_preloader: Preloader
) -> None:
    path = str(tmp_path / "shared.db")
    # python -c WRITER in a process of its own, forked from the worker's preloader
    writer = server_preloader.command("-c", textwrap.dedent(WRITER.format(path=path)))
    done = await anyio.run_process(writer, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert int(done.stdout.split()[-1]) != os.getpid()
    provider = ScriptedProvider(["Your cat is Miso."])
    agent = Agent(provider, hooks=[MemoryRecall(MemoryStore(path))])
    await agent.run("What is my cat called?")
    first = provider.requests[0].messages
    assert RECALL_HEADER in _texts(first[0]) and "Miso" in _texts(first[0])


def test_importing_treadle_does_not_import_ext() -> None:
    code = (
        "import sys, treadle, treadle.agent\n"
        "print(any(m.startswith('treadle.ext') for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        check=True,
    )
    assert done.stdout.strip() == "False"
