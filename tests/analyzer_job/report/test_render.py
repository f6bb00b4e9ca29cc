"""report.json follows the contract; report.html is self-contained and escapes every name from a trace."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from stepscope_analyzer.diagnosis import HangEvidence, diagnose
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.report import build_report, html_bytes, model_json_bytes, with_trace_links
from stepscope_contract.report import (
    Bottleneck,
    Cause,
    Collective,
    GpuMetrics,
    GpuSeries,
    KernelStat,
    MetricStats,
    RankEnvironment,
    RankError,
    RankStatus,
    Report,
    StepPhases,
)
from stepscope_contract.storage import parse_storage_uri
from stepscope_testing.html_tags import TagCollector as _Collector
from stepscope_testing.synthetic import JobShape, synthetic_job

pytestmark = pytest.mark.unit

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "' onmouseover='alert(3)",
    "</svg><svg onload=alert(4)>",
    "{{ 7*7 }} {% raw %}",
    "x" * 10_000,
    "bad\udcffbytes\udc80<b>",
]
TEMPLATE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "section", "div", "dl", "dt", "dd", "ol",
    "li", "span", "table", "tr", "th", "td", "p", "pre", "svg", "rect", "text", "strong", "a", "ul", "code",
    "polyline",
}  # fmt: skip


def _hostile_report() -> Report:
    ranks = synthetic_job(JobShape(world_size=4), slow_rank=1, cause=Cause.COMPUTE, extra_us=20_000)
    for r in ranks:
        r.node = HOSTILE[0]
        r.top_kernels += [
            KernelStat(
                name=n, kernel_type="COMPUTATION", count=1, sum_us=1.0, mean_us=1.0, max_us=1.0, min_us=1.0, stddev=0
            )
            for n in HOSTILE
        ]
        r.top_functions += [
            Bottleneck(name=n, category="python", count=1, total_us=10.0, mean_us=10.0, bottleneck_ratio=0.9)
            for n in HOSTILE
        ]
        r.collectives.append(Collective(name=HOSTILE[1], process_group=HOSTILE[2], count=1, total_us=5.0))
    ranks[1].top_kernels.append(
        KernelStat(
            name=HOSTILE[3], kernel_type="COMPUTATION", count=1, sum_us=90_000, mean_us=1, max_us=1, min_us=1, stddev=0
        )
    )
    for i, r in enumerate(ranks):  # names from storage, traces and NVML reach every part of the page
        r.trace_uri = f"file:///data/{HOSTILE[i % 4]}.pt.trace.json.gz"
        extra = 20_000.0 if r.rank == 1 else 0.0  # the slow rank's steps carry its extra compute (the replay's)
        r.phases = StepPhases(data_loading=1000.0 * (i + 1), forward=2000 + extra, backward=3000)
        r.step_phases = [r.phases] * 3
        r.environment = RankEnvironment(hostname=HOSTILE[0], torch_version=HOSTILE[1], device_name=HOSTILE[3])
        r.gpu_metrics = GpuMetrics(
            name=HOSTILE[2], samples=2, sm_clock_mhz=MetricStats(mean=1400, min=1400, max=1400),
            series=GpuSeries(t_s=[0.0, 1.0], sm_clock_mhz=[1400.0, 1400.0], power_w=[300.0, None]),
        )  # fmt: skip
    ranks[3] = ranks[3].model_copy(update={"status": RankStatus.HUNG})
    hang = HangEvidence(rank=3, hung=True, stacks=f'File "{HOSTILE[1]}", line 1 in {HOSTILE[0]}\n')
    errors = [RankError(rank=2, source=HOSTILE[6], message=HOSTILE[4])]
    report = build_report(ranks, diagnose(ranks, hang_evidence=[hang]), errors=errors)
    return with_trace_links(report, parse_storage_uri("file:///data"))


def test_hostile_names_are_escaped_in_the_html() -> None:
    report = _hostile_report()
    page = html_bytes(report).decode("utf-8")  # valid UTF-8 whatever the names held
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert {t for t, _ in parser.tags} <= TEMPLATE_TAGS, "no element from a name may reach the page"
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on"), f"event handler attribute on <{tag}>"
            assert name not in ("src", "srcdoc", "xlink:href"), "the page loads nothing"
            assert "javascript:" not in (value or "")
            if name == "href":  # links to trace files only: relative, no scheme, nothing that leaves the folder tree
                assert tag == "a" and value is not None and value.startswith("./") and ":" not in value
                assert value.endswith(".pt.trace.json.gz")
    hrefs = [v for t, attrs in parser.tags for k, v in attrs if k == "href"]
    assert len(hrefs) == 4 and "./%3Cscript%3Ealert%281%29%3C/script%3E.pt.trace.json.gz" in hrefs
    text = "".join(parser.text)
    for name in HOSTILE[:4]:
        assert name in text, f"{name!r} is shown as text"
    assert "bad\ufffdbytes" in text or "bad?bytes" in text
    assert "{{ 7*7 }}" in text  # not evaluated as a template
    assert "x" * 150 in text and "x" * 10_000 not in text.replace("\n", "")  # long names cut in tables...
    titles = [v for _, attrs in parser.tags for k, v in attrs if k == "title"]
    assert "x" * 10_000 in titles  # ...and kept whole in the tooltip
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_html_is_self_contained_and_leads_with_the_verdict() -> None:
    report = build_report(rs := synthetic_job(slow_rank=6, cause=Cause.HOST, extra_us=30_000), diagnose(rs))
    page = html_bytes(report).decode()
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page
    body = page[page.index("<body>") :]
    assert body.index(report.diagnosis.verdict.replace("'", "&#39;")) < body.index('id="ranks"')
    # breakdown, phase bars, the slow rank step by step, bottlenecks (no GPU samples here; no step spans, which
    # CPU traces carry: no timeline)
    assert page.count("<svg") == 4 and 'id="timeline"' not in page
    assert 'id="phase-bars"' in page
    assert "What to look at next" in page


def test_report_json_follows_the_contract() -> None:
    report = _hostile_report()
    data = model_json_bytes(report)
    parsed = json.loads(data)
    jsonschema.validate(parsed, Report.model_json_schema(mode="serialization"))
    again = Report.model_validate_json(data)
    assert again.diagnosis.slow_ranks[0].rank == 3 and again.diagnosis.slow_ranks[0].cause is Cause.HANG
    assert [s.rank for s in again.diagnosis.slow_ranks] == [3, 1]
    slow = parsed["diagnosis"]["slow_ranks"][1]
    assert set(slow) >= {"rank", "cause", "confidence", "evidence"}
    for r in parsed["ranks"]:
        for key in ("idle_time", "compute_time", "non_compute_time", "kernel_time", "idle_time_pctg",
                    "compute_time_pctg", "non_compute_time_pctg", "comp_comm_overlap_pctg"):  # fmt: skip
            assert isinstance(r[key], float | int)


def test_status_summary_fits_the_crd() -> None:
    report = _hostile_report()
    summary = build_status_summary(report)
    assert summary.slowest_rank == 3 and summary.cause == "hang"
    assert summary.hung_ranks == [3] and summary.slow_ranks == [1, 3]
    assert summary.top_bottleneck is not None and len(summary.top_bottleneck) <= 256
    summary.top_bottleneck.encode("utf-8")  # no lone surrogates left
    wire = summary.wire()
    assert wire["slowestRank"] == 3 and wire["hungRanks"] == [3]


@pytest.mark.timeout(60)
def test_reduce_of_1024_ranks_is_fast() -> None:
    ranks = synthetic_job(JobShape(world_size=1024, ranks_per_node=8), slow_rank=777, cause=Cause.HOST, extra_us=20_000)
    blobs = [model_json_bytes(r, indent=None) for r in ranks]
    started = time.perf_counter()
    from stepscope_contract.report import RankReport

    summaries = [RankReport.model_validate_json(b) for b in blobs]
    diagnosis = diagnose(summaries)
    report = build_report(summaries, diagnosis)
    page = html_bytes(report)
    data = model_json_bytes(report)
    elapsed = time.perf_counter() - started
    print(
        f"\nreduce of 1024 rank summaries: {elapsed:.2f} s "
        f"(html {len(page) / 1e6:.1f} MB, json {len(data) / 1e6:.1f} MB)"
    )
    assert [(s.rank, s.cause) for s in diagnosis.slow_ranks] == [(777, Cause.HOST)]
    assert len(report.ranks) == 1024


def test_report_json_bytes_carry_the_models_values_and_stay_utf8() -> None:
    """The fast serializer and the model's own JSON agree value for value; a lone surrogate in a name (an
    undecodable name in a trace) still gives valid UTF-8."""
    ranks = synthetic_job(JobShape(world_size=8, ranks_per_node=4), slow_rank=5, cause=Cause.HOST, extra_us=20_000)
    report = build_report(ranks, diagnose(ranks))
    data = model_json_bytes(report)
    assert json.loads(data) == report.model_dump(mode="json")
    assert Report.model_validate_json(data) == report
    odd = report.model_copy(update={"notes": ["kernel \udc80 name"]})
    assert json.loads(model_json_bytes(odd))["notes"] == ["kernel ? name"]
