"""ProfileTrigger false alarms and margins.

1. Synthetic: the trigger conditions (defaults: straggler +50% over 20 steps, regression +30% over 20 steps against
   200, stall) over thousands of noisy balanced step series (tests/operator/step_series.py: log-normal jitter of 10-40%
   and bursts three steps long) -- the false alarms, which must be 0 -- and over planted stragglers and regressions of
   several sizes: how often each is found.
2. Soak: a balanced 4-rank gloo DDP training on the local cluster for --minutes (5 by default), watched by a
   ProfileTrigger with every condition on, evaluated every 2 s by the real operator from the real sidecars: it must
   create no session. While it runs, the bench pulls the same telemetry and prints the worst straggler and regression
   ratios it saw against their thresholds (the margin). `make test` runs a one-minute version
   (tests/e2e/test_triggers.py); this is the long one.

    .venv/bin/python bench/trigger_soak.py [--minutes 5] [--synthetic-only]
Exit 1 on any false alarm.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "operator"))
from step_series import job

from stepscope_contract.step_telemetry import PodSteps, RankSteps
from stepscope_contract.tokens import namespace_token
from stepscope_contract.trigger import Stall, StepTimeRegression, Straggler, TriggerConditions
from stepscope_operator.triggers.conditions import evaluate, job_step_series

REPO = Path(__file__).resolve().parents[1]
DEFAULTS = TriggerConditions(straggler=Straggler(), step_time_regression=StepTimeRegression(), stall=Stall(seconds=60))


def synthetic(series: int) -> int:
    alarms = 0
    for i in range(series):
        sigma = (0.1, 0.2, 0.3, 0.4)[i % 4]
        found = evaluate(job(10_000 + i, sigma=sigma, bursts=0.08), DEFAULTS).findings
        alarms += bool(found)
    print(f"synthetic balanced series: {alarms} false alarms in {series} (jitter 10-40%, 8% bursts of 3x)")
    for extra in (20.0, 30.0, 60.0):
        hits = sum(
            bool(evaluate(job(20_000 + i, slow_rank=1, slow_ms=extra, slow_from=270), DEFAULTS).findings)
            for i in range(200)
        )
        print(f"  a straggler whose own time grows by {extra:.0f} ms (60 ms steps): found in {hits}/200")
    for factor in (1.3, 1.5, 2.0):
        hits = sum(
            bool(evaluate(job(30_000 + i, sigma=0.1, slow_from=270, job_slowdown=factor), DEFAULTS).findings)
            for i in range(200)
        )
        print(f"  the job {factor:.1f}x slower for its last 30 steps (10% jitter): found in {hits}/200")
    return alarms


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def margins(ranks: list[RankSteps]) -> tuple[float, float]:
    """(worst rank's own-time median / the others', the last 20 steps' job median / the 200 before)."""
    own = {
        r.rank: statistics.median([v for v, p in zip(r.own_ms(), r.profiled, strict=False) if not p][-20:])
        for r in ranks
        if len(r.duration_ms) >= 20
    }
    straggler = 0.0
    for rank, value in own.items():
        others = statistics.median(v for k, v in own.items() if k != rank)
        straggler = max(straggler, value / others if others > 0 else 0.0)
    series = job_step_series(ranks, 220, 120)
    regression = statistics.median(series[-20:]) / statistics.median(series[:-20]) if len(series) >= 120 else 0.0
    return straggler, regression


def pull(cluster: Any, token: str) -> list[RankSteps]:
    out: list[RankSteps] = []
    for pod in cluster.api.list("v1", "pods", "default", "job-name=soak-train"):
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        req = urllib.request.Request(
            f"http://{ip}:8471/v1/steps?last=300", headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                out.extend(PodSteps.model_validate(json.loads(resp.read())).ranks)
        except OSError:
            continue
    return out


def soak(minutes: float) -> int:
    from stepscope_local.cluster import LocalCluster
    from stepscope_local.demo_session import wait_operator_healthy, wait_ready_pods
    from stepscope_local.install import MASTER_TOKEN, install, start_operator
    from stepscope_local.manifests import training_job
    from stepscope_local.ports import free_port
    from stepscope_local.runner.pods import kill_group

    workdir = REPO / ".demo" / "trigger-soak"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with LocalCluster(workdir=workdir / "cluster") as cluster:
        install(cluster)
        health = free_port()
        operator = start_operator(cluster, workdir, None, health, namespaces="default")
        try:
            assert wait_operator_healthy(operator, health, 240), "the operator did not start"
            training = training_job(free_port(), -1, "host", 60.0, storage_endpoint=cluster.s3_endpoint)
            training["metadata"]["name"] = "soak-train"
            cluster.api.apply(training)
            wait_ready_pods(cluster, 4, 300, "soak-train")
            cluster.api.apply(
                {
                    "apiVersion": "stepscope.dev/v1alpha1",
                    "kind": "ProfileTrigger",
                    "metadata": {"name": "soak", "namespace": "default"},
                    "spec": {
                        "targets": {"jobRef": {"kind": "Job", "name": "soak-train"}},
                        "conditions": {"straggler": {}, "stepTimeRegression": {}, "stall": {"seconds": 60}},
                        "evaluationIntervalSeconds": 2,
                        "cooldownSeconds": 0,
                        "sessionTemplate": {"spec": {"storage": {"uri": "s3://stepscope-demo/sessions"}}},
                    },
                }
            )
            token = namespace_token(MASTER_TOKEN, "default")
            worst = (0.0, 0.0)
            longest: dict[str, float] = {}
            evaluations: set[str] = set()
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                status = (cluster.api.get("stepscope.dev/v1alpha1", "profiletriggers", "default", "soak") or {}).get(
                    "status"
                ) or {}
                evaluations.add(str(status.get("lastEvaluationTime")))
                since = status.get("conditionSince")
                if status.get("condition") not in (None, "None") and since and status.get("lastEvaluationTime"):
                    held = (parse(status["lastEvaluationTime"]) - parse(since)).total_seconds()
                    longest[status["condition"]] = max(longest.get(status["condition"], 0.0), held)
                ranks = pull(cluster, token)
                if len(ranks) == 4:
                    now = margins(ranks)
                    worst = (max(worst[0], now[0]), max(worst[1], now[1]))
                time.sleep(2)
            status = (cluster.api.get("stepscope.dev/v1alpha1", "profiletriggers", "default", "soak") or {}).get(
                "status"
            ) or {}
            fired = int(status.get("sessionCount") or 0)
            print(
                f"soak: balanced 4-rank training for {minutes:g} min, {len(evaluations)} evaluations, "
                f"{fired} sessions created (must be 0); last: {status.get('message')}"
            )
            held = ", ".join(f"{c} held {t:.0f} s" for c, t in sorted(longest.items())) or "none held"
            print(f"  longest episodes: {held} (straggler fires after 30 s, regression after 60 s)")
            for fired_session in reversed(status.get("sessions") or []):
                print(f"  FIRED {fired_session['createdAt']} {fired_session['condition']}: {fired_session['reason']}")
            print(
                f"  worst straggler ratio seen {worst[0]:.2f}x (fires above 1.50x); "
                f"worst regression ratio {worst[1]:.2f}x (fires above 1.30x)"
            )
            return fired
        finally:
            kill_group(operator, 5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--series", type=int, default=2000)
    parser.add_argument("--synthetic-only", action="store_true")
    args = parser.parse_args()
    alarms = synthetic(args.series)
    if not args.synthetic_only:
        alarms += soak(args.minutes)
    print("no false alarm" if alarms == 0 else f"{alarms} FALSE ALARMS")
    return 0 if alarms == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
