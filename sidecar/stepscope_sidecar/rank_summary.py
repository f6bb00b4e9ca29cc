"""The rank's summary made here, right after its capture, while its trace uploads: the analyzer's own rank summary,
run as a command (`python -m stepscope_analyzer.ranks.node_summaries`, from the analyzer package the sidecar image
carries) so the sidecar imports nothing of the analyzer. It runs at a lower priority than the training (nice), on one
CPU, within an address-space limit and a deadline; its NodeSummary, bound to the trace (its SHA-256 and size) and to
the capture id, goes beside the trace (`traces/rank<R>/summary.json`). Whatever goes wrong here only costs the
central analysis a parse: it reads the trace where the summary is missing.

Settings (environment): STEPSCOPE_RANK_SUMMARY `auto` (default: when the analyzer is installed) or `off`;
STEPSCOPE_RANK_SUMMARY_NICE (10); STEPSCOPE_RANK_SUMMARY_MEMORY_MIB (address-space limit, 1024; 0: none);
STEPSCOPE_RANK_SUMMARY_TIMEOUT_SECONDS (120); STEPSCOPE_RANK_SUMMARY_TOP_N (50: the analyzer Job's --top-n).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from stepscope_contract.storage import RANK_SUMMARY_FILE

log = logging.getLogger(__name__)

ANALYZER_MODULE = "stepscope_analyzer.ranks.node_summaries"
MiB = 1024 * 1024


@dataclass(frozen=True)
class SummarySettings:
    enabled: bool = True
    nice: int = 10
    memory_mib: int = 1024
    timeout_s: float = 120.0
    top_n: int = 50
    command: tuple[str, ...] = (sys.executable, "-m", ANALYZER_MODULE)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SummarySettings:
        e = os.environ if env is None else env
        mode = e.get("STEPSCOPE_RANK_SUMMARY", "auto").strip().lower()
        installed = importlib.util.find_spec(ANALYZER_MODULE.split(".", maxsplit=1)[0]) is not None
        return cls(
            enabled=mode != "off" and installed,
            nice=int(e.get("STEPSCOPE_RANK_SUMMARY_NICE", cls.nice)),
            memory_mib=int(e.get("STEPSCOPE_RANK_SUMMARY_MEMORY_MIB", cls.memory_mib)),
            timeout_s=float(e.get("STEPSCOPE_RANK_SUMMARY_TIMEOUT_SECONDS", cls.timeout_s)),
            top_n=int(e.get("STEPSCOPE_RANK_SUMMARY_TOP_N", cls.top_n)),
        )


def _limits(nice: int, memory_bytes: int) -> Callable[[], None]:
    def apply() -> None:  # in the child, before exec
        os.nice(nice)
        if memory_bytes > 0:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return apply


class RankSummary:
    """One rank's summary command, started beside the trace's upload; `finish` waits for it."""

    def __init__(self, popen: subprocess.Popen[bytes], output: Path, rank: int, started: float, timeout_s: float):
        self.popen = popen
        self.output = output
        self.rank = rank
        self.started = started
        self.timeout_s = timeout_s

    @classmethod
    def start(cls, trace: Path, rank: int, settings: SummarySettings, capture_id: str) -> RankSummary | None:
        """Start summarising `trace`, recorded in capture `capture_id` (None: summaries are off, or the command cannot
        start)."""
        if not settings.enabled or not trace.is_file():
            return None
        output = trace.parent / RANK_SUMMARY_FILE
        argv = [*settings.command, "--rank", str(rank), "--top-n", str(settings.top_n), "--capture-id", capture_id,
                str(trace), str(output)]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1", "STEPSCOPE_ANALYZER_WORKERS": "1"}
        try:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=_limits(settings.nice, settings.memory_mib * MiB),  # noqa: PLW1509 - no threads in it
            )
        except OSError as exc:
            log.warning("rank %d: the rank summary did not start (%s); the analysis will parse the trace", rank, exc)
            return None
        return cls(popen, output, rank, time.monotonic(), settings.timeout_s)

    def finish(self) -> Path | None:
        """The summary file once the command is done (None: it failed or ran past its deadline, and why is logged)."""
        left = max(0.0, self.started + self.timeout_s - time.monotonic())
        try:
            _, err = self.popen.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.communicate()
            log.warning("rank %d: the rank summary ran past %.0f s; the analysis will parse the trace", self.rank,
                        self.timeout_s)  # fmt: skip
            return None
        text = err.decode("utf-8", "replace").strip()
        if self.popen.returncode != 0 or not self.output.is_file():
            log.warning("rank %d: the rank summary failed (exit %s): %s", self.rank, self.popen.returncode, text[-500:])
            return None
        log.info("rank %d: %s", self.rank, text.splitlines()[-1] if text else "summarised")
        return self.output
