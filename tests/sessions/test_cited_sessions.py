"""A session stored before citations existed loads, and is written again, byte for byte;
a message with citations keeps them in every store (the contract suite's ``every_kind``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from treadle import AssistantMessage, TextContent
from treadle.sessions import JsonlStore, SqliteStore
from treadle.types import Citation

BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "before-citations"
SESSION = "tea-before-citations"


def message_lines(path: Path) -> list[bytes]:
    """Each message record's payload, as the file holds it (the record's time left aside)."""
    lines = path.read_bytes().splitlines()
    return [line[line.index(b',"m":') :] for line in lines if line.startswith(b'{"t":"m"')]


def test_a_session_stored_before_citations_is_written_again_byte_for_byte(
    tmp_path: Path,
) -> None:
    shutil.copy(BEFORE / f"{SESSION}.jsonl", tmp_path / f"{SESSION}.jsonl")
    store = JsonlStore(tmp_path)
    messages = store.load(SESSION).messages
    assert len(messages) == 4
    copy = store.create("copy")
    with store.open_writer(copy) as writer:
        writer.extend(messages)
    stored = message_lines(tmp_path / f"{SESSION}.jsonl")
    assert message_lines(store.path(copy)) == stored
    assert all(b"citations" not in line for line in stored)
    for message, line in zip(messages, stored, strict=True):
        assert message.model_dump_json().encode() == line[len(b',"m":') : -1]


def test_a_cited_answer_round_trips_in_sqlite_and_jsonl(tmp_path: Path) -> None:
    answer = AssistantMessage(
        content=[
            TextContent(text="Green tea is not oxidised.", citations=[
                Citation(kind="char_location", title="Tea notes", cited_text="Green tea is…",
                         document_index=0, source_start=0, source_end=42),
                Citation(kind="url_citation", url="https://example.com/tea", start=0, end=9),
            ]),
            TextContent(text="That is all."),
        ]
    )  # fmt: skip
    for store in (JsonlStore(tmp_path / "jsonl"), SqliteStore(tmp_path / "s.db")):
        with store:
            sid = store.create()
            with store.open_writer(sid) as writer:
                writer.append(answer)
            loaded = store.load(sid).messages
        assert loaded == [answer]
        assert loaded[0].model_dump_json() == answer.model_dump_json()
    line = (tmp_path / "jsonl").glob("*.jsonl").__next__().read_text().splitlines()[-1]
    first, second = json.loads(line)["m"]["content"]
    assert first["citations"][1] == {
        "kind": "url_citation",
        "url": "https://example.com/tea",
        "start": 0,
        "end": 9,
    }  # what a provider did not say is left out
    assert "citations" not in second
