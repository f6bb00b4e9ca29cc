"""Diagnosis accuracy on the project's scenario corpus (testing/stepscope_testing/corpus.py).

Each scenario is generated once into the cache folder (real gloo jobs take a while; GPU jobs are derived from the
shared real Kineto traces), then analysed as a user would (`stepscope analyze FOLDER`, in process), and its
diagnosis is scored against the scenario's truth: right when the slow ranks and their causes are exactly the
truth's (none for balanced and uniformly slower jobs), and for pipeline-parallel jobs the findings of the job's shape
(stage imbalance, bubble, data imbalance) exactly the truth's and the layout's stages and replicas the job's. Hang
scenarios are listed with their verdicts; their culprit is the hang diagnosis' to name. The real GPU jobs recorded
with the hook on an H200 (tests/analyzer_job/fixtures/gpu_jobs, see its README; more with `--recorded DIR`) are
scored the same way, as they are. Prints a table
(scenario, truth, right?, the 1-minute load average of the machine when a real job was recorded, verdict) and the
false-alarm rate over the balanced runs. The recorded CPU jobs kept in tests/analyzer_job/fixtures (cpu_jobs,
fsdp_jobs, pipeline_jobs, handwritten_jobs) are scored with them. Recorded jobs whose truth also holds what the
planted fault costs the job, measured in the same run with the fault off and on in turn (planted_cost: the
handwritten jobs' `--calibrate`), are listed again against that cost: named where the job pays the user's floor or
more for it, not named where it pays less.

Honest generalisation: `--split generator|layout|load` scores two parts of the jobs apart, by how they were made
(the module that generated them; data-parallel, pipeline or expert layout; a quiet machine, one loaded to twice its
cores or more, or traces derived from shared ones): the part named by `--fit-on` and the held-out rest. `--fit
PARAM=v1,v2,...` fits one DiagnosisConfig threshold on the first part (the value right on the most jobs less those
in which it names a rank the truth does not hold slow, the default's nearest on a tie) and prints each value's
accuracy and false alarms on both parts beside the defaults'.

    python bench/diagnosis_accuracy.py [--cache .corpus] [--only SUBSTRING] [--regenerate]
    python bench/diagnosis_accuracy.py --recorded-only --split generator --fit-on gloo_jobs --fit late_share=0.1,0.2,0.3
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import io
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "testing"))

from stepscope_analyzer.diagnosis.config import DiagnosisConfig  # noqa: E402
from stepscope_analyzer.ranks.pipeline import discover, summarize_all  # noqa: E402
from stepscope_analyzer.ranks.storage_io import LocalStore, location_of  # noqa: E402
from stepscope_analyzer.reduce.reduction import flight_recorder_dumps, reduce_outcomes  # noqa: E402
from stepscope_testing import corpus as corpus_module  # noqa: E402
from stepscope_testing.config_grid import config_grid  # noqa: E402
from stepscope_testing.corpus import Scenario, corpus  # noqa: E402
from stepscope_testing.planted_cost import must_be_named  # noqa: E402

FIXTURES = ROOT / "tests" / "analyzer_job" / "fixtures"
RECORDED = [FIXTURES / name for name in ("gpu_jobs", "cpu_jobs", "fsdp_jobs", "pipeline_jobs", "handwritten_jobs")]
"""the recorded jobs kept in the repository, scored with the generated ones"""


def _pairs(items: list[dict[str, Any]]) -> set[tuple[int, str]]:
    return {(int(s["rank"]), str(s["cause"])) for s in items}


def _shape_right(truth: dict[str, Any], d: dict[str, Any]) -> bool:
    """Pipeline and tensor-parallel jobs: the findings and the layout are the truth's; other jobs: no findings."""
    found = sorted(str(f["cause"]) for f in d.get("findings", []))
    if "findings" not in truth:
        return not found
    layout = d.get("layout") or {}
    want = truth.get("layout", {})
    same = (layout.get("stages"), layout.get("replicas")) == (want.get("stages"), want.get("replicas"))
    return found == sorted(truth["findings"]) and same


def _text(pairs: set[tuple[int, str]]) -> str:
    return ", ".join(f"{r}:{c}" if r >= 0 else c for r, c in sorted(pairs)) or "none"


def ensure(s: Scenario, cache: Path, regenerate: bool) -> Path:
    folder = cache / s.name
    if regenerate or not (folder / "truth.json").exists():
        started = time.perf_counter()
        print(f"  generating {s.name} ...", file=sys.stderr, flush=True)
        s.generate(folder)
        traces = [f for f in folder.rglob("*.json.gz")]
        if not s.is_hang and len(traces) != s.job.world:
            raise RuntimeError(f"{s.name}: {len(traces)} trace files for {s.job.world} ranks")
        print(f"  generated {s.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return folder


@dataclass(frozen=True)
class Case:
    """One job to score: its folder (generated or recorded), its truth, and how it was made."""

    name: str
    folder: Path
    truth: dict[str, Any]
    made: dict[str, str]
    """generator (the module that made it), layout (data-parallel, pipeline, expert) and load (the machine's: quiet,
    loaded, or derived for jobs written from shared traces)"""

    @property
    def is_hang(self) -> bool:
        return bool(self.truth.get("hang"))

    @property
    def balanced(self) -> bool:
        return self.truth.get("kind") == "balanced"


GENERATORS = {"GlooJob": "gloo_jobs", "PipeJob": "pipeline_jobs", "FsdpJob": "fsdp_jobs", "GpuJob": "gpu_jobs",
              "GpuPipeJob": "gpu_pipeline_jobs", "GpuMoeJob": "gpu_moe_jobs"}  # fmt: skip


def _generator(job: dict[str, Any]) -> str:
    """The module that made a recorded job, from the job its truth.json records."""
    if "generator" in job:
        return str(job["generator"])
    if "names" in job and "pp" in job:
        return "pipeline_jobs"
    return "gloo_jobs" if "model" in job else "fsdp_jobs"


def _made(truth: dict[str, Any], generator: str) -> dict[str, str]:
    machine = truth.get("machine") or {}
    if "load_before" in machine:
        load = "loaded" if machine["load_before"] >= 2 * machine.get("cpus", 1) else "quiet"
    else:
        load = "derived"
    shape = truth.get("layout")
    if shape is None:
        layout = "expert" if "moe" in generator else "data-parallel"
    else:
        layout = "tensor-parallel" if shape.get("stages", 1) < 2 and shape.get("tp", 1) > 1 else "pipeline"
    return {"generator": generator, "layout": layout, "load": load}


def recorded(folders: list[Path]) -> list[Case]:
    """Jobs recorded once and kept (a GPU machine's, the committed CPU fixtures): each folder holding a truth.json."""
    out = []
    for root in folders:
        for truth_file in sorted(root.glob("*/truth.json")):
            truth = json.loads(truth_file.read_text())
            out.append(Case(truth_file.parent.name, truth_file.parent, truth, _made(truth, _generator(truth["job"]))))
    return out


def generated(s: Scenario, folder: Path) -> Case:
    truth = json.loads((folder / "truth.json").read_text())
    return Case(s.name, folder, {**s.truth, **truth}, _made(truth, GENERATORS[type(s.job).__name__]))


@functools.cache
def _inputs(folder: Path) -> tuple[Any, Any, Any]:
    store = LocalStore()
    layout = discover(store, location_of(str(folder)))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        outcomes = summarize_all(store, layout)
    return outcomes, layout, flight_recorder_dumps(store, layout)


def diagnosis(case: Case, cfg: DiagnosisConfig) -> dict[str, Any]:
    """The case's report.json diagnosis as `stepscope analyze` makes it, with `cfg`'s thresholds (the ranks are
    summarised once per case, diagnosed once per case and thresholds)."""
    return _diagnosis(case.folder, cfg)


@functools.cache
def _diagnosis(folder: Path, cfg: DiagnosisConfig) -> dict[str, Any]:
    outcomes, layout, dumps = _inputs(folder)
    report = reduce_outcomes(outcomes, config=cfg, include_missing=layout.session, notes=layout.notes,
                             flight_recorder=dumps)  # fmt: skip
    out: dict[str, Any] = report.diagnosis.model_dump(mode="json")
    return out


def right(case: Case, d: dict[str, Any]) -> bool | None:
    """Whether the diagnosis is the truth's (None for hangs: listed, not scored)."""
    if case.is_hang:
        return None
    return _pairs(d.get("slow_ranks", [])) == _pairs(case.truth["slow_ranks"]) and _shape_right(case.truth, d)


def wrong_rank(case: Case, d: dict[str, Any]) -> bool:
    """Whether the diagnosis names a rank the truth does not hold slow: a false alarm in any job, balanced or not
    (hangs are the hang diagnosis' to name)."""
    want = {int(s["rank"]) for s in case.truth["slow_ranks"]}
    return not case.is_hang and any(int(s["rank"]) not in want for s in d.get("slow_ranks", []))


@dataclasses.dataclass(frozen=True)
class Accuracy:
    right: int
    scored: int
    false_alarms: int
    """balanced jobs given a slow rank"""
    balanced: int
    wrong_ranks: int
    """jobs, balanced or not, in which a rank the truth does not hold slow is named"""

    def text(self) -> str:
        rate = f"{100.0 * self.right / self.scored:.0f}%" if self.scored else "-"
        return (f"{self.right}/{self.scored} right ({rate}), false alarms {self.false_alarms}/{self.balanced}, "
                f"wrong ranks named in {self.wrong_ranks}")  # fmt: skip


def _accuracy(cases: list[Case], cfg: DiagnosisConfig) -> Accuracy:
    diagnoses = [(c, diagnosis(c, cfg)) for c in cases]
    marks = [(c, right(c, d)) for c, d in diagnoses]
    scored = [(c, m) for c, m in marks if m is not None]
    balanced = [(c, m) for c, m in scored if c.balanced]
    return Accuracy(sum(1 for _, m in scored if m), len(scored), sum(1 for _, m in balanced if not m), len(balanced),
                    sum(1 for c, d in diagnoses if wrong_rank(c, d)))  # fmt: skip


def _print_parts(label: str, part: list[Case], held: list[Case], cfg: DiagnosisConfig) -> None:
    print(f"  {label:<28} fitted part: {_accuracy(part, cfg).text():<58} held out: {_accuracy(held, cfg).text()}")


def split_report(cases: list[Case], key: str, fit_on: set[str], fit: str | None) -> None:
    """Accuracy on the part the thresholds are fitted on and on the held-out part, for the defaults and, with `fit`
    ('PARAM=v1,v2,...', a DiagnosisConfig field), for each value and for the value that does best on the fitted part
    (chosen on the fitted part alone: the held-out figures of each value are printed, never used)."""
    part = [c for c in cases if c.made[key] in fit_on]
    held = [c for c in cases if c.made[key] not in fit_on]
    print(f"\nsplit by {key}: fitted part = {sorted(fit_on)} ({len(part)} jobs), held-out part = "
          f"{sorted({c.made[key] for c in held})} ({len(held)} jobs)")  # fmt: skip
    base = DiagnosisConfig()
    _print_parts("defaults", part, held, base)
    if not fit:
        return
    param = fit.partition("=")[0]
    default = float(getattr(base, param))
    scores = []
    for label, value, cfg in config_grid(fit):
        acc = _accuracy(part, cfg)
        scores.append((acc.right - acc.wrong_ranks, -abs(value - default), label, cfg))
        _print_parts(label, part, held, cfg)
    *_, label, cfg = max(scores, key=lambda s: (s[0], s[1]))
    _print_parts(f"fitted {label}", part, held, cfg)


def planted_report(cases: list[Case], cfg: DiagnosisConfig) -> None:
    """The jobs whose recording also measured what the planted fault costs the job (truth.json's planted_cost, from
    cycles of steps run with the fault off and on in turn: stepscope_testing.planted_cost), scored against that
    cost where its interval is clear of the user's floor: a fault the job surely pays the floor or more for should
    be named as the truth says; one it surely pays less for should not be named (the verdict may speak of it under
    the floor), and no other rank either; one whose interval holds the floor is listed, not scored."""
    calibrated = [c for c in cases if "planted_cost" in c.truth and c.truth["slow_ranks"]]
    if not calibrated:
        return
    floor = cfg.min_slowdown_percent / 100.0
    print(f"\nplanted faults whose cost the recording measured (cycles of the fault off and on; floor {floor:.0%}):")
    above: list[bool] = []
    under: list[bool] = []
    for c in calibrated:
        cost, d = c.truth["planted_cost"], diagnosis(c, cfg)
        planted = {int(s["rank"]) for s in c.truth["slow_ranks"]}
        named = {int(s["rank"]) for s in d.get("slow_ranks", [])}
        expected = must_be_named(cost, floor)
        ok: bool | None = None
        if expected:
            ok = right(c, d) is True
            above.append(ok)
        elif expected is False:
            ok = not (named & planted) and not wrong_rank(c, d)
            under.append(ok)
        want = {True: "named", False: "not named", None: "either"}[expected]
        mark = "-" if ok is None else ("right" if ok else "WRONG")
        share = f"{cost['cost_share']:.1%}, {cost['low_share']:.1%} to {cost['high_share']:.1%}"
        found = _text(_pairs(d.get("slow_ranks", [])))
        print(f"  {c.name:<44} {cost['cost_us'] / 1000:6.1f} ms per step ({share}): "
              f"{want:<9} {mark:<5}  found {found}")  # fmt: skip
    print(f"  surely the floor or more: {sum(above)}/{len(above)} named; surely less: {sum(under)}/{len(under)} not "
          f"named; {len(calibrated) - len(above) - len(under)} not told apart from the floor")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", default=str(ROOT / ".corpus"), help="where generated scenarios are kept")
    p.add_argument("--only", default="", help="only scenarios whose name contains this")
    p.add_argument("--regenerate", action="store_true", help="generate the scenarios again")
    p.add_argument("--generate-only", action="store_true", help="only generate the missing scenarios")
    p.add_argument("--cached-only", action="store_true", help="only score the scenarios already generated")
    p.add_argument("--recorded-only", action="store_true", help="only score the recorded jobs (no generation)")
    p.add_argument("--recorded", action="append", default=[str(f) for f in RECORDED],
                   help="folders of recorded jobs to score")  # fmt: skip
    p.add_argument("--split", choices=("generator", "layout", "load"), help="score two parts of the jobs apart")
    p.add_argument(
        "--fit-on", default="gloo_jobs", help="the part thresholds are fitted on: values of --split, comma-separated"
    )
    p.add_argument("--fit", help="PARAM=v1,v2,...: fit this DiagnosisConfig threshold on the fitted part")
    p.add_argument("--traces", default=str(ROOT.parent / "shared" / "data" / "traces" / "hta"),
                   help="the HTA test traces the GPU scenarios are derived from (full; tests/analyzer_job/fixtures/hta "
                   "holds them cut to their first steps)")  # fmt: skip
    a = p.parse_args(argv)
    corpus_module.HTA_TRACES = Path(a.traces)
    cache = Path(a.cache)
    scenarios = [] if a.recorded_only else [s for s in corpus() if a.only in s.name]
    if a.cached_only:
        scenarios = [s for s in scenarios if (cache / s.name / "truth.json").exists()]
    cases = [generated(s, ensure(s, cache, a.regenerate)) for s in scenarios]
    if a.generate_only:
        return 0
    seen = {c.name for c in cases}  # a recorded fixture the corpus also generated is scored once, as generated
    cases += [c for c in recorded([Path(r) for r in a.recorded]) if a.only in c.name and c.name not in seen]
    rows: list[tuple[Case, str, str, bool | None]] = []
    for c in cases:
        d = diagnosis(c, DiagnosisConfig())
        got, want = _pairs(d.get("slow_ranks", [])), _pairs(c.truth["slow_ranks"])
        if "findings" in c.truth:
            got |= {(-1, str(f["cause"])) for f in d.get("findings", [])}
            want |= {(-1, f) for f in c.truth["findings"]}
        machine = c.truth.get("machine") or {}
        load = f"{machine['load_before']:.1f}" if "load_before" in machine else "-"
        made = f"{c.made['generator']}/{c.made['layout']}/{c.made['load']}"
        rows.append((c, _text(want), f"{load:>5}  {made:<36} {_text(got)}  {d.get('verdict', '')[:80]}", right(c, d)))
    width = max((len(c.name) for c, *_ in rows), default=10)
    print(f"{'scenario':<{width}}  {'truth':<24}  {'right?':<6}  {'load':>5}  {'made by':<36} found, verdict")
    for c, truth, verdict, mark in rows:
        text = "hang*" if mark is None else ("yes" if mark else "NO")
        print(f"{c.name:<{width}}  {truth:<24}  {text:<6}  {verdict}")
    scored = [r for r in rows if r[3] is not None]
    balanced = [r for r in rows if r[0].balanced]
    false_alarms = [r for r in balanced if not r[3]]
    no_fault = [r for r in rows if r[0].truth.get("kind") in ("balanced", "uniform")]
    fa_all = [r for r in no_fault if not r[3]]
    print(f"\nright: {sum(1 for r in scored if r[3])}/{len(scored)} (hang scenarios listed, not scored: *)")
    print(f"false alarms over balanced runs: {len(false_alarms)}/{len(balanced)}"
          f" ({100.0 * len(false_alarms) / max(len(balanced), 1):.1f}%)")  # fmt: skip
    print(f"false alarms over balanced and uniformly slower runs: {len(fa_all)}/{len(no_fault)}")
    wrong = [c.name for c in cases if wrong_rank(c, diagnosis(c, DiagnosisConfig()))]
    print(f"runs in which a rank the truth does not hold slow is named: {len(wrong)}/{len(scored)}"
          f"{': ' + ', '.join(wrong) if wrong else ''}")  # fmt: skip
    planted_report(cases, DiagnosisConfig())
    if a.split:
        split_report(cases, a.split, set(a.fit_on.split(",")), a.fit)
    return 0 if all(r[3] for r in scored) else 1


if __name__ == "__main__":
    raise SystemExit(main())
