"""bench/report.py's merge of a run of some scenarios into docs/benchmarks.md (`make bench
BENCH_ONLY=...`): their rows replaced in place, a note saying where they come from, and the
same run merged twice leaving the same page (no note, nor blank line, piling up)."""

from bench import report
from bench.report import NOTES_SECTION, Row

PAGE = f"""# Benchmarks

## Results

| scenario | figure | value | baseline | ratio | target | met | server CPU | client CPU |
|---|---|---|---|---|---|---|---|---|
| http_me | GET /api/me | 1.0 ms | n/a | n/a | - | - | 1% | 1% |
| sip_ring_group | agent CPU | 80.0 CPU ms | n/a | n/a | - | - | 1% | 1% |

{NOTES_SECTION}

The old notes.
"""


def test_a_partial_run_merged_twice_leaves_the_same_page(tmp_path, monkeypatch):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(PAGE)
    monkeypatch.setattr(report, "DOC", doc)
    rows = [Row("sip_ring_group", "agent CPU", 70.0, "CPU ms")]
    notes = f"{NOTES_SECTION}\n\nThe new notes."

    report.merge_docs(rows, scenarios=["sip_ring_group"], stamp="run 1", notes=notes)
    once = doc.read_text()
    report.merge_docs(rows, scenarios=["sip_ring_group"], stamp="run 1", notes=notes)

    assert doc.read_text() == once
    assert once.count("Rows of sip_ring_group: run 1") == 1
    assert "\n\n\n" not in once
    assert "| http_me | GET /api/me | 1.0 ms |" in once  # the full run's row stays
    assert "| agent CPU | 70 CPU ms |" in once and "80.0 CPU ms" not in once
    assert once.endswith("The new notes.\n")
