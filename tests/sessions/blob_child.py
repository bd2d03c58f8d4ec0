"""A JSONL session with files, killed before each of its writes in turn (driven by
test_blobs.py).

``python blob_child.py ROOT before|torn``: for k = 1, 2, … it makes a store in ``ROOT/<k>``,
forks, and the child writes :func:`messages` (and a truncation) through one writer, dying
with ``os._exit`` (no cleanup, no ``finally``: what a SIGKILL leaves) just before its k-th
filesystem write (``os.write``, ``open``, ``replace``, ``mkdir``, ``ftruncate``; the store
skips its fsyncs, which change nothing a killed process leaves), or, with ``torn``,
halfway through it. This process is single-threaded, so forking is safe. It prints one
JSON line per k: how many steps of :func:`work` returned before the kill. It stops at the
first k the child survives.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

from treadle import AssistantMessage, TextContent, UserMessage
from treadle.sessions import JsonlStore
from treadle.types import AgentMessage, FileContent, ImageContent, ToolResultMessage

SESSION = "with-files"
OPS = ("write", "open", "replace", "mkdir", "ftruncate")

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n" + bytes(range(256)) * 8
CSV = b"region,total\nnorth,3\nsouth,5\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)


def messages() -> list[AgentMessage]:
    """The history the child writes: the same PDF on three messages, a CSV, a tool's image."""
    pdf = FileContent.from_bytes(PDF, name="contract.pdf")
    image = ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    return [
        UserMessage.of("Summarise", files=[pdf]),
        AssistantMessage(content=[TextContent(text="It is a contract.")]),
        UserMessage.of("And with the sales?", files=[pdf, FileContent.from_bytes(CSV)]),
        ToolResultMessage(
            tool_call_id="c1", tool_name="chart", content=[TextContent(text="chart"), image]
        ),
        UserMessage.of("Once more", files=[pdf]),
    ]


def work(store: JsonlStore, progress: int) -> None:
    history = messages()
    with store.open_writer(SESSION) as writer:
        for message in history[:3]:
            writer.append(message)
            os.write(progress, b".")
        writer.truncate(2)  # the third message goes, its file stays needed by the others
        os.write(progress, b".")
        writer.extend(history[2:])
        os.write(progress, b".")


def states() -> list[list[AgentMessage]]:
    """The stored history after each step of :func:`work` (the first: before any)."""
    h = messages()
    return [[], h[:1], h[:2], h[:3], h[:2], h]


def killer(k: int, torn: bool) -> None:
    """Patch ``os`` so that the k-th filesystem write ends the process."""
    count = [0]
    for name in OPS:
        original = getattr(os, name)

        def patched(*args: Any, _original: Any = original, _name: str = name) -> Any:
            count[0] += 1
            if count[0] == k:
                if torn and _name == "write":
                    fd, data = args
                    _original(fd, bytes(data)[: max(1, len(data) // 2)])
                os._exit(77)
            return _original(*args)

        setattr(os, name, patched)


def main(root: Path, torn: bool) -> None:
    warm = JsonlStore(root / "warm-up", fsync=False)  # pydantic builds its serializers lazily:
    warm.create(SESSION)  # once here, not again in every child
    work(warm, os.open(os.devnull, os.O_WRONLY))
    k = 0
    while True:
        k += 1
        where = root / str(k)
        store = JsonlStore(where, fsync=False)  # a kill cannot see what fsync changes
        store.create(SESSION)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: write until killed
            os.close(read)
            killer(k, torn)
            work(store, write)
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        returned = len(os.read(read, 1024))
        os.close(read)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"k": k, "returned": returned, "killed": code == 77}), flush=True)
        if code != 77:
            return


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] == "torn")
