"""``import treadle`` imports none of the optional integrations or their dependencies, and
no event-loop backend (asyncio alone costs it about 25 ms; a backend loads when a run starts)."""

from __future__ import annotations

import subprocess
import sys


def test_import_treadle_stays_light() -> None:
    code = (
        "import sys, treadle, treadle.agent, treadle.loop, treadle.tools, treadle.providers\n"
        "import treadle.providers.vertex, treadle.providers.fallback, treadle.testing\n"
        "heavy = ('treadle.ext', 'treadle.ui', 'treadle.durable', 'treadle.mcp', 'treadle.otel',"
        " 'dbos', 'sqlalchemy', 'mcp', 'opentelemetry', 'starlette', 'uvicorn', 'ag_ui',"
        " 'asyncio', 'trio', 'google', 'cryptography', 'anthropic')\n"
        "print(sorted({m.split('.')[0] if not m.startswith('treadle') else m"
        " for m in sys.modules if m.startswith(heavy)}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
