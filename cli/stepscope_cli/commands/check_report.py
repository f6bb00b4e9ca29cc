"""The result table of `stepscope check`: one row per check (ok, FAIL or skip, with what was seen), pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    OK = "ok"
    FAIL = "FAIL"
    SKIP = "skip"  # cannot apply here (said why); not a failure


@dataclass(frozen=True)
class CheckResult:
    name: str
    outcome: Outcome
    detail: str


def ok(name: str, detail: str) -> CheckResult:
    return CheckResult(name, Outcome.OK, detail)


def fail(name: str, detail: str) -> CheckResult:
    return CheckResult(name, Outcome.FAIL, detail)


def skip(name: str, detail: str) -> CheckResult:
    return CheckResult(name, Outcome.SKIP, detail)


def render(results: Sequence[CheckResult]) -> str:
    """A table (CHECK, RESULT, DETAIL) and a closing line that names every failed check."""
    width = max([len("CHECK"), *(len(r.name) for r in results)])
    lines = [f"{'CHECK':<{width}}  RESULT  DETAIL"]
    lines += [f"{r.name:<{width}}  {r.outcome.value:<6}  {r.detail}" for r in results]
    failed = [r.name for r in results if r.outcome is Outcome.FAIL]
    if failed:
        lines.append(f"\n{len(failed)} check(s) failed: {', '.join(failed)}")
    else:
        lines.append("\nall checks passed" + (" (some skipped, see above)" if any_skipped(results) else ""))
    return "\n".join(lines)


def any_skipped(results: Sequence[CheckResult]) -> bool:
    return any(r.outcome is Outcome.SKIP for r in results)


def exit_code(results: Sequence[CheckResult]) -> int:
    return 1 if any(r.outcome is Outcome.FAIL for r in results) else 0
