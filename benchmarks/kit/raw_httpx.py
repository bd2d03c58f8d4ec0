"""Lower bound: a hand-written minimal agent loop on httpx (no SDK, no framework).

Streams the Chat Completions SSE response, parses `data:` lines, re-assembles
tool-call argument deltas, executes the tool, loops until a text answer.
`--client httpx2` runs the same loop on httpx2 (the HTTP client the openai SDK
3.x ships on) to separate transport cost from SDK/framework cost.
"""

import common  # noqa: I001  (first: stdlib baseline is not charged to the library)
from common import add_impl, import_timer

import json
import sys

_client_choice = (
    "httpx2"
    if "--client" in sys.argv and sys.argv[sys.argv.index("--client") + 1] == "httpx2"
    else "httpx"
)

with import_timer() as it:
    if _client_choice == "httpx2":
        import httpx2 as httpx
    else:
        import httpx

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": common.TOOL_DESCRIPTION,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
TOOL_IMPLS = {"add": add_impl}


def _extra(p):
    p.add_argument("--client", choices=["httpx", "httpx2"], default="httpx")


def agent_loop(client, model, stream=True):
    """The hand-written loop: ``run_once()`` for ``client`` (its base URL the API root)."""
    url = "/chat/completions"

    async def turn_stream(messages):
        body = {
            "model": model,
            "messages": messages,
            "tools": TOOLS,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        text, calls = [], {}
        async with client.stream("POST", url, json=body) as resp:
            resp.raise_for_status()
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    continue  # keep reading to EOF so the connection goes back to the pool
                ev = json.loads(data)
                for ch in ev.get("choices") or ():
                    delta = ch.get("delta") or {}
                    if delta.get("content"):
                        text.append(delta["content"])
                    for tc in delta.get("tool_calls") or ():
                        slot = calls.get(tc["index"])
                        if slot is None:
                            slot = calls[tc["index"]] = {"id": None, "name": "", "args": []}
                        if tc.get("id"):
                            slot["id"] = tc["id"]
                        fn = tc.get("function") or {}
                        if fn.get("name"):
                            slot["name"] = fn["name"]
                        if fn.get("arguments"):
                            slot["args"].append(fn["arguments"])
        return "".join(text), [
            (c["id"], c["name"], "".join(c["args"])) for _, c in sorted(calls.items())
        ]

    async def turn_plain(messages):
        body = {"model": model, "messages": messages, "tools": TOOLS}
        resp = await client.post(url, json=body)
        resp.raise_for_status()
        msg = resp.json()["choices"][0]["message"]
        calls = [
            (c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in msg.get("tool_calls") or ()
        ]
        return msg.get("content") or "", calls

    turn = turn_stream if stream else turn_plain

    async def run_once():
        messages = [
            {"role": "system", "content": common.INSTRUCTIONS},
            {"role": "user", "content": common.PROMPT},
        ]
        for _ in range(10):
            text, calls = await turn(messages)
            if not calls:
                return text
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {"id": cid, "type": "function", "function": {"name": name, "arguments": a}}
                        for cid, name, a in calls
                    ],
                }
            )
            for cid, name, a in calls:
                result = TOOL_IMPLS[name](**json.loads(a))
                messages.append(
                    {"role": "tool", "tool_call_id": cid, "content": json.dumps(result)}
                )
        raise RuntimeError("too many turns")

    return run_once


if __name__ == "__main__":
    args = common.parse_args(extra=_extra)

    async def setup():
        # Same pool limits as the openai SDK's defaults, so connection reuse is comparable.
        client = httpx.AsyncClient(
            base_url=args.base_url,
            headers={"Authorization": "Bearer sk-fake"},
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            timeout=httpx.Timeout(60.0),
        )
        return agent_loop(client, args.model, args.stream)

    common.main(
        args,
        library="raw_httpx2" if args.client == "httpx2" else "raw_httpx",
        version=httpx.__version__,
        import_s=it.seconds,
        setup=setup,
    )
