"""``treadle chat``: the interactive conversation.

The prompt is read in the main thread (so readline's line editing and history work, and
Ctrl-C reaches it), while the agent lives on an event loop in a helper thread (an anyio
blocking portal). Ctrl-C while an answer streams aborts that run and comes back to the
prompt; Ctrl-C at the prompt clears the line, and on an empty line asks once, then quits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anyio.from_thread import BlockingPortal

from ..providers.base import ProviderError
from ..types import FileContent
from .files import check_for, describe, prompt_with, read_files
from .render import Renderer, make_renderer
from .setup import count, resolve_model

if TYPE_CHECKING:
    from ..sessions import SessionStore

COMMANDS = {
    "/model": "/model NAME  switch model",
    "/attach": "/attach PATH  a file for the next message",
    "/detach": "/detach",
    "/reset": "/reset  new conversation",
    "/session": "/session",
    "/branch": "/branch N",
    "/continue": "/continue",
    "/compact": "/compact",
    "/usage": "/usage",
    "/help": "/help",
    "/quit": "/quit",
}
CHAT_HELP = " · ".join(COMMANDS[c] for c in COMMANDS if c != "/help")


def history_path() -> Path:
    """``$TREADLE_HISTORY_FILE``, else ``$XDG_DATA_HOME/treadle/history``, else
    ``~/.local/share/treadle/history``."""
    explicit = os.environ.get("TREADLE_HISTORY_FILE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join("~", ".local", "share")
    return Path(base).expanduser() / "treadle" / "history"


class LineEditor:
    """readline (arrow keys, Ctrl-R, a history kept between sessions) when the terminal
    has it; plain ``input()`` otherwise."""

    def __init__(self) -> None:
        self._readline: Any = None
        if sys.stdin.isatty():
            try:
                import readline
            except ImportError:  # Windows without pyreadline: plain input
                readline = None  # type: ignore[assignment]
            self._readline = readline
        if self._readline is not None:
            self._readline.set_history_length(1000)
            try:
                self._readline.read_history_file(history_path())
            except OSError:
                pass  # no history yet

    def read(self, prompt: str) -> str:
        return input(prompt)

    def pending_text(self) -> str:
        """What was typed on the line when Ctrl-C came."""
        return self._readline.get_line_buffer() if self._readline is not None else ""

    def save(self) -> None:
        if self._readline is None:
            return
        path = history_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._readline.write_history_file(path)
        except OSError as exc:
            print(f"(could not save the prompt history to {path}: {exc})", file=sys.stderr)


class Chat:
    """The REPL's state: the agent (replaced by /branch), its store, the model label."""

    def __init__(
        self, agent: Any, store: SessionStore | None, label: str, portal: BlockingPortal
    ) -> None:
        self.agent = agent
        self.store = store
        self.label = label
        self.portal = portal
        self.renderer: Renderer = make_renderer()
        self.editor = LineEditor()
        self.attached: list[FileContent] = []  # sent with the next message

    def _drop_if_empty(self, session_id: str) -> None:
        """A conversation that never got a message leaves nothing behind."""
        if self.store is None:
            return
        try:
            if self.store.info(session_id).message_count == 0:
                self.store.delete(session_id)
        except Exception:
            pass

    def close(self) -> None:
        self.editor.save()
        self.agent.close()
        self._drop_if_empty(self.agent.session_id)
        if self.store is not None:
            self.store.close()

    def show_last_exchange(self) -> None:
        """After ``--resume``: the last thing said on each side, so the user has context."""
        from ..types import AssistantMessage, UserMessage

        messages = self.agent.messages
        last_user = next((m for m in reversed(messages) if isinstance(m, UserMessage)), None)
        last_reply = next(
            (m for m in reversed(messages) if isinstance(m, AssistantMessage) and m.text), None
        )
        if last_user is not None:
            print(f"  you> {_clip(last_user.text)}")
        if last_reply is not None:
            print(f"  {_clip(last_reply.text)}")

    def loop(self) -> int:
        warned = False
        while True:
            try:
                line = self.editor.read("you> ")
            except EOFError:
                print()
                return 0
            except KeyboardInterrupt:
                if self.editor.pending_text():  # clear the line
                    print("^C")
                    warned = False
                    continue
                if not warned:
                    print("^C  (Ctrl-C again or Ctrl-D to quit)")
                    warned = True
                    continue
                print()
                return 0
            warned = False
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                command, _, rest = line.partition(" ")
                if command in ("/quit", "/exit"):
                    return 0
                self._interruptible(self.command, command, rest.strip())
                continue
            self._interruptible(self._answer, line)
            self.renderer.status(self.agent.usage, self.label)

    def _interruptible(self, call: Callable[..., Any], *args: Any) -> None:
        """Run ``call`` on the agent's loop; Ctrl-C aborts the run and waits for it to end
        cleanly (history valid), then comes back to the prompt."""
        future = self.portal.start_task_soon(call, *args)
        while True:
            try:
                future.result()
                return
            except KeyboardInterrupt:
                self.portal.call(self.agent.abort)
                print("\n(interrupted)", flush=True)
            except Exception as exc:  # a provider or store failure: say it, keep the REPL
                print(f"(error: {type(exc).__name__}: {exc})")
                return

    async def _answer(self, line: str) -> None:
        prompt, self.attached = prompt_with(line, self.attached), []
        async with self.agent.stream(prompt) as events:
            async for event in events:
                self.renderer.event(event)

    async def command(self, command: str, rest: str) -> None:
        agent = self.agent
        if command == "/reset":
            previous = agent.session_id
            agent.reset()
            self._drop_if_empty(previous)
            stored = f" (session {agent.session_id})" if self.store is not None else ""
            print(f"(new conversation){stored}")
        elif command == "/session":
            where = f" in {self.store!r}" if self.store is not None else " (not stored)"
            print(f"session {agent.session_id}{where}: {count(len(agent.messages), 'message')}")
        elif command == "/branch":
            try:
                branched = agent.branch(int(rest) if rest else None)
            except (ValueError, IndexError) as exc:
                print(f"cannot branch: {exc}")
                return
            agent.close()
            self.agent = branched
            size = count(len(branched.messages), "message")
            print(f"(branched: session {branched.session_id}, {size})")
        elif command == "/continue":
            if not agent.messages or agent.messages[-1].role == "assistant":
                print("(nothing to continue)")
                return
            result = await agent.continue_()
            print(result.text or f"({result.reason})")
        elif command == "/usage":
            self.renderer.status(agent.usage, self.label)
        elif command == "/compact":
            await self._compact()
        elif command == "/model":
            self._switch_model(rest)
        elif command == "/attach":
            self._attach(rest)
        elif command == "/detach":
            dropped, self.attached = self.attached, []
            print(f"(detached {count(len(dropped), 'file')})")
        elif command == "/help":
            print(CHAT_HELP)
        else:
            print(f"unknown command {command}; the commands are: {', '.join(COMMANDS)}")

    async def _compact(self) -> None:
        before = len(self.agent.messages)
        result = await self.agent.compact()
        if result is None:
            print("(compaction skipped by a hook)")
        elif not result.changed:
            print("(nothing to compact: the conversation is already short; no model call)")
        else:
            print(
                f"(compacted: {before} -> {count(len(self.agent.messages), 'message')}, "
                f"~{result.tokens_before} -> ~{result.tokens_after} tokens)"
            )

    def _attach(self, path: str) -> None:
        """``/attach PATH``: read the file and check the model takes it, now (not when the
        message goes); ``/attach`` alone lists what the next message carries."""
        path = path.strip().strip("'\"")
        if not path:
            names = ", ".join(describe(f) for f in self.attached) or "nothing"
            print(f"(attached: {names}; /attach PATH adds a file, /detach drops them)")
            return
        try:
            block = read_files([os.path.expanduser(path)])[0]
            check_for(self.agent.provider, [*self.attached, block])
        except (ValueError, ProviderError) as exc:
            print(f"cannot attach {path}: {exc}")
            return
        self.attached.append(block)
        print(f"(attached {describe(block)}: it goes with your next message)")

    def _switch_model(self, spec: str) -> None:
        if not spec:
            print(f"model: {self.label}")
            return
        try:
            provider, label = resolve_model(spec)
        except (ValueError, ProviderError) as exc:
            print(f"cannot use {spec!r}: {exc}")
            return
        self.agent.provider = provider
        self.label = label
        print(f"(model: {label})")


def _clip(text: str, width: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
