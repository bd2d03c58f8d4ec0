"""Send an image to the model: ImageContent in a user message.

Draws a small PNG in memory (no files, no extra packages), attaches it to the prompt and
prints the answer. With TREADLE_MODEL set to a vision model (openai:gpt-4o-mini,
anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash, ollama:llava) the model really looks.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence

from treadle import Agent, UserMessage
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem
from treadle.types import ImageContent


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


def red_square_png(size: int = 32) -> bytes:
    """A solid red ``size`` x ``size`` PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def main() -> None:
    image = ImageContent.from_bytes(red_square_png(), "image/png")
    agent = Agent(model_or_script(["It is a plain red square."]), system_prompt="Be brief.")
    prompt = UserMessage.of("What colour is this square? One word.", image)
    result = agent.run_sync(prompt)
    sent = result.messages[0]
    print(f"sent {len(image.data)} base64 characters of {image.mime_type} with the prompt")
    print("answer:", result.text or f"(no text; the run ended with {result.reason})")
    if result.error:
        print("error:", result.error)
    assert isinstance(sent, UserMessage) and any(b.type == "image" for b in sent.content)


if __name__ == "__main__":
    main()
