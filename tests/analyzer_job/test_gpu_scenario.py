"""`stepscope analyze` on multi-rank GPU sessions built from a real Kineto trace (gpu_scenario.py): a GPU held down
by thermal slowdown is a compute straggler with its clocks as evidence, the slow rank is set beside the median of
the others kernel by kernel, every rank links to its trace, and a job without GPU metrics says so once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope_contract.report import Cause, Report

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_scenario import Scenario, build_session

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _analyze(session: Path, analyze_cmd: list[str]) -> tuple[Report, str]:
    out = session / "report"
    result = subprocess.run([*analyze_cmd, str(session), "-o", str(out)], capture_output=True, text=True,
                            timeout=150, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return Report.model_validate_json((out / "report.json").read_bytes()), (out / "report.html").read_text()


def test_a_throttled_gpu_is_a_compute_straggler_with_clock_evidence(tmp_path: Path, analyze_cmd: list[str]) -> None:
    report, html = _analyze(build_session(tmp_path / "s", Scenario(world_size=8, throttled=5)), analyze_cmd)
    d = report.diagnosis
    assert [(s.rank, s.cause) for s in d.slow_ranks] == [(5, Cause.COMPUTE)]
    gpu = d.slow_ranks[0].evidence[0]
    assert gpu.unit == "MHz" and 690 <= gpu.value <= 706 and 1395 <= gpu.baseline <= 1410
    clocks = r"^SM clock (69\d|70\d) MHz vs 1,(39\d|40\d|410) MHz on the other ranks; thermal slowdown active \(100% "
    assert re.match(clocks, gpu.detail), gpu.detail
    assert d.next_steps[0].startswith("Rank 5's GPU is throttled")
    for r in report.ranks:
        m = r.gpu_metrics
        assert m is not None and m.samples >= 10 and m.name == "NVIDIA A100-PG509-200"
        assert m.gpu == r.rank % 4  # the rank's own device (its local rank)
        assert m.sm_clock_mhz is not None and m.sm_clock_mhz.min >= 690  # idle samples before the steps left out
        assert len(m.series.t_s) == m.samples and m.power_limit_w == 400.0
    slowest = report.ranks[5].gpu_metrics
    assert slowest is not None and {t.reason for t in slowest.throttle if t.slowdown} == {
        "sw_thermal_slowdown", "hw_thermal_slowdown",
    }  # fmt: skip
    table = d.slow_ranks[0].comparison
    assert len(table) >= 5 and all(c.category == "kernel" for c in table)
    assert all(c.ratio is not None and 1.9 < c.ratio < 2.15 and c.count == c.baseline_count for c in table)
    assert table[0].summary.endswith("x longer, same count")
    assert "Rank 5 against the median of the other ranks" in html and "thermal slowdown active" in html
    assert html.count("<polyline") >= 2 * 8  # clock and power, a line per rank


def test_every_rank_links_to_its_trace_and_says_where_it_ran(tmp_path: Path, analyze_cmd: list[str]) -> None:
    session = build_session(tmp_path / "s", Scenario(world_size=4, throttled=None))
    report, html = _analyze(session, analyze_cmd)
    assert report.diagnosis.slow_ranks == []  # a balanced GPU job: nothing throttled, nothing slow
    for r in report.ranks:
        assert r.trace_link == f"../ranks/{r.rank}/trace.pt.trace.json.gz"
        assert (session / "report" / r.trace_link).resolve().is_file()
        assert f'href="{r.trace_link}"' in html
        env = r.environment
        assert env is not None and (env.backend, env.nccl_version, env.torch_version) == (
            "nccl",
            "2.17.1",
            "2.3.0+cu121",
        )
        assert env.capture_started_at is not None and env.window_start is not None
        assert env.capture_started_at < env.window_start < env.window_end  # type: ignore[operator]
        assert env.gpu_metrics_status == "captured" and env.hostname == f"llama-train-worker-{r.rank}"
    assert "nccl 2.17.1" in html and "NVIDIA A100-PG509-200" in html and "2.3.0+cu121" in html
    assert "runtime 12.1" in html  # the CUDA torch was built with, from the hook's meta.json
    assert (
        "ui.perfetto.dev" in html and "tensorboard --logdir ." in html and 'TraceAnalysis(trace_dir="traces")' in html
    )
    assert "for f in ../ranks/*/trace.pt.trace.json.gz" in html


def test_without_gpu_metrics_the_report_says_so_once(tmp_path: Path, analyze_cmd: list[str]) -> None:
    session = build_session(tmp_path / "s", Scenario(world_size=4, throttled=None, gpu_metrics=False))
    report, html = _analyze(session, analyze_cmd)
    assert all(r.gpu_metrics is None for r in report.ranks)
    assert html.count("No GPU metrics") == 1
    assert "No GPU metrics: unavailable: NVML init failed (Driver Not Loaded)." in html
    assert "<polyline" not in html and "SM clock" not in html
