"""A report as one self-contained HTML page: the data as JSON in the page, the web UI's
inspector (``treadle/ui/web/static``: its CSS and ``inspector.js``) and the report's own
script, all inline. Nothing is fetched; a Content Security Policy lets only these scripts
run (by their hashes), so no text of a run can ever become markup or code."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import ReportData

HERE = Path(__file__).with_name("static")
WEB = Path(__file__).resolve().parents[1] / "ui" / "web" / "static"

_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title} · treadle eval</title>
<style>{css}</style>
</head>
<body>
<header class="top">
  <span class="brand">treadle eval</span>
  <span id="title" class="agent"></span>
  <span class="spacer"></span>
  <button id="theme" type="button" title="Light / dark">◐</button>
</header>
<main class="report">
  <section id="summary" data-testid="summary"></section>
  <section id="cases"></section>
  <section id="detail" data-testid="detail" hidden></section>
</main>
<script id="report-data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""


def json_for_script(value: object) -> str:
    """JSON that cannot end its ``<script>`` element (nor start a comment in it)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in _ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def report_html(report: ReportData) -> str:
    script = (
        (WEB / "inspector.js").read_text(encoding="utf-8")
        + "\n"
        + (HERE / "report.js").read_text(encoding="utf-8")
    )
    css = (
        (WEB / "app.css").read_text(encoding="utf-8")
        + "\n"
        + (HERE / "report.css").read_text(encoding="utf-8")
    )
    # an inline asset holding "</" could end its element: tests/evals checks they hold none
    assert "</" not in script and "</" not in css, "an inline asset of the report holds '</'"
    csp = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    data = json_for_script(report.model_dump(mode="json"))
    return PAGE.format(csp=csp, title=html.escape(report.name), css=css, data=data, script=script)
