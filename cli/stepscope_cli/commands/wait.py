"""`stepscope wait SESSION [-n NS] [--timeout S] [--ignore-slow-ranks]`: a pipeline's one command after applying a
session. Prints a line whenever the session's phase or message changes, then the outcome, and exits
- 0: the session finished with a report and passed: no slow or hung rank (unless --ignore-slow-ranks) and, with a
  spec.baseline, Regressed=False;
- 1: it finished but failed the gate: Regressed=True, or a slow or hung rank;
- 2: it failed (phase Failed), the gate could not decide (Regressed Unknown or missing though a baseline is named),
  the session does not exist, the cluster cannot be reached, or --timeout passed first.
`judge` and `progress_line` are pure; `main` polls the API server (the kubeconfig, else in-cluster).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from stepscope_cli.commands.args import wait_parser
from stepscope_contract.constants import GROUP, PLURAL, VERSION
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.session import (
    DNS_SUBDOMAIN,
    ConditionStatus,
    ConditionType,
    GateSpec,
    Phase,
    ProfileSessionStatus,
)
from stepscope_contract.status_wire import condition, read_status
from stepscope_contract.text_escaping import one_line

PASSED, FAILED_GATE, UNUSABLE = 0, 1, 2
POLL_SECONDS = 2.0
DEFAULT_LEVEL = GateSpec().confidence


def progress_line(status: ProfileSessionStatus) -> str:
    return f"{status.phase.value} {status.progress}: {status.message}".rstrip(": ")


def _numbers(status: ProfileSessionStatus, level: float = DEFAULT_LEVEL) -> list[str]:
    s = status.summary
    if s is None:
        return []
    lines = []
    if s.median_step_ms is not None:
        p90 = f", p90 {s.p90_step_ms:.1f} ms" if s.p90_step_ms is not None else ""
        lines.append(f"step: median {s.median_step_ms:.1f} ms{p90}")
    if s.regression_percent is not None:
        low, high = s.regression_low_percent, s.regression_high_percent
        interval = (
            f" ({level:.0%} interval {low:+.1f}% to {high:+.1f}%)" if low is not None and high is not None else ""
        )
        step = s.step_regression_percent
        measured = f", measured steps {step:+.1f}%" if step is not None and step != s.regression_percent else ""
        lines.append(f"vs baseline {s.baseline}: {s.regression_percent:+.1f}%{interval}{measured}")
    if s.added_work_percent is not None:
        low, high = s.added_work_low_percent, s.added_work_high_percent
        interval = (
            f" ({level:.0%} interval {low:+.1f}% to {high:+.1f}%)" if low is not None and high is not None else ""
        )
        lines.append(f"added work: {s.added_work_percent:+.1f}% of the rest of the step{interval}")
    if s.gate_decided_by:
        lines.append(f"decided by: {s.gate_decided_by}")
    if s.top_changes:
        lines.append(
            "changes, largest first (Δ self time per step, the machine's speed taken out where the gate does):"
        )
    for c in s.top_changes or []:
        shown = (
            c.delta_us_per_step
            if c.at_equal_op_speed_delta_us_per_step is None
            else c.at_equal_op_speed_delta_us_per_step
        )
        where = f"rank {c.rank}" if c.rank is not None else "all ranks"
        lines.append(f"  {shown / 1000:+9.2f} ms/step  {c.change:<7} {c.kind:<15} {where:<9} {one_line(c.name, 100)}")
    return lines


def judge(obj: dict[str, Any], ignore_slow_ranks: bool = False) -> tuple[int, list[str]] | None:
    """None while the session runs; then (exit code, lines to print after the progress line, which has told the
    phase and the message, the verdict among it: the lines repeat neither)."""
    status = read_status(obj.get("status"))
    finished = condition(status.conditions, ConditionType.FINISHED)
    if not status.phase.terminal and (finished is None or finished.status is not ConditionStatus.TRUE):
        return None
    gate_spec = (obj.get("spec") or {}).get("gate") or {}
    level = gate_spec.get("confidence", DEFAULT_LEVEL)
    lines = _numbers(status, level if isinstance(level, (int, float)) else DEFAULT_LEVEL)
    if status.report_url:
        lines.append(f"report: {status.report_url}")
    if status.phase is Phase.FAILED:
        return UNUSABLE, [*lines, "no report"]
    gate = condition(status.conditions, ConditionType.REGRESSED)
    named = bool((obj.get("spec") or {}).get("baseline"))
    if gate is not None and gate.status is ConditionStatus.TRUE:
        return FAILED_GATE, [*lines, f"gate failed: {gate.message}"]
    if named and (gate is None or gate.status is not ConditionStatus.FALSE):
        why = gate.message if gate is not None else "the analysis wrote no Regressed condition"
        return UNUSABLE, [*lines, f"gate undecided ({gate.reason if gate else 'NoComparison'}): {why}"]
    summary = status.summary
    if not ignore_slow_ranks and summary is not None and (summary.slow_ranks or summary.hung_ranks):
        which = summary.slow_ranks or summary.hung_ranks
        return FAILED_GATE, [*lines, f"slow or hung rank(s) {format_rank_set(which)}"]
    return PASSED, [*lines, "passed"]


def wait_for(
    get: Callable[[], tuple[int, Any]],
    timeout: float,
    ignore_slow_ranks: bool,
    out: Callable[[str], None],
    poll: float = POLL_SECONDS,
) -> int:
    """Poll `get` (HTTP code, object) every `poll` seconds until the session finishes or `timeout` passes."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        code, obj = get()
        if code == 404:
            out("the session does not exist")
            return UNUSABLE
        if code == 200 and isinstance(obj, dict):
            line = progress_line(read_status(obj.get("status")))
            if line != last:
                out(line)
                last = line
            verdict = judge(obj, ignore_slow_ranks)
            if verdict is not None:
                for text in verdict[1]:
                    out(text)
                return verdict[0]
        elif code != 200:
            out(f"cannot read the session ({code}); retrying")
        if time.monotonic() >= deadline:
            out(f"timed out after {timeout:g}s")
            return UNUSABLE
        time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    from stepscope_cli.commands.check import Cluster

    args = wait_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not re.fullmatch(DNS_SUBDOMAIN, args.session) or (
        args.namespace and not re.fullmatch(DNS_SUBDOMAIN, args.namespace)
    ):
        print(f"stepscope wait: '{args.session}' is not a session name", file=sys.stderr)
        return UNUSABLE
    cluster = Cluster(args.kubeconfig)  # its errors reach the user as one line (stepscope_cli.failures)
    namespace = args.namespace or cluster.context_namespace
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{args.session}"

    def out(text: str) -> None:
        print(f"{namespace}/{args.session}: {text}", flush=True)

    def get() -> tuple[int, Any]:
        code, obj = cluster.call("GET", path)
        if code == 403:  # no retry changes a permission: one line with the fix (stepscope_cli.failures)
            from kubernetes.client.exceptions import ApiException

            refused = ApiException(status=code, reason="Forbidden")
            refused.body = json.dumps(obj)
            raise refused
        return code, obj

    try:
        return wait_for(get, args.timeout, args.ignore_slow_ranks, out)
    finally:
        cluster.close()
