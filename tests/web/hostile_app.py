"""examples/web/app.py served with a hostile model: its tool call's arguments (and so the
tool's result) carry HTML and script, for the page's XSS test. Run as
``python tests/web/hostile_app.py PORT``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import uvicorn

from treadle import AssistantMessage, ToolCall
from treadle.testing import ScriptedProvider

APP = Path(__file__).resolve().parents[2] / "examples" / "web" / "app.py"
PAYLOAD = (
    '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    "<svg onload=window.pwned=3></svg>"
)


def hostile_provider() -> object:
    call = ToolCall(id="w1", name="weather", arguments={"city": PAYLOAD})
    return ScriptedProvider([AssistantMessage(content=[call]), "All done."])


if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("web_example_app", APP)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.make_provider = hostile_provider  # the example's runs ask for their model here
    uvicorn.run(example.create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
