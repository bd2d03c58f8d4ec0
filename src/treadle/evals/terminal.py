"""A report in the terminal: one row per case, a column group per model (its score, with
the spread over repeats, its passed samples and the change against the baseline), then a
summary line per model."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .results import CaseResult, ModelSummary

if TYPE_CHECKING:
    from .results import ReportData

MARKS = {"regressed": "▼", "improved": "▲", "new": "new", "missing": "gone"}


def _score(case: CaseResult) -> str:
    spread = f" ±{case.spread:.2f}" if len(case.samples) > 1 else ""
    return f"{case.score:.2f}{spread}"


def _passed(case: CaseResult) -> str:
    text = f"{sum(s.passed for s in case.samples)}/{len(case.samples)}"
    return text + (f" ({case.errors} err)" if case.errors else "")


def _change(report: ReportData, case: str, model: str) -> str:
    if report.comparison is None:
        return ""
    for c in report.comparison.cases:
        if c.case == case and c.model == model:
            mark = MARKS.get(c.status, "")
            delta = c.delta
            return f"{mark} {delta:+.2f}" if delta is not None and mark else mark
    return ""


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def summary_line(s: ModelSummary) -> str:
    ks = " · ".join(f"pass@{k} {v:.2f}" for k, v in sorted(s.pass_at.items()))
    judges = f" (judges {_money(s.eval_cost_usd)})" if s.eval_cost_usd is not None else ""
    return (
        f"{s.model}: score {s.score:.2f} · passed {s.pass_rate:.0%} of {s.samples} · {ks} · "
        f"cost {_money(s.cost_usd)}{judges} · {s.tokens} tokens · {s.errors} errors"
    )


def table_cells(report: ReportData) -> tuple[list[str], list[list[str]]]:
    several = len(report.models) > 1
    compared = report.comparison is not None
    headers = ["case"]
    for model in report.models:
        prefix = f"{model} " if several else ""
        headers += [f"{prefix}score", "passed"] + (["change"] if compared else [])
    rows = []
    for name in dict.fromkeys(c.case for c in report.cases):
        row = [name]
        for model in report.models:
            found = [c for c in report.cases if c.case == name and c.model == model]
            if found:
                row += [_score(found[0]), _passed(found[0])]
            else:
                row += ["-", "-"]
            if compared:
                row.append(_change(report, name, model))
        rows.append(row)
    return headers, rows


def heading(report: ReportData) -> str:
    cases = len({c.case for c in report.cases})
    parts = [
        f"eval {report.name}",
        f"{cases} case{'s' if cases != 1 else ''}",
        f"{len(report.models)} model{'s' if len(report.models) != 1 else ''}",
    ]
    if report.repeat > 1:
        parts.append(f"{report.repeat} repeats")
    parts.append(f"{report.duration_s:.1f} s")
    if report.cancelled:
        parts.append(f"CANCELLED: {len(report.unfinished)} samples unfinished")
    return " · ".join(parts)


def footer(report: ReportData) -> list[str]:
    lines = [summary_line(s) for s in report.summaries]
    if report.comparison is not None:
        lines.append(f"against baseline {report.comparison.baseline_started_at or ''}".rstrip())
        lines += ["  " + line for line in report.comparison.describe().splitlines()]
    return lines


def plain_table(report: ReportData, *, width: int | None = None) -> str:
    headers, rows = table_cells(report)
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    if width is not None and widths and sum(widths) + 2 * len(widths) > width:
        widths[0] = max(8, width - sum(widths[1:]) - 2 * len(widths))
    lines = [heading(report)]

    def line(cells: list[str]) -> str:
        out = []
        for cell, w in zip(cells, widths, strict=False):
            cell = cell if len(cell) <= w else cell[: w - 1] + "…"
            out.append(cell.ljust(w))
        return "  ".join(out).rstrip()

    lines.append(line(headers))
    lines += [line(r) for r in rows]
    lines += footer(report)
    return "\n".join(lines)


def print_report(report: ReportData, file: Any = None) -> None:
    out = file or sys.stdout
    if not (hasattr(out, "isatty") and out.isatty()):  # a log, a pipe: plain lines
        print(plain_table(report), file=out)
        return
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(plain_table(report), file=out)
        return
    console = Console(file=out)
    headers, rows = table_cells(report)
    table = Table(title=heading(report), title_justify="left")
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in rows:
        styled = [
            f"[red]{c}[/red]"
            if c.startswith("▼")
            else f"[green]{c}[/green]"
            if c.startswith("▲")
            else c
            for c in (cell.replace("[", "\\[") for cell in row)
        ]
        table.add_row(*styled)
    console.print(table)
    for line in footer(report):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
