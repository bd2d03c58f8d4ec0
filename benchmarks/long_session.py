"""A long session: 500 turns with tool calls in a 16k-token window, against the fake server.

Starts the benchmark kit's fake server (``benchmarks/kit/fake_llm.py``) on a free loopback
port and drives one growing
conversation through ``agent_loop`` + ``OpenAIChat``: every prompt makes the model call the
``add`` tool twice (each result a ~1.5 kB log), then answer with a 200-token text. With a
``CompactionPolicy(context_window=16_000)`` the history is trimmed and summarised (the
summary call goes to the same fake server) whenever the estimate passes 90 % of the window.

The fake plans its answer from the tool results in the request; in a long session those
pile up, so the server runs here with its planner scoped to the messages after the last
user message (a request without tools, the summary call, gets the final text), and each
response's tool-call ids get a unique prefix (the fake repeats ``call_t0_0`` in every
exchange, which no real model does). Everything else is ``fake_llm.py`` as shipped.

Prints per-turn client CPU (this process only; the server is another one) at turns 10, 100
and 500, peak memory, and checks that every request fit the window and every tool call was
answered (``validate_transcript``). ``--mode both`` (the default) also runs the same session
without compaction, to show how per-turn cost grows with the history.

    python benchmarks/long_session.py [--turns 500] [--window 16000] [--mode both]
                                      [--tokenizer auto|heuristic]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

from treadle import RunHandle

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fake_server import fake_server  # noqa: E402

BENCH = os.path.join(HERE, "kit")


# ---- the fake server, with its turn planner scoped to the current prompt ----


def serve_fake(argv: list[str]) -> None:
    sys.path.insert(0, BENCH)
    import fake_llm  # type: ignore[import-not-found]

    original = fake_llm.plan_turn

    def plan_turn(req: dict[str, Any], default_scenario: str) -> Any:
        messages = req.get("messages") or []
        if not req.get("tools"):  # the summary call: plain text
            scenario = default_scenario
            return scenario, len(fake_llm.SCENARIOS[scenario]), True
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        return original({**req, "messages": messages[last_user:]}, default_scenario)

    # Tool-call ids: the fake reuses call_t0_0, call_t1_0 in every exchange; a real model
    # never repeats an id within a conversation (and validate_transcript would flag it), so
    # each response gets its own prefix.
    responses = itertools.count()
    build = fake_llm.Script.build

    def unique_ids(self: Any, *args: Any) -> Any:
        payload = build(self, *args)
        tag = b'"call_r%d_' % next(responses)
        if isinstance(payload, bytes):
            return payload.replace(b'"call_', tag)
        framed = []
        for chunk in payload:  # b"<hex size>\r\n<data>\r\n"
            data = chunk.partition(b"\r\n")[2][:-2].replace(b'"call_', tag)
            framed.append(b"%x\r\n%s\r\n" % (len(data), data))
        return framed

    fake_llm.plan_turn = plan_turn
    fake_llm.Script.build = unique_ids
    fake_llm.main(argv)


# ---- the session ----


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def session(base_url: str, opts: argparse.Namespace, compaction: bool) -> dict[str, Any]:
    import anyio

    from treadle import (
        AgentContext,
        AgentLoopConfig,
        AssistantMessage,
        Hooks,
        UserMessage,
        agent_loop,
        tool,
    )
    from treadle.context import CompactionPolicy, validate_transcript
    from treadle.loop._context_guard import ContextGuard
    from treadle.providers import OpenAIChat
    from treadle.types import TurnEnd

    log_lines = max(1, opts.tool_chars // 60)

    @tool(description="Add two integers and return their sum, with the adder's log.")
    def add(a: int, b: int) -> str:
        log = "\n".join(
            f"step {i:03d}: operands in range, carry 0, partial ok" for i in range(log_lines)
        )
        return f"sum = {a + b}\n{log}\nresult: {a + b}"

    cpu: list[float] = []  # per turn, in order
    compacted: set[int] = set()
    check_cpu: list[float] = []

    class Meter(Hooks):
        def __init__(self) -> None:
            self.started = 0.0

        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            self.started = time.process_time()
            return True

        async def after_turn(self, run: RunHandle, event: TurnEnd) -> None:
            cpu.append(time.process_time() - self.started)

        async def after_compaction(self, run: RunHandle, stats: dict[str, Any]) -> None:
            compacted.add(len(cpu) + 1)  # the turn in progress, 1-based

    original_check = ContextGuard.check

    async def timed_check(self: ContextGuard) -> Any:
        start = time.process_time()
        try:
            return await original_check(self)
        finally:
            check_cpu.append(time.process_time() - start)

    ContextGuard.check = timed_check  # type: ignore[method-assign]

    provider = OpenAIChat("fake-sequential", base_url=base_url, api_key="sk-fake")
    tokenizer = None if opts.tokenizer == "heuristic" else "auto"
    policy = (
        CompactionPolicy(context_window=opts.window, tokenizer=tokenizer) if compaction else None
    )
    config = AgentLoopConfig(provider=provider, compaction=policy, hooks=[Meter()])
    context = AgentContext(
        system_prompt="You are a careful calculator. Use the add tool for every sum.",
        tools=[add],
    )
    appended: list[Any] = []
    largest_request = 0
    errors: list[str] = []

    async def main() -> None:
        nonlocal largest_request
        k = 0
        while len(cpu) < opts.turns:
            k += 1
            prompt = UserMessage.of(f"Task {k}: add 2 and 3 with the tool, check it, and report.")
            new = await agent_loop([prompt], context, config)
            appended.extend(new)
            for m in new:
                if isinstance(m, AssistantMessage):
                    largest_request = max(largest_request, m.usage.input + m.usage.cache_read)
                    if m.error is not None:
                        errors.append(f"{m.error.kind}: {m.error.message}")

    wall = time.perf_counter()
    anyio.run(main)
    wall = time.perf_counter() - wall
    ContextGuard.check = original_check  # type: ignore[method-assign]

    issues = validate_transcript(context.messages)
    calls = sum(len(m.tool_calls) for m in appended if isinstance(m, AssistantMessage))
    results = sum(1 for m in appended if m.role == "tool_result")
    return {
        "compaction": compaction,
        "tokenizer": opts.tokenizer,
        "turns": len(cpu),
        "cpu": cpu,
        "compacted_turns": sorted(compacted),
        "check_cpu": check_cpu,
        "wall_s": wall,
        "peak_rss_mb": peak_rss_mb(),
        "history_len": len(context.messages),
        "appended": len(appended),
        "largest_request": largest_request,
        "tool_calls": calls,
        "tool_results": results,
        "issues": [str(i) for i in issues],
        "errors": errors,
    }


def _child(base_url: str, opts: argparse.Namespace, compaction: bool) -> dict[str, Any]:
    """One session in a fresh process, so peak memory is its own."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--session",
        base_url,
        "--turns",
        str(opts.turns),
        "--window",
        str(opts.window),
        "--tool-chars",
        str(opts.tool_chars),
        "--tokenizer",
        opts.tokenizer,
    ]
    if not compaction:
        cmd.append("--no-compaction")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the session failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _at(cpu: list[float], turn: int, width: int = 10) -> tuple[float, float]:
    """CPU ms of turn ``turn`` (1-based) and the median of the (up to 21) turns around it:
    one turn's figure is noisy on a shared machine."""
    i = min(turn, len(cpu)) - 1
    window = cpu[max(0, i - width) : i + width + 1]
    return cpu[i] * 1000, statistics.median(window) * 1000


def report(result: dict[str, Any], window: int) -> list[str]:
    cpu = result["cpu"]
    compacted = set(result["compacted_turns"])
    plain = [c for i, c in enumerate(cpu, 1) if i not in compacted]
    name = "with compaction" if result["compaction"] else "without compaction"
    if result["compaction"]:
        name += f" (tokenizer: {result['tokenizer']})"
    out = [f"{name}: {result['turns']} turns, {result['wall_s']:.1f} s wall"]
    arounds = {}
    for turn in (10, 100, 500):
        if turn <= len(cpu):
            one, around = arounds[turn] = _at(cpu, turn)
            out.append(
                f"  turn {turn:>3}: {one:6.2f} ms CPU (median of turns around it {around:.2f})"
            )
    if 10 in arounds and len(cpu) > 10:
        last = max(arounds)
        out.append(
            f"  turn {last} / turn 10 (medians around them): "
            f"{arounds[last][1] / arounds[10][1]:.2f}x"
        )
    q = max(1, len(plain) // 10)
    out.append(
        f"  ordinary turns: first tenth median {statistics.median(plain[:q]) * 1000:.2f} ms,"
        f" last tenth {statistics.median(plain[-q:]) * 1000:.2f} ms"
    )
    if compacted:
        costs = [cpu[i - 1] * 1000 for i in sorted(compacted)]
        out.append(
            f"  {len(compacted)} compactions; a compacting turn: median "
            f"{statistics.median(costs):.2f} ms CPU (includes the summary call)"
        )
        checks = result["check_cpu"]
        out.append(
            f"  context check before each call: median {statistics.median(checks) * 1e6:.0f} us,"
            f" turns 1-10 {statistics.median(checks[:10]) * 1e6:.0f} us, last 10 "
            f"{statistics.median(checks[-10:]) * 1e6:.0f} us"
        )
    out.append(
        f"  peak RSS {result['peak_rss_mb']:.1f} MB; history at the end {result['history_len']} "
        f"messages ({result['appended']} appended); largest request {result['largest_request']:,} "
        f"tokens (as the server counted){'' if not result['compaction'] else f' of {window:,}'}"
    )
    out.append(
        f"  tool calls {result['tool_calls']}, results {result['tool_results']}, transcript "
        f"issues {len(result['issues'])}, error turns {len(result['errors'])}"
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--tool-chars", type=int, default=1500, help="size of each tool result")
    parser.add_argument("--mode", choices=["compaction", "both"], default="both")
    parser.add_argument(
        "--tokenizer",
        choices=["auto", "heuristic"],
        default="auto",
        help="tiktoken when it loads (auto) or the 4-characters-a-token heuristic",
    )
    parser.add_argument("--serve-fake", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--no-compaction", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()

    if opts.serve_fake is not None:
        serve_fake(opts.serve_fake)
        return 0
    if opts.session:
        sys.path.insert(0, os.path.join(HERE, "..", "src"))
        print(json.dumps(session(opts.session, opts, not opts.no_compaction)))
        return 0

    ok = True
    with fake_server(os.path.abspath(__file__), "--serve-fake") as root:
        modes = [True] if opts.mode == "compaction" else [True, False]
        for compaction in modes:
            result = _child(root + "/v1", opts, compaction)
            print("\n".join(report(result, opts.window)))
            if (
                result["issues"]
                or result["errors"]
                or result["tool_calls"] != result["tool_results"]
            ):
                ok = False
            if compaction and result["largest_request"] > opts.window:
                print(f"  !! a request of {result['largest_request']:,} tokens exceeded the window")
                ok = False
        with urllib.request.urlopen(root + "/stats", timeout=5) as response:
            stats = json.loads(response.read())
        print(f"server: {stats['requests']} requests, {stats['final_bad']} bad final answers")
        ok = ok and stats["final_bad"] == 0
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
