"""A text block without citations is what it was before they existed — in JSON, in a dump,
in its repr — on every supported pydantic (``exclude_if`` from 2.12, a serializer before);
a citation's JSON holds only what the provider said."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from treadle import AssistantMessage, TextContent, UserMessage
from treadle.types import Citation, message_from_json, messages_to_json

BEFORE = (
    b'[{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1,"cache_point":false},'
    b'{"role":"assistant","content":[{"type":"text","text":"Hello."}],"stop_reason":"stop",'
    b'"model":"","provider":"","usage":{"input":0,"output":0,"reasoning":0,"cache_read":0,'
    b'"cache_write":0,"cache_write_long":0,"total_tokens":0,"cost_usd":null},"timestamp":2,'
    b'"response_id":null,"error":null,"cache_point":false}]'
)  # a history as messages_to_json wrote it before citations


def test_a_history_without_citations_dumps_as_before() -> None:
    history = [
        UserMessage(content="hi", timestamp=1),
        AssistantMessage(content="Hello.", timestamp=2),
    ]
    assert messages_to_json(history) == BEFORE
    block = TextContent(text="hi")
    assert block.model_dump() == {"type": "text", "text": "hi"}
    assert block.model_dump_json() == '{"type":"text","text":"hi"}'
    assert repr(block) == "TextContent(type='text', text='hi')"


def test_a_citation_keeps_only_what_the_provider_said_and_round_trips() -> None:
    cited = Citation(kind="page_location", title="Guide", document_index=0, source_start=2)
    assert cited.model_dump() == {
        "kind": "page_location", "title": "Guide", "document_index": 0, "source_start": 2
    }  # fmt: skip
    assert repr(cited) == (
        "Citation(kind='page_location', title='Guide', document_index=0, source_start=2)"
    )
    answer = AssistantMessage(content=[TextContent(text="Brew at 80 °C.", citations=[cited])])
    assert message_from_json(answer.model_dump_json()) == answer


OLDER_PYDANTIC = """
import inspect
import pydantic

real = pydantic.Field

def Field(*args, **kwargs):  # pydantic before 2.12: no exclude_if
    assert "exclude_if" not in kwargs
    return real(*args, **kwargs)

signature = inspect.signature(real)
Field.__signature__ = signature.replace(
    parameters=[p for p in signature.parameters.values() if p.name != "exclude_if"]
)
pydantic.Field = Field

from treadle import AssistantMessage, TextContent
from treadle.types import Citation, message_from_json
from treadle.types import content

assert not content._LEAVE_OUT_EMPTY  # the serializer's path
plain = TextContent(text="hi")
assert plain.model_dump_json() == '{"type":"text","text":"hi"}'
assert plain.model_dump() == {"type": "text", "text": "hi"}
cited = TextContent(text="hi", citations=[Citation(kind="web", url="https://a.example")])
assert cited.model_dump()["citations"] == [{"kind": "web", "url": "https://a.example"}]
answer = AssistantMessage(content=[plain, cited])
assert message_from_json(answer.model_dump_json()) == answer
print("ok")
"""


def test_older_pydantic_leaves_empty_citations_out_too() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OLDER_PYDANTIC)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
