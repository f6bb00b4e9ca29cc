"""`stepscope analyze` in a separate process on real traces: real gloo jobs with a planted slow rank, a plain
folder of traces, a malformed corpus mixed with good ranks, and s3:// from a moto server on loopback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from stepscope_contract.report import Report
from stepscope_testing.html_tags import TagCollector as _Tags

pytestmark = pytest.mark.integration

GLOO_JOB = Path(__file__).resolve().parents[1] / "gloo_job.py"


def _run(
    cmd: list[str], *, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def _write_rank(root: Path, rank: int, files: dict[str, bytes]) -> None:
    d = root / "ranks" / str(rank)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)


def _report(out: Path) -> Report:
    return Report.model_validate_json((out / "report.json").read_bytes())


GLOO_SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "gloo_sessions"


def _names_the_planted_slow_rank(session: Path, out: Path, analyze_cmd: list[str], slow_rank: int, cause: str) -> None:
    result = _run([*analyze_cmd, str(session), "-o", str(out)])
    assert result.returncode == 0, result.stderr
    assert "found 4 rank(s) (session folder)" in result.stderr  # progress on stderr
    assert result.stdout.startswith(f"Rank {slow_rank} on node node-{slow_rank // 2} slows the job")
    report = _report(out)
    expected = "host" if cause == "loader" else cause
    assert [(s.rank, s.cause.value) for s in report.diagnosis.slow_ranks] == [(slow_rank, expected)]
    slow = report.diagnosis.slow_ranks[0]
    # A stall inside an annotation is busy time, not idle: the rank is found through the others' waiting, which
    # the diagnosis trusts less than a measured own cost.
    assert slow.confidence >= (0.6 if cause == "loader" else 0.8)
    if cause == "compute":  # the extra matmuls are named
        assert {"aten::mm", "aten::tanh"} & {e.metric for e in slow.evidence}
    if cause == "loader":  # the stalled input pipeline is named, with its time against the others
        stall = next(e for e in slow.evidence if e.metric == "load_batch")
        assert stall.value > 10 * max(stall.baseline, 1.0)
    assert [r.rank for r in report.ranks] == [0, 1, 2, 3]
    assert all(r.status.value == "ok" and r.steps.count == 5 and r.node for r in report.ranks)
    assert report.errors == []
    assert (out / "report.html").stat().st_size > 5000


@pytest.mark.timeout(240)
def test_real_gloo_job_names_the_planted_slow_rank(tmp_path: Path, analyze_cmd: list[str]) -> None:
    session = tmp_path / "session"
    job = _run([sys.executable, str(GLOO_JOB), str(session), "--slow-rank", "1", "--cause", "host"], timeout=200)
    assert job.returncode == 0, job.stderr[-3000:]
    _names_the_planted_slow_rank(session, tmp_path / "out", analyze_cmd, 1, "host")


@pytest.mark.parametrize(("slow_rank", "cause"), [(2, "compute"), (3, "loader")])
def test_recorded_gloo_job_names_the_planted_slow_rank(
    tmp_path: Path, analyze_cmd: list[str], slow_rank: int, cause: str
) -> None:
    """The other planted causes of gloo_job.py, on its recordings (fixtures/gloo_sessions, see its README)."""
    _names_the_planted_slow_rank(GLOO_SESSIONS / cause, tmp_path / "out", analyze_cmd, slow_rank, cause)


def test_a_host_straggler_named_through_the_replay_keeps_the_confidence_of_its_cost(
    tmp_path: Path, analyze_cmd: list[str]
) -> None:
    """A live recording of the host cause (fixtures/gloo_sessions/host-4of5) in which rank 1's host time led its
    peers' in 4 of 5 steps only: one step short of the cost test's sign test, so the permutation test of the
    replay's saving names it. Its confidence counts how far its host time stands beyond the noise (z 26), as the
    cost test's would."""
    out = tmp_path / "out"
    _names_the_planted_slow_rank(GLOO_SESSIONS / "host-4of5", out, analyze_cmd, 1, "host")
    slow = _report(out).diagnosis.slow_ranks[0]
    assert slow.evidence[0].metric == "heaviest in the replay" and slow.effect_z is not None and slow.effect_z > 20


def test_a_host_straggler_on_cores_loaded_many_times_over_is_named_for_the_wait_it_causes(
    tmp_path: Path, analyze_cmd: list[str]
) -> None:
    """A live recording of the host cause (fixtures/gloo_sessions/host-loaded) made while the machine ran the test
    suite beside it: rank 1's host time without CPU-contention stretches exceeds its peers' by 13.4 ms per step, its
    wall-clock host time by far more, and the others wait for it 47.7 ms per step. Its own excess is 0.28 of that
    wait, more than slow_ranks.OWN_SHARE: named, host, its excess the wait (its cost's effect, z 3.8, is near the
    outlier threshold: its confidence is under the live test's 0.8)."""
    out = tmp_path / "out"
    result = _run([*analyze_cmd, str(GLOO_SESSIONS / "host-loaded"), "-o", str(out)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Rank 1 on node node-0 slows the job"), result.stdout
    [slow] = _report(out).diagnosis.slow_ranks
    assert (slow.rank, slow.cause.value) == (1, "host")
    assert slow.excess_us == pytest.approx(47_670, rel=0.01)


def test_plain_folder_of_traces(tmp_path: Path, gloo_traces: list[bytes], analyze_cmd: list[str]) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):  # names without a rank: the rank comes from distributedInfo
        (folder / f"worker-{'ab'[rank]}.pt.trace.json.gz").write_bytes(data)
    result = _run([*analyze_cmd, f"file://{folder}", "-o", str(tmp_path / "out")])
    assert result.returncode == 0, result.stderr
    assert "found 2 candidate trace file(s) (folder of traces)" in result.stderr
    report = _report(tmp_path / "out")
    assert [(s.rank, s.cause.value) for s in report.diagnosis.slow_ranks] == [(1, "host")]
    assert {r.trace_uri for r in report.ranks} == {f"file://{folder}/worker-a.pt.trace.json.gz",
                                                   f"file://{folder}/worker-b.pt.trace.json.gz"}  # fmt: skip


def test_malformed_ranks_become_per_rank_errors(
    tmp_path: Path, gloo_traces: list[bytes], malformed_traces: dict[str, bytes], analyze_cmd: list[str]
) -> None:
    session = tmp_path / "session"
    _write_rank(session, 0, {"trace.pt.trace.json.gz": gloo_traces[0]})
    _write_rank(session, 1, {"trace.pt.trace.json.gz": gloo_traces[1]})
    bad = {}
    for i, (what, data) in enumerate(sorted(malformed_traces.items()), start=2):
        _write_rank(session, i, {"trace.pt.trace.json.gz": data})
        bad[i] = what
    n = 2 + len(bad)
    _write_rank(session, n, {"manifest.json": b"{not json"})  # a manifest alone, and broken
    stacks = b'Thread 0x7f (most recent call first):\n  File "train.py", line 3 in load\n'
    manifest = {"captureId": "c1", "namespace": "ns", "session": "s", "rank": n + 1, "state": "hung",
                "meta": {"captureId": "c1", "rank": n + 1, "pid": 1, "stepsRequested": 5, "stepsCaptured": 2,
                         "hung": True, "secondsSinceLastStep": 130.5}}  # fmt: skip
    _write_rank(session, n + 1, {"manifest.json": json.dumps(manifest).encode(), "stacks.txt": stacks})

    result = _run([*analyze_cmd, str(session), "-o", str(tmp_path / "out")])
    assert result.returncode == 3, result.stderr  # the report is written, but not every rank could be analysed
    assert "could not be analysed" in result.stderr and "--allow-partial" in result.stderr
    partial = _run([*analyze_cmd, str(session), "-o", str(tmp_path / "out"), "--allow-partial"])
    assert partial.returncode == 0, partial.stderr
    report = _report(tmp_path / "out")
    status = {r.rank: r.status.value for r in report.ranks}
    assert status[0] == status[1] == "ok"
    assert all(status[i] == "error" for i in bad), status
    assert status[n] == "missing" and status[n + 1] == "hung"
    errored = {e.rank for e in report.errors}
    assert set(bad) | {n} <= errored
    gz = next(e for e in report.errors if e.rank == next(k for k, v in bad.items() if v == "truncated gzip"))
    assert "gzip" in gz.message
    assert report.diagnosis.hangs[0].rank == n + 1 and "load" in report.diagnosis.hangs[0].stacks
    assert report.diagnosis.slow_ranks[0].rank == n + 1  # the hang comes first
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Per-rank errors" in page and "gzip" in page


def test_analyze_reads_s3_from_moto(
    tmp_path: Path, gloo_traces: list[bytes], moto_endpoint: str, analyze_cmd: list[str]
) -> None:
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="traces")
    for rank, data in enumerate(gloo_traces):
        s3.put_object(Bucket="traces", Key=f"runs/ns/job-abcd1234/ranks/{rank}/trace.pt.trace.json.gz", Body=data)
    s3.put_object(Bucket="traces", Key="runs/ns/other-session/ranks/0/trace.pt.trace.json.gz", Body=b"x")
    out = tmp_path / "out"
    env = {**os.environ}
    result = _run(
        [
            *analyze_cmd,
            "s3://traces/runs/ns/job-abcd1234",
            "-o",
            str(out),
            "--endpoint",
            moto_endpoint,
            "--addressing-style",
            "path",
        ],
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "reading s3://traces/runs/ns/job-abcd1234" in result.stderr
    report = _report(out)
    assert [r.rank for r in report.ranks] == [0, 1]
    assert report.ranks[0].trace_uri == "s3://traces/runs/ns/job-abcd1234/ranks/0/trace.pt.trace.json.gz"
    assert [(s.rank, s.cause.value) for s in report.diagnosis.slow_ranks] == [(1, "host")]


def test_analyze_fails_clearly(tmp_path: Path, analyze_cmd: list[str]) -> None:
    missing = _run([*analyze_cmd, str(tmp_path / "nope")])
    assert missing.returncode == 2 and "is not a folder or a file" in missing.stderr
    empty = _run([*analyze_cmd, str(tmp_path)])
    assert empty.returncode == 1 and "no traces found" in empty.stderr
    scheme = _run([*analyze_cmd, "gs://bucket/x"])
    assert scheme.returncode == 2 and "not supported" in scheme.stderr


def test_hostile_names_from_real_traces_are_escaped(
    tmp_path: Path, gloo_traces: list[bytes], analyze_cmd: list[str]
) -> None:
    hostile = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "q" * 4000]
    folder = tmp_path / "traces"
    folder.mkdir()
    for rank, data in enumerate(gloo_traces):
        trace = json.loads(gzip.decompress(data))
        i = 0
        for e in trace["traceEvents"]:
            if e.get("name") == "aten::mm":
                e["name"] = hostile[i % len(hostile)]
                i += 1
        raw = json.dumps(trace).encode().replace(b"aten::linear", b"lin\xff\xfeear")  # not UTF-8
        (folder / f"rank{rank}.pt.trace.json").write_bytes(raw)
    surrogate = json.dumps(json.loads(gzip.decompress(gloo_traces[0]))).replace("aten::t", "\\udcff")
    (folder / "rank2.pt.trace.json").write_text(surrogate)  # a lone surrogate escape: not valid JSON
    out = tmp_path / "out"
    result = _run([*analyze_cmd, str(folder), "-o", str(out)])
    assert result.returncode == 3, result.stderr  # rank 2 could not be analysed; the report is written
    assert "rank(s) 2 could not be analysed" in result.stderr
    page = (out / "report.html").read_bytes().decode("utf-8")
    parser = _Tags()
    parser.feed(page)
    assert "img" not in {t for t, _ in parser.tags} and "script" not in {t for t, _ in parser.tags}
    assert not [a for _, attrs in parser.tags for a, _ in attrs if a.startswith("on") or a == "src"]
    text = "".join(parser.text)
    assert hostile[0] in text and hostile[1] in text and "q" * 100 in text
    assert "lin\ufffd\ufffdear" in text
    report = _report(out)
    assert {r.rank: r.status.value for r in report.ranks}[1] == "ok"
    json.loads((out / "report.json").read_bytes())  # valid UTF-8 JSON


def test_only_trace_files_are_read(tmp_path: Path, gloo_traces: list[bytes], analyze_cmd: list[str]) -> None:
    """A truth.json, a README and other JSON beside the traces are skipped with a note, not phantom ranks; a
    Kineto document named *.json is read."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "rank0.pt.trace.json.gz").write_bytes(gloo_traces[0])
    (folder / "worker1.json").write_bytes(gzip.decompress(gloo_traces[1]))  # a trace by its content
    (folder / "truth.json").write_text(json.dumps({"slow_ranks": [{"rank": 1, "cause": "host"}]}))
    (folder / "config.json.gz").write_bytes(gzip.compress(b'{"lr": 0.1}'))
    (folder / "README.md").write_text("# traces of my job\n")
    result = _run([*analyze_cmd, str(folder), "-o", str(tmp_path / "out")])
    assert result.returncode == 0, result.stderr
    report = _report(tmp_path / "out")
    assert [(r.rank, r.status.value) for r in report.ranks] == [(0, "ok"), (1, "ok")]
    assert report.errors == []
    notes = " ".join(report.notes)
    assert "truth.json: skipped" in notes and "config.json.gz: skipped" in notes and "README.md: skipped" in notes
    assert "2 of 2 ranks analysed" in report.diagnosis.verdict


def test_an_absurd_duration_is_rejected_for_its_rank_only(
    tmp_path: Path, gloo_traces: list[bytes], analyze_cmd: list[str]
) -> None:
    """One event with dur 1e300 must not make a healthy rank slow: that rank is rejected with a clear error."""
    folder = tmp_path / "traces"
    folder.mkdir()
    doc = json.loads(gzip.decompress(gloo_traces[0]))
    victim = next(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") == "aten::linear")
    victim["dur"] = 1e300
    (folder / "rank0.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    (folder / "rank1.pt.trace.json.gz").write_bytes(gloo_traces[1])
    result = _run([*analyze_cmd, str(folder), "-o", str(tmp_path / "out")])
    assert result.returncode == 3, result.stderr
    report = _report(tmp_path / "out")
    bad = next(r for r in report.ranks if r.rank == 0)
    assert (
        bad.status.value == "error"
        and "'aten::linear'" in (bad.error or "")
        and "max_event_duration_us" in (bad.error or "")
    )
    assert report.diagnosis.slow_ranks == []
