"""`stepscope demo --trigger`: profiling that starts by itself. The 4-rank training runs balanced, then rank 2 slows
down; the ProfileTrigger examples/triggers/profiletrigger.yaml (applied by the demo, no ProfileSession by hand) watches
the ranks' step telemetry, fires on the straggler, and the session it created runs to its verdict and report."""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path
from typing import Any

from stepscope_local.cluster import REPO_ROOT, LocalCluster
from stepscope_local.demo_session import (
    API,
    follow_session,
    report_outcome,
    say,
    wait_operator_healthy,
    wait_ready_pods,
)
from stepscope_local.manifests import training_job
from stepscope_local.ports import free_port

TRIGGER_PATH = REPO_ROOT / "examples" / "triggers" / "profiletrigger.yaml"
TRIGGER = "ddp-train-watch"


def _trigger(cluster: LocalCluster) -> dict[str, Any]:
    obj = cluster.api.get(API, "profiletriggers", "default", TRIGGER)
    if obj is None:
        raise RuntimeError(f"ProfileTrigger {TRIGGER} is gone")
    return obj


def _slowed_down(cluster: LocalCluster, pods: list[dict[str, Any]]) -> bool:
    return any("slows down at step" in cluster.pod_log("default", p["metadata"]["name"], "trainer") for p in pods)


def wait_fired(cluster: LocalCluster, pods: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    """Print what the trigger sees as it changes until it has created a session; its status then."""
    deadline = time.monotonic() + timeout
    shown = ""
    announced = False
    while time.monotonic() < deadline:
        if not announced and _slowed_down(cluster, pods):
            announced = True
            say("rank 2 slowed down (its log: 'slows down at step ...')")
        status = _trigger(cluster).get("status") or {}
        observed = status.get("observed") or {}
        line = str(status.get("message", ""))
        if observed.get("medianStepMs") is not None and not status.get("sessions"):
            line += f" [{observed.get('ranks')} ranks, median step {observed['medianStepMs']:.0f} ms]"
        if line != shown and status.get("message"):
            shown = line
            say(f"trigger {TRIGGER}: {line}")
        if status.get("sessions"):
            return status
        time.sleep(0.5)
    raise RuntimeError(f"the trigger did not fire within {timeout:.0f} s; see {cluster.logs_dir}")


def _show_triggers(cluster: LocalCluster) -> None:
    table = cluster.kubectl("get", "profiletriggers")
    for line in (table.stdout or table.stderr).splitlines():
        print(f"  {line}", flush=True)


def _created_by(session: dict[str, Any]) -> str:
    owners = (session.get("metadata") or {}).get("ownerReferences") or []
    return ", ".join(f"{o.get('kind')} {o.get('name')}" for o in owners) or "nobody"


def run_trigger(
    args: argparse.Namespace,
    cluster: LocalCluster,
    workdir: Path,
    *,
    operator: subprocess.Popen[bytes],
    health_port: int,
    started: float,
) -> int:
    extra = {"SLOW_AFTER_STEPS": str(args.slow_after)}
    job = training_job(free_port(), args.slow_rank, "host", args.slow_ms, extra, storage_endpoint=cluster.s3_endpoint)
    cluster.api.apply(job)
    say(
        f"training Job ddp-train: 4 ranks, balanced for {args.slow_after} steps, then rank {args.slow_rank} slows down "
        f"by {args.slow_ms:g} ms per step (host)"
    )
    pods = sorted(wait_ready_pods(cluster, 4, args.ready_timeout), key=lambda p: p["metadata"]["name"])
    say("pods Ready: " + ", ".join(p["metadata"]["name"] for p in pods))
    if args.operator_health_timeout > 0 and not wait_operator_healthy(
        operator, health_port, args.operator_health_timeout
    ):
        say("the operator is not answering on /healthz yet; applying the trigger anyway")
    if operator.poll() is not None:
        raise RuntimeError(f"the operator exited with {operator.returncode}; see {workdir / 'operator.log'}")
    applied = cluster.kubectl("apply", "-f", str(TRIGGER_PATH))
    say(f"kubectl apply -f examples/triggers/profiletrigger.yaml: {(applied.stdout or applied.stderr).strip()}")
    if applied.returncode != 0:
        return 1
    if _slowed_down(cluster, pods):
        say("note: rank 2 slowed down before the trigger's first evaluation (a busy machine): raise --slow-after")
    status = wait_fired(cluster, pods, args.timeout)
    name = status["sessions"][0]["name"]
    say(f"the trigger fired on {status.get('lastFiredCondition')}: {status.get('lastFiredReason')}")
    _show_triggers(cluster)
    session = cluster.api.get(API, "profilesessions", "default", name) or {}
    say(f"ProfileSession {name} was created by {_created_by(session)}; following it")
    obj = follow_session(cluster, name, args.timeout)
    phase, report = report_outcome(cluster, obj, workdir)
    say(f"the session {name} was created by ProfileTrigger {TRIGGER} ({status.get('lastFiredCondition')}), not by hand")
    say(f"done in {time.monotonic() - started:.0f} s")
    return 0 if phase in ("Succeeded", "PartiallySucceeded") and report is not None else 1
