"""Coverage-guided fuzzing (atheris, libFuzzer) of what the gate writes for a pull request from names a trace
chose: the input becomes op names on both sides of a comparison (a baseline and a candidate with added, removed and
slower ops), diff_reports compares them, and diff.md and diff-junit.xml are written. Each output must hold:
- diff.md rendered by GitHub's renderer (cmark-gfm) has the one heading and the two links it writes, no image, no
  script;
- diff-junit.xml parses as XML and carries the failure when the gate regressed.
Anything else (an exception, a broken assertion) is a crash libFuzzer reports with the input.

    python tests/fuzz/fuzz_gate_outputs.py [libFuzzer flags] [CORPUS_DIR ...]

`make test` runs it for a few seconds (test_fuzz_gate_outputs.py), `make fuzz` for FUZZ_SECONDS with a corpus in
.fuzz/gate; a seed is written into the first corpus folder when it is empty.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["stepscope_analyzer.diff", "stepscope_contract"]):
    import cmarkgfm

    from stepscope_analyzer.diff import DiffConfig, diff_reports
    from stepscope_analyzer.diff.pr_summary import junit, markdown
    from stepscope_contract.diff import DiffVerdict
    from stepscope_contract.report import Bottleneck, Diagnosis, RankReport, Report, StepStats

STEPS = 12
LINKS = {"diff_url": "https://ci.example/diff.html", "report_url": "https://ci.example/report.html"}


def _report(names: list[str], step_us: float, op_us: float) -> Report:
    durations = [step_us * (1.0 + 0.01 * (k % 3)) for k in range(STEPS)]
    ranks = [
        RankReport(
            rank=r,
            steps=StepStats(
                count=STEPS,
                median_us=step_us,
                mean_us=step_us,
                min_us=step_us,
                max_us=durations[-1],
                durations_us=durations,
            ),
            top_functions=[
                Bottleneck(name=n, category="cpu_op", count=STEPS, total_us=op_us * STEPS, mean_us=op_us) for n in names
            ],
        )
        for r in range(2)
    ]
    return Report(
        generated_at=datetime(2026, 1, 1, tzinfo=UTC), world_size=2, ranks=ranks, diagnosis=Diagnosis(verdict="v")
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def _check_markdown(text: str) -> None:
    page = cmarkgfm.github_flavored_markdown_to_html(text)
    tags = _Tags()
    tags.feed(page)
    headings = [t for t in tags.tags if t in ("h1", "h2", "h3", "h4", "h5", "h6")]
    assert headings == ["h3"], text
    assert tags.tags.count("a") == 2 and "img" not in tags.tags and "script" not in tags.tags, text


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    names = [fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 60)) for _ in range(fdp.ConsumeIntInRange(1, 6))]
    shared, added = names[: len(names) // 2 + 1], names[len(names) // 2 + 1 :]
    base = _report(shared, 20_000.0, 500.0)
    cand = _report(shared + added, 20_000.0 * (1.0 + 0.1 * fdp.ConsumeIntInRange(0, 10)), 600.0)
    diff = diff_reports(base, cand, DiffConfig(max_regression_pct=15.0))
    _check_markdown(markdown(diff, **LINKS))
    root = ET.fromstring(junit(diff, **LINKS).encode("utf-8"))
    failed = root.find("testsuite/testcase/failure") is not None
    assert failed == (diff.verdict is DiffVerdict.REGRESSED)


def _seed(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        (corpus / "names").write_bytes(b"\x03\x05aten::mm\n# x\r![i](https://e/x.png)[a](https://e)|`\x00")


def main(argv: list[str]) -> None:
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        _seed(Path(dirs[0]))
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
