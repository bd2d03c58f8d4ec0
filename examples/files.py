"""Send documents and audio to the model: FileContent in a user message and from a tool.

Makes a one-page PDF, a CSV and a short WAV in memory, sends the PDF and CSV with the
prompt, lets a tool return a generated PDF, shows the block each one became on the wire,
the token estimate, and the error for a file the provider cannot take (audio to Claude),
raised before any request. The conversation is stored in a JSONL session: the PDF, in two
messages, is kept once beside the records, by content hash. Offline it talks to a wire fake of
Anthropic's API (no key, no network); with TREADLE_MODEL=anthropic:claude-sonnet-4-5 the
model really reads.
"""

from __future__ import annotations

import os
import struct
import tempfile

from treadle import Agent, UserMessage, tool
from treadle.context import estimate_tokens
from treadle.providers import Provider, get_provider
from treadle.sessions import JsonlStore
from treadle.testing import WireFake
from treadle.types import AssistantMessage, FileContent, ToolCall

PDF = (
    b"%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n"
    b"2 0 obj <</Type /Pages /Kids [3 0 R] /Count 1>> endobj\n"
    b"3 0 obj <</Type /Page /Parent 2 0 R>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"
)


def one_second_wav(rate: int = 8000) -> bytes:
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    data = b"\0\0" * rate
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


@tool
def make_invoice(customer: str) -> list[object]:
    """Render the customer's invoice as a PDF."""
    return [f"Invoice for {customer}:", FileContent.from_bytes(PDF, name="invoice.pdf")]


def model() -> tuple[Provider, WireFake | None]:
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec), None
    print("(offline: a wire fake of Anthropic's API answers; set TREADLE_MODEL for a real one)")
    call = ToolCall(id="toolu_1", name="make_invoice", arguments={"customer": "ACME"})
    fake = WireFake.anthropic(
        [
            "The contract runs one page; the north region sold 3.",
            AssistantMessage(content=[call], stop_reason="tool_use"),
            "Here is ACME's invoice.",
        ]
    )
    return fake.provider("claude-sonnet-4-5"), fake


def main(folder: str) -> None:
    provider, fake = model()
    store = JsonlStore(folder)
    agent = Agent(provider, tools=[make_invoice], system_prompt="Be brief.", store=store)
    contract = FileContent.from_bytes(PDF, name="contract.pdf")  # type read from %PDF
    sales = FileContent.from_bytes(b"region,total\nnorth,3\n", name="sales.csv")
    prompt = UserMessage.of("Summarise the contract and the sales.", files=[contract, sales])
    print(f"{contract.label}: {contract.pages()} page(s); {sales.label}")
    print("estimated prompt tokens:", estimate_tokens([prompt], encoding=None))

    result = agent.run_sync(prompt)
    print("answer:", result.text)
    result = agent.run_sync("Make ACME's invoice.")
    print("answer:", result.text)

    audio = FileContent.from_bytes(one_second_wav(), name="call.wav")
    refused = agent.run_sync(UserMessage.of("Transcribe this call.", files=[audio]))
    print("audio:", refused.error.message if refused.error else refused.text)

    agent.close()
    blobs = [p for p in store.blob_directory.rglob("*") if p.is_file()]
    stored = store.load(agent.session_id).messages
    print(f"session: {len(stored)} messages, {len(blobs)} file(s) kept by content hash")
    # the PDF (the contract and the invoice are the same bytes: one blob), the CSV, the WAV
    assert len(blobs) == 3

    if fake is not None:  # what went on the wire
        first = fake.requests[0].json["messages"][0]["content"]
        print("wire blocks:", [block["type"] for block in first])
        invoice = fake.requests[2].json["messages"][-1]["content"][0]
        print("tool result blocks:", [block["type"] for block in invoice["content"]])
        assert [block["type"] for block in first] == ["text", "document", "document"]
        assert [block["type"] for block in invoice["content"]] == ["text", "document"]
        assert len(fake.requests) == 3, "the audio was refused before any request"


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="treadle-files-") as folder:  # removed at the end
        main(folder)
