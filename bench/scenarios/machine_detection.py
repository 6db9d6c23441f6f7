"""machine_detection: how often Relay's answering-machine detector is right, and how soon it
decides (issue 56).

The set is the accuracy test's (harness/answers.py): 35 answers made with espeak-ng and sox,
through mu-law with line noise: greetings of 2-15 s with and without a beep, people saying
"Hello?" and "Yes, who is this?", fax tones, and silence, noise and tones that should stay
`unknown`. Each is fed to a detector 20 ms at a time, as a call's received audio is, until it
knows what answered and, for a machine, when a message would start. The figures: the share
it gets right, the share of machines taken for a person, the time to a decision (p95, over
the answers that can be told apart: the `unknown` ones stop at 4 s by design), and its CPU per
second of audio (this process's own, on one core). Baseline: the issue's targets; the set is
the same every run (sox repeatable), so a change in a figure is a change in the detector.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.report import Row
from bench.scenarios.common import Bench

TARGET_RIGHT = 0.90
TARGET_WRONG_HUMAN = 0.10
DECISION_LIMIT = 4.0  # seconds from the answer: the contract's bound


def machine_detection(b: Bench) -> None:
    from harness.answers import accuracy

    with tempfile.TemporaryDirectory(prefix="bench-answers-") as tmp:
        found = accuracy(Path(tmp))
    wrong = ", ".join(
        f"{r.answer.name}: {r.answered_by}" for r in found.wrong()
    )  # fmt: skip
    total = len(found.results)
    b.add(Row("machine_detection", f"answers classified right, of {total}", found.share_right,
              "share", TARGET_RIGHT, "the issue's floor", f">= {TARGET_RIGHT:.0%}",
              found.share_right >= TARGET_RIGHT, note=wrong or "none wrong"))  # fmt: skip
    b.add(Row("machine_detection", f"machines taken for a person, of {found.machines}",
              found.wrong_human_share, "share", TARGET_WRONG_HUMAN, "the issue's ceiling",
              f"<= {TARGET_WRONG_HUMAN:.0%}",
              found.wrong_human_share <= TARGET_WRONG_HUMAN))  # fmt: skip
    b.add(Row("machine_detection", "time to a decision from the answer, p95 (told apart)",
              found.decided_p95, "s", DECISION_LIMIT, "the contract's bound",
              f"<= {DECISION_LIMIT:.0f} s", found.decided_p95 <= DECISION_LIMIT,
              note=f"over all, unknown ones included: {found.decision_p95:.2f} s"))  # fmt: skip
    b.add(Row("machine_detection", "CPU per second of audio heard", found.cpu_per_audio_second,
              "s/s", note="one core, this process; an agent's 50 calls at once would take "
              f"{found.cpu_per_audio_second * 50:.0%} of one"))  # fmt: skip
