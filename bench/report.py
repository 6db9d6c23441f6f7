"""The result table, and the rewrite of docs/benchmarks.md around its plans section."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.live import ROOT

DOC = ROOT / "docs" / "benchmarks.md"
PLANS_SECTION = "## History query plans"
NOTES_SECTION = "### How each figure is measured"


@dataclass
class Row:
    scenario: str
    figure: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_label: str = ""
    target: str = ""
    met: bool | None = None  # None: no target for this figure
    server_cpu: float | None = None  # CPU seconds per wall second (1.0 = one core)
    client_cpu: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or math.isnan(self.baseline) or math.isnan(self.value):
            return None
        if self.baseline <= 0:  # e.g. an RSS delta lost in the allocator's noise
            return None
        return self.value / self.baseline


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if value == int(value) and abs(value) < 1e6 and unit not in ("ms", "KiB"):
        text = f"{int(value):,}"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    if unit == "%":
        return text + "%"
    return f"{text} {unit}".strip()


def _cpu(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | figure | value | baseline | ratio | target | met | server CPU "
        "| load-gen CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        baseline = "n/a"
        if r.baseline is not None:
            baseline = f"{fmt(r.baseline, r.unit)} ({r.baseline_label})"
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.2f}"
        met = {True: "met", False: "**not met**", None: "-"}[r.met]
        value = fmt(r.value, r.unit) + (f" ({r.note})" if r.note else "")
        lines.append(
            f"| {r.scenario} | {r.figure} | {value} | {baseline} | {ratio} | {r.target or '-'} "
            f"| {met} | {_cpu(r.server_cpu)} | {_cpu(r.client_cpu)} |"
        )
    return "\n".join(lines)


def render(rows: list[Row], *, header: str, notes: str) -> str:
    return f"{header}\n\n{table(rows)}\n\n{notes}\n"


def write_docs(results_markdown: str) -> None:
    """Replace everything before the plans section (bench/history_plans.py owns that one)."""
    plans = ""
    if DOC.exists():
        text = DOC.read_text()
        at = text.find(PLANS_SECTION)
        if at != -1:
            plans = text[at:]
    DOC.write_text(results_markdown.rstrip() + "\n" + ("\n" + plans if plans else ""))


def merge_docs(rows: list[Row], *, scenarios: list[str], stamp: str, notes: str) -> None:
    """A run of some scenarios only (`bench/run.py --only`): their rows in
    docs/benchmarks.md's table are replaced by `rows` (kept in place, or appended when the
    table had none), every other row and the header stay as the full run wrote them, a line
    under the header says where these rows come from, and the method notes are `notes`."""
    text = DOC.read_text()
    head, _, rest = text.partition(NOTES_SECTION)
    tail = rest[rest.find(PLANS_SECTION) :] if PLANS_SECTION in rest else ""
    lines = head.rstrip().splitlines()
    ours = set(scenarios)
    new_rows = table(rows).splitlines()[2:]
    out, placed = [], False
    for line in lines:
        cells = line.split("|")
        if line.startswith("| ") and len(cells) > 2 and cells[1].strip() in ours:
            if not placed:
                out += new_rows
                placed = True
            continue
        out.append(line)
    if not placed:
        last = max(i for i, line in enumerate(out) if line.startswith("|"))
        out[last + 1 : last + 1] = new_rows
    label = ", ".join(scenarios)
    note = f"Rows of {label}: {stamp}; every other row is the full run's."
    out = _without_note(out, f"Rows of {label}:")
    at = out.index("## Results")
    out[at:at] = [note, ""]
    body = "\n".join(out) + "\n\n" + notes.rstrip() + "\n"
    DOC.write_text(body + ("\n" + tail if tail else ""))


def _without_note(lines: list[str], start: str) -> list[str]:
    """`lines` without a note starting with `start` and the blank line merge_docs put after
    it (a re-run of the same scenarios writes its note again, never one more blank line)."""
    kept: list[str] = []
    dropped = False
    for line in lines:
        if line.startswith(start) or (dropped and not line):
            dropped = line.startswith(start)
            continue
        dropped = False
        kept.append(line)
    return kept
