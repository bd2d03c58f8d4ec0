"""One integer seed -> one scenario: a list of moves, drawn from ``random.Random(seed)`` only.

A scenario is plain data (``Scenario.moves``, a list of JSON-able dicts), so it prints,
replays and shrinks: the runner reads the moves and builds the world from them; a move
that is absent falls back to the plainest default (a fast consumer, no hooks, no limits,
the scripted provider). Shrinking deletes moves and simplifies what is left.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

Move = dict[str, Any]

TOOL_BEHAVIOURS = ("ok", "ok", "ok", "slow", "raise", "huge", "unconvertible", "progress", "abort")
HOOK_KINDS = (
    "before_loop",
    "after_loop",
    "before_turn",
    "after_turn",
    "before_model_request",
    "before_tool_call",
    "after_tool_call",
    "on_error",
    "on_message",
    "before_end",
    "on_event",
)
WIRE_FAULTS = ("429", "5xx", "disconnect", "truncate", "malformed", "stream_error", "hang")
SCRIPTED_FAULTS = ("429", "5xx", "overloaded", "bad_request")


@dataclass
class Scenario:
    """What one seed composed. ``moves`` is the whole scenario; ``seed`` names it."""

    seed: int
    moves: list[Move] = field(default_factory=list)

    def of(self, kind: str) -> list[Move]:
        return [m for m in self.moves if m["move"] == kind]

    def first(self, kind: str) -> Move | None:
        found = self.of(kind)
        return found[0] if found else None

    def to_json(self) -> str:
        return json.dumps({"seed": self.seed, "moves": self.moves}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        data = json.loads(text)
        return cls(int(data["seed"]), list(data["moves"]))

    def describe(self) -> str:
        """One line per move."""
        lines = [f"scenario seed={self.seed} ({len(self.moves)} moves)"]
        for m in self.moves:
            rest = ", ".join(f"{k}={v!r}" for k, v in m.items() if k != "move")
            lines.append(f"  {m['move']}({rest})")
        return "\n".join(lines)


def _tool(rng: random.Random, index: int) -> Move:
    eager = rng.random() < 0.2
    behaviour = rng.choice(TOOL_BEHAVIOURS)
    if behaviour == "abort" and rng.random() < 0.7:  # a BaseException: keep it rare
        behaviour = "ok"
    return {
        "move": "tool",
        "name": f"t{index}",
        "sync": rng.random() < 0.3,
        "idempotent": eager or rng.random() < 0.4,
        "eager": eager,
        "sequential": (not eager) and rng.random() < 0.15,
        "behaviour": behaviour,
        "delay": rng.choice((0.0, 0.01, 0.5, 3.0)),
        "timeout": rng.choice((None, None, None, 1.0)),
        "retries": rng.choice((0, 0, 1)),
    }


def _reply(rng: random.Random, names: list[str], index: int, wire: bool) -> Move:
    calls: list[list[Any]] = []
    if names and rng.random() < 0.75:
        for _ in range(rng.choice((1, 1, 2, 3))):
            calls.append([rng.choice(names), rng.randint(0, 9)])
    fault = None
    if rng.random() < 0.2:
        fault = rng.choice(WIRE_FAULTS if wire else SCRIPTED_FAULTS)
    return {
        "move": "reply",
        "index": index,
        "text": rng.choice((None, "Let me see.", "Working on it")) if calls else "Done here.",
        "thinking": rng.random() < 0.15,
        "calls": calls,
        "fault": fault,
    }


HISTORY_FROM = 12_000_000
"""Seeds from here may start from an earlier history (the ``history`` move); lower seeds keep
the scenarios the kept regressions were found with (every kept seed is below)."""

APPROVAL_FROM = 13_000_000
"""Seeds from here may give a tool ``requires_approval`` (its calls suspend the run or go to
the approval handler unless a hook decides); lower seeds keep their scenarios."""


GATE_FROM = 14_000_000
"""Seeds from here may draw the ``gate`` move (approvals planted for calls that are not
pending; a crash's resumed run under a hook that denies every call); lower seeds keep
their scenarios."""

CHANNEL_FROM = 16_000_000
"""Seeds from here may hand the loop a stream of the user's own (an ``ObjectSendStream``
that forwards to the memory stream: no buffer to look into, so every event is sent and
awaited); lower seeds keep their scenarios."""

FALLBACK_FROM = 17_000_000
"""Seeds from here may draw the ``fallback`` move (the model is a ``FallbackModel`` whose
backup answers what the primary's faults leave, with or without ``after_tool_call``);
lower seeds keep their scenarios."""

FILES_FROM = 20_000_000
"""Seeds from here may draw the ``files`` move (the prompts carry the same PDF, so session
stores keep it once by hash, written before the record naming it, and a crash's snapshot
holds what was on disk); lower seeds keep their scenarios."""
ASK_FROM = 19_000_000
"""Seeds from here may give a tool mid-call questions (``asks``: it raises
``ApprovalRequired`` that many times, each answered by the approval handler or by the
simulated person after the run suspends); lower seeds keep their scenarios."""

CITE_FROM = 23_000_000
"""Seeds from here may draw citations on the replies' text (the ``cite`` flag of a reply
move: its text block arrives cited, the sources coming with the block's end, as a
provider's do); lower seeds keep their scenarios. Scripted providers only: the wire fakes
write no citations."""

OVERFLOW_FROM = 15_000_000
"""Seeds from here may draw the ``overflow`` move (a provider that counts more tokens than
the loop's estimate and refuses, as llama.cpp does, any request over its context) and an
``after_turn`` cancel fired while a sub-agent streams; lower seeds keep their scenarios."""


def generate(seed: int) -> Scenario:
    """The scenario of ``seed`` (all randomness from ``random.Random(seed)``; choices added
    later draw from a second generator of the seed, so older seeds keep their scenarios)."""
    rng = random.Random(seed)
    later = random.Random(f"{seed}:later")
    moves: list[Move] = []
    wire = rng.random() < 0.3
    moves.append(
        {
            "move": "provider",
            "kind": "wire" if wire else "scripted",
            "format": rng.choice(("openai", "anthropic")),
            "delay": rng.choice((0.0, 0.001, 0.05)),
        }
    )
    tools = [_tool(rng, i) for i in range(rng.randint(0, 4))]
    moves.extend(tools)
    names = [t["name"] for t in tools]
    for i in range(rng.choice((0, 0, 1, 2))):
        nested = rng.random() < 0.3
        sub = {
            "move": "subagent",
            "name": f"sa{i}",
            "turns": rng.choice((1, 2)),
            "nested": nested,
            "delay": rng.choice((0.0, 0.01)),
            "fail": rng.random() < 0.1,
        }
        moves.append(sub)
        names.append(sub["name"])
    for i in range(rng.randint(1, 5)):
        moves.append(_reply(rng, names, i, wire))
    if rng.random() < 0.5:
        mode = rng.choice(("parallel", "parallel", "sequential", "batched"))
        moves.append(
            {
                "move": "execution",
                "mode": mode,
                "n": rng.choice((1, 2, 3)),
                "max_concurrency": rng.choice((None, None, 1, 2)),
                "steering_mode": rng.choice(("after_batch", "next_tool")),
            }
        )
    if rng.random() < 0.5:
        moves.append({"move": "retry", "max_retries": rng.choice((0, 1, 2, 3))})
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        kind = rng.choice(HOOK_KINDS)
        action = rng.choice(("raise", "veto", "ask", "deny", "replace", "emit", "pass"))
        moves.append({"move": "hook", "kind": kind, "at": rng.randint(0, 3), "action": action})
    if rng.random() < 0.3:
        moves.append(
            {"move": "filter", "at": rng.randint(0, 2), "action": rng.choice(("warn", "reject"))}
        )
    for _ in range(rng.choice((0, 0, 1, 2))):
        moves.append(
            {
                "move": rng.choice(("steer", "follow_up")),
                "at": rng.randint(0, 4),
                "text": rng.choice(("also this", "stop that", "one more thing")),
            }
        )
    if rng.random() < 0.25:
        moves.append(
            {"move": "approval", "handler": rng.choice(("none", "allow", "deny", "raise"))}
        )
    if rng.random() < 0.3:
        kind = rng.choice(("max_turns", "max_total_tokens", "max_duration_s", "max_tool_calls"))
        value = {
            "max_turns": rng.randint(0, 3),
            "max_total_tokens": rng.choice((10, 100, 400)),
            "max_duration_s": rng.choice((0.5, 2.0, 10.0)),
            "max_tool_calls": rng.randint(0, 3),
        }[kind]
        moves.append(
            {
                "move": "limit",
                "kind": kind,
                "value": value,
                "on_limit": rng.choice(("stop", "final_answer")),
                "max_idle_s": rng.choice((None, 5.0)),
            }
        )
    if rng.random() < 0.3:
        how = rng.choice(("immediate", "after_turn", "scope"))
        if rng.random() < 0.5:
            moves.append({"move": "cancel", "how": how, "at_event": rng.randint(0, 60)})
        else:
            moves.append(
                {"move": "cancel", "how": how, "at_time": rng.choice((0.0, 0.02, 1.0, 5.0))}
            )
    if rng.random() < 0.6:
        kind = rng.choice(("fast", "slow", "slow", "none"))
        moves.append(
            {
                "move": "consumer",
                "kind": kind,
                "buffer": rng.choice((0, 1, 2, 8, 32)),
                "delay": rng.choice((0.001, 0.01, 0.1)),
                "slow_consumer": rng.choice(("merge", "merge", "wait")),
                # reads each update's delta as it gets it; joins unread updates (contract §2)
                "look": later.random() < 0.5,
                "coalesce": later.random() < 0.75,
                # with kind "none": no on_event observer either, so nobody hears of events
                # (the loop's quiet path); only the history and the hooks are checked
                "quiet": later.random() < 0.5,
            }
        )
    for _ in range(rng.choice((0, 0, 1, 2))):
        moves.append(
            {
                "move": "subscriber",
                "join_after": rng.randint(0, 30),
                "reconnect_after": rng.choice((None, rng.randint(1, 30))),
                "back": rng.randint(0, 5),
            }
        )
    if rng.random() < 0.3:
        moves.append(
            {
                "move": "session",
                "store": rng.choice(("memory", "jsonl", "sqlite")),
                "crash_at": rng.choice((None, rng.randint(0, 8))),
                "rerun": rng.random() < 0.5,
            }
        )
    if rng.random() < 0.2:
        moves.append({"move": "prompts", "count": rng.choice((2, 3))})
    # Moves added later are drawn last, so older seeds keep the scenario they had.
    if rng.random() < 0.15:
        moves.append({"move": "compaction", "context_window": rng.choice((250, 400, 800))})
        for _ in range(rng.choice((0, 1))):
            kind = rng.choice(("before_compaction", "after_compaction"))
            action = rng.choice(("raise", "veto", "pass"))
            moves.append({"move": "hook", "kind": kind, "at": rng.randint(0, 2), "action": action})
    history = later.random() < 0.2 and seed >= HISTORY_FROM
    if history and not any(m["move"] == "session" for m in moves):
        # a history the run continues: earlier exchanges, a tool round, an extension message
        # (requests leave it out); long enough, with the prompts, to reach the request
        # view's kept path
        moves.append(
            {"move": "history", "exchanges": later.randint(1, 5), "note_at": later.randint(0, 6)}
        )
    for move in moves:
        if move["move"] == "subagent":  # a sub-agent started eagerly, while the model streams
            move["eager"] = rng.random() < 0.3
    if seed >= APPROVAL_FROM:
        for move in moves:
            if move["move"] == "tool":
                move["requires_approval"] = later.random() < 0.3
    gate = random.Random(f"{seed}:gate")
    if seed >= GATE_FROM and gate.random() < 0.5:
        # the one gate: decisions for calls no run suspended on (planted for the model's
        # future call ids) and, after a crash, a resumed run whose hook denies every call
        moves.append(
            {"move": "gate", "stray": gate.random() < 0.7, "deny_resumed": gate.random() < 0.7}
        )
        if gate.random() < 0.5 and not any(m["move"] in ("session", "history") for m in moves):
            moves.append(
                {
                    "move": "session",
                    "store": gate.choice(("memory", "jsonl", "sqlite")),
                    "crash_at": gate.randint(0, 8),
                    "rerun": True,
                }
            )
    late = random.Random(f"{seed}:overflow")
    if seed >= OVERFLOW_FROM:
        if late.random() < 0.3:
            # the server's context; the loop's window (if it compacts) is what it believes
            moves.append({"move": "overflow", "limit": late.choice((300, 600, 1200))})
            if not any(m["move"] == "compaction" for m in moves) and late.random() < 0.8:
                window = late.choice((250, 2048, 8192))
                moves.append({"move": "compaction", "context_window": window})
        subagent = any(m["move"] == "subagent" for m in moves)
        if subagent and not any(m["move"] == "cancel" for m in moves) and late.random() < 0.4:
            moves.append({"move": "cancel", "how": "after_turn", "in_child": True})
    channel = random.Random(f"{seed}:channel")
    if seed >= CHANNEL_FROM and channel.random() < 0.3:
        moves.append({"move": "channel"})
    fall = random.Random(f"{seed}:fallback")
    if seed >= FALLBACK_FROM and fall.random() < 0.4:
        # more faults for the backup to answer, and sometimes a fallback after a tool ran
        wire = any(m["move"] == "provider" and m["kind"] == "wire" for m in moves)
        for move in moves:
            if move["move"] == "reply" and move["fault"] is None and fall.random() < 0.35:
                move["fault"] = fall.choice(WIRE_FAULTS[:-1] if wire else SCRIPTED_FAULTS[:-1])
        breaks = sorted(fall.sample(range(6), fall.choice((0, 1, 2))))  # after a tool call
        moves.append(
            {"move": "fallback", "after_tool_call": fall.random() < 0.4, "break_at": breaks}
        )
    files = random.Random(f"{seed}:files")
    if seed >= FILES_FROM and files.random() < 0.3:
        moves.append(
            {"move": "files", "pages": files.choice((1, 3)), "size": files.choice((0, 4000))}
        )
        if files.random() < 0.5 and not any(m["move"] in ("session", "history") for m in moves):
            moves.append(
                {
                    "move": "session",
                    "store": files.choice(("memory", "jsonl", "sqlite")),
                    "crash_at": files.choice((None, files.randint(0, 8))),
                    "rerun": files.random() < 0.5,
                }
            )
    asking = random.Random(f"{seed}:ask")
    if seed >= ASK_FROM:
        for move in moves:
            if move["move"] == "tool" and asking.random() < 0.3:
                move["asks"] = asking.choice((1, 1, 2))
    citing = random.Random(f"{seed}:cite")
    wired = any(m["move"] == "provider" and m["kind"] == "wire" for m in moves)
    if seed >= CITE_FROM and not wired and citing.random() < 0.4:
        for move in moves:
            if move["move"] == "reply" and move["text"] and citing.random() < 0.6:
                move["cite"] = True
    return Scenario(seed, moves)
