"""An A2A task as treadle runs: the a2a-sdk's ``AgentExecutor`` over a treadle Agent.

Each A2A context is one conversation (an Agent forked from the template, its session id
the context id: with a store, the conversation survives restarts). A task is one run, or
several when it stops for input: a run that suspends (an approval, a question) leaves the
task ``input-required``, and the client's next message on the task continues it. The run
is the loop's: a cancel is ``agent.abort()`` (every tool call answered, the history
closed), and a task is ``canceled`` only once its run has ended.
"""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError
from pydantic import BaseModel

from ..agent import Agent, RunResult
from ..loop import Suspension
from ..types import AssistantMessage, MessageEnd, MessageStart, MessageUpdate, ToolResultMessage
from ._parts import (
    AnswerRefused,
    agent_message,
    data_part,
    describe_waiting,
    prompt_of,
    read_answer,
    text_part,
)

_CONTEXT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
AgentSource = Agent[Any] | Callable[[str], Agent[Any]]


@dataclass
class Conversation:
    """One A2A context: its agent, one run at a time, and the task waiting for input."""

    agent: Agent[Any]
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    waiting_task: str | None = None


@dataclass
class LiveTask:
    """A task whose run is going: what a cancel needs to stop it and wait for its end."""

    conversation: Conversation
    done: anyio.Event = field(default_factory=anyio.Event)
    cancel_requested: bool = False
    running: bool = False  # it holds the conversation: a cancel aborts its run


class TreadleExecutor(AgentExecutor):
    """Runs A2A tasks on treadle agents (see the module docstring). ``agent`` is a
    template (each context runs on ``agent.fork(context_id)``) or a function
    ``context_id -> Agent``. At most ``max_contexts`` idle conversations are kept (the
    oldest are closed first; with a store they resume from it)."""

    def __init__(self, agent: AgentSource, *, max_contexts: int = 1000) -> None:
        self._source = agent
        self.max_contexts = max_contexts
        self.conversations: OrderedDict[str, Conversation] = OrderedDict()
        self.live: dict[str, LiveTask] = {}

    # ---- conversations ----

    def conversation(self, context_id: str) -> Conversation:
        found = self.conversations.get(context_id)
        if found is not None:
            self.conversations.move_to_end(context_id)
            return found
        if not _CONTEXT_ID.match(context_id):
            raise InvalidParamsError(
                message=f"context id {context_id[:80]!r} is not usable: use letters, digits, "
                "'.', '_' and '-' (at most 128), or send none and the server makes one"
            )
        source = self._source
        agent = source.fork(context_id) if isinstance(source, Agent) else source(context_id)
        found = self.conversations[context_id] = Conversation(agent)
        self._forget_idle()
        return found

    def _forget_idle(self) -> None:
        for context_id, conv in list(self.conversations.items()):
            if len(self.conversations) <= self.max_contexts:
                return
            if conv.agent.running or conv.lock.locked() or conv.waiting_task is not None:
                continue
            del self.conversations[context_id]
            conv.agent.close()

    async def aclose(self) -> None:
        """Close every conversation's agent (their session locks): at shutdown."""
        conversations, self.conversations = list(self.conversations.values()), OrderedDict()
        for conv in conversations:
            if not conv.agent.running:
                await conv.agent.aclose()

    # ---- the executor ----

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        message = context.message
        if message is None:
            raise InvalidParamsError(message="a message is needed")
        conv = self.conversation(context_id)  # an unusable context id fails here, first
        updater = TaskUpdater(event_queue, task_id, context_id)
        current = context.current_task
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
        live = self.live[task_id] = LiveTask(conv)
        try:
            async with conv.lock:
                if live.cancel_requested:
                    await updater.cancel(self._note(updater, "The task was canceled."))
                    return
                live.running = True  # from here a cancel stops this task's run
                prompt = await self._prompt(conv, task_id, current, message, updater)
                if prompt is None:
                    return
                await updater.start_work()
                result = await self._drive(conv.agent, prompt, updater)
                await self._finish(conv, task_id, result, updater)
        finally:
            del self.live[task_id]
            live.done.set()  # last: a cancel waiting on it returns, and the sdk moves on

    async def _prompt(
        self,
        conv: Conversation,
        task_id: str,
        current: Task | None,
        message: Message,
        updater: TaskUpdater,
    ) -> list[Any] | None:
        """What the run starts from: the client's message (a new task), or nothing (the
        answered calls of a task waiting for input). ``None``: no run (refused, answered)."""
        if current is None:
            if conv.waiting_task is not None:
                await updater.reject(
                    self._note(
                        updater,
                        f"this context waits on task {conv.waiting_task!r} for input: answer "
                        "it (a message with that taskId) or cancel it first",
                    )
                )
                return None
            return [prompt_of(message)]
        if current.status.state != TaskState.TASK_STATE_INPUT_REQUIRED or (
            conv.waiting_task != task_id
        ):
            raise InvalidParamsError(
                message=f"task {task_id!r} is not waiting for input: it takes no message"
            )
        context = conv.agent.context
        waiting: Mapping[str, Suspension] = {
            c: context.suspended[c] for c in context.waiting_tool_calls
        }
        try:
            answer = read_answer(message, waiting)
        except AnswerRefused as refused:
            # nothing changes: the task still waits, and says on what
            parts = [text_part(f"Not taken: {refused}."), *describe_waiting(waiting)]
            await updater.requires_input(self._message(updater, parts))
            return None
        for call_id, arguments in answer.approve.items():
            context.approve(call_id, arguments)
        for call_id, reason in answer.deny.items():
            context.deny(call_id, reason)
        for call_id, text in answer.answers.items():
            conv.agent.messages.append(
                ToolResultMessage(
                    tool_call_id=call_id, tool_name=waiting[call_id].name, content=text
                )
            )
        conv.waiting_task = None
        return []

    async def _drive(
        self, agent: Agent[Any], prompt: list[Any], updater: TaskUpdater
    ) -> RunResult[Any]:
        """One run, its text streamed as artifacts: one per assistant message, sent in
        pieces as it streams, then whole (``last_chunk``) once the message ends."""
        artifact: str | None = None
        streamed = False
        async with agent.stream(prompt) as events:
            async for event in events:
                if event.depth != 0:
                    continue
                if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
                    artifact, streamed = uuid.uuid4().hex, False
                elif isinstance(event, MessageUpdate) and artifact is not None:
                    delta = event.delta
                    if delta.type == "text" and delta.text:
                        await updater.add_artifact(
                            [text_part(delta.text)],
                            artifact_id=artifact,
                            name="text",
                            append=streamed,
                        )
                        streamed = True
                elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
                    text = event.message.text
                    if artifact is not None and (streamed or text):
                        await updater.add_artifact(
                            [text_part(text)],
                            artifact_id=artifact,
                            name="text",
                            append=False,
                            last_chunk=True,
                        )
                    artifact = None
        return events.result

    async def _finish(
        self, conv: Conversation, task_id: str, result: RunResult[Any], updater: TaskUpdater
    ) -> None:
        reason = result.reason
        if reason == "suspended":
            context = conv.agent.context
            waiting = {c: context.suspended[c] for c in context.waiting_tool_calls}
            conv.waiting_task = task_id
            await updater.requires_input(self._message(updater, describe_waiting(waiting)))
        elif reason == "completed":
            if result.output is not None:
                output = result.output
                value = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
                await updater.add_artifact([data_part(value)], name="output", last_chunk=True)
            text = result.text
            await updater.complete(self._note(updater, text) if text else None)
        elif reason == "cancelled":
            await updater.cancel(self._note(updater, "The task was canceled."))
        elif reason == "rejected":
            await updater.reject(self._note(updater, "The input was refused."))
        else:
            why = result.error.message if result.error is not None else reason
            await updater.failed(self._note(updater, f"The run ended ({reason}): {why}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Stop the task's run (``agent.abort()``: every tool call answered) and wait for
        it to end ``canceled``; a task waiting for input has its calls denied."""
        task_id = str(context.task_id)
        live = self.live.get(task_id)
        if live is not None:
            live.cancel_requested = True
            if not live.running:
                return  # waiting its turn: the sdk cancels it there, before any run
            while not live.done.is_set():  # also a run whose token is not made yet
                live.conversation.agent.abort()
                with anyio.move_on_after(0.05):
                    await live.done.wait()
            return
        updater = TaskUpdater(event_queue, task_id, str(context.context_id))
        conv = self.conversations.get(str(context.context_id))
        if conv is not None and conv.waiting_task == task_id:
            agent_context = conv.agent.context
            for call_id in agent_context.waiting_tool_calls:  # answered on its next run
                agent_context.deny(call_id, "The task was canceled.")
            conv.waiting_task = None
        await updater.cancel(self._note(updater, "The task was canceled."))

    # ---- messages ----

    def _message(self, updater: TaskUpdater, parts: list[Part]) -> Message:
        return agent_message(
            parts,
            task_id=updater.task_id,
            context_id=updater.context_id,
            message_id=uuid.uuid4().hex,
        )

    def _note(self, updater: TaskUpdater, text: str) -> Message:
        return self._message(updater, [text_part(text)])
