"""Coverage-guided fuzzing (atheris, libFuzzer) of the readers of untrusted input other than the trace parser: the
first byte picks the reader, the rest is its input, and each must answer with a value or its own error type:
- 0: a Flight Recorder dump (Dump or FlightRecorderError; a Dump is compacted and analysed),
- 1: a GPU metrics file ((metrics, skipped) or GpuMetricsError),
- 2: a sidecar's step telemetry reply (PodSteps or ValidationError; its conditions judged, the status finite),
- 3: an AdmissionReview body (always answered, always admitting the pod),
- 4: a diff side's report.json (Report or ValidationError/ValueError, as sides._read_report maps to SideError).
Anything else is a crash libFuzzer reports with the input.

    python tests/fuzz/fuzz_inputs.py [libFuzzer flags] [CORPUS_DIR ...]

`make test` runs it for a few seconds (test_fuzz_inputs.py), `make fuzz` for FUZZ_SECONDS with a corpus in
.fuzz/inputs; seeds (one valid input per reader) are written into the first corpus folder when it is empty.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["stepscope_analyzer", "stepscope_operator", "stepscope_contract"]):
    from pydantic import ValidationError

    from stepscope_analyzer.analyses.gpu_metrics import GpuMetricsError, read_gpu_metrics
    from stepscope_analyzer.flight_recorder import FlightRecorderError, analyse, parse_dump
    from stepscope_analyzer.flight_recorder.dump import Interner, compact
    from stepscope_contract.finite import non_finite_paths
    from stepscope_contract.report import Report
    from stepscope_contract.step_telemetry import PodSteps
    from stepscope_contract.trigger import ProfileTriggerStatus, Stall, StepTimeRegression, Straggler, TriggerConditions
    from stepscope_operator.triggers.conditions import evaluate
    from stepscope_operator.triggers.evaluation import observe, status_patch
    from stepscope_operator.triggers.telemetry_client import Pull
    from stepscope_operator.webhook.admission import decode_review, review_response
    from stepscope_operator.webhook.injection import InjectionConfig

CONDITIONS = TriggerConditions(
    straggler=Straggler(steps=5), step_time_regression=StepTimeRegression(steps=5, baseline_steps=10), stall=Stall()
)
CONFIG = InjectionConfig()


def _dump(data: bytes) -> None:
    try:
        dump = parse_dump(data, "rank 0's flight_recorder.json.gz")
    except FlightRecorderError:
        return
    analyse({0: compact(dump, Interner())}, None)


def _gpu(data: bytes) -> None:
    try:
        metrics, _ = read_gpu_metrics(data)
    except GpuMetricsError:
        return
    if metrics is not None:
        assert non_finite_paths(metrics.model_dump()) == []


def _steps(data: bytes) -> None:
    try:
        pod = PodSteps.model_validate_json(data)
    except ValidationError:
        return
    ranks = tuple({r.rank: r for r in pod.ranks}.values())
    evaluate(list(ranks), CONDITIONS)
    patch = status_patch(ProfileTriggerStatus(observed=observe(1, Pull(ranks=ranks, answered=1))))
    json.dumps(patch, allow_nan=False)


def _review(data: bytes) -> None:
    body = decode_review(data)
    if isinstance(body, str):
        return
    assert review_response(body, {"stepscope.dev/inject": "true"}, CONFIG)["response"]["allowed"] is True


def _report(data: bytes) -> None:
    try:
        Report.model_validate_json(data)
    except (ValidationError, ValueError):
        return


READERS = (_dump, _gpu, _steps, _review, _report)


def one_input(data: bytes) -> None:
    if not data:
        return
    READERS[data[0] % len(READERS)](data[1:])


SEEDS = {
    "dump.json.gz": b"\0"
    + gzip.compress(
        json.dumps(
            {
                "version": "2.10",
                "entries": [
                    {"process_group": ["0", "default_pg"], "profiling_name": "gloo:all_reduce", "collective_seq_id": 1,
                     "input_sizes": [[4]], "state": "scheduled", "frames": [{"name": "f", "filename": "/a.py",
                                                                             "line": 3}]}
                ],
                "stepscope": {"rank": 0, "worldSize": 2, "reason": "hang", "dumpedAtNs": 10},
            }
        ).encode()
    ),
    "gpu.jsonl": b"\1" + b'{"t": 1.0, "gpu": 0, "utilization": {"gpu": 50}, "memory": {"used": 1}}\n',
    "steps.json": b"\2"
    + json.dumps({"pod": "p", "ranks": [{"rank": 0, "durationMs": [1.0] * 20, "profiled": [False] * 20}]}).encode(),
    "review.json": b"\3"
    + json.dumps(
        {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE",
                     "object": {"metadata": {"labels": {"stepscope.dev/inject": "true"}},
                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    ).encode(),
    "report.json": b"\4" + b"{}",
}  # fmt: skip


def _seed(corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    if any(corpus.iterdir()):
        return
    for name, data in SEEDS.items():
        (corpus / name).write_bytes(data)


def main(argv: list[str]) -> None:
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        _seed(Path(dirs[0]))
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
