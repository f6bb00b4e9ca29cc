"""Every bound the analyzer puts on its inputs, in one table.

Traces, manifests, stacks, Flight Recorder dumps, GPU metrics and summaries come from storage that training pods (and
whoever holds their credentials) can write: a 2 MB gzip can inflate to gigabytes, a manifest can claim a world size of
millions. Each limit below is checked where the input is read, and exceeding it makes that rank an error whose
message names the limit (and the variable that raises it); the other ranks are still analysed. Every object is read
with its limit (`most=`), so an oversized one is refused from its size before it is downloaded. Inputs kept for the
whole analysis (the Flight Recorder dumps, the hung ranks' stacks) also have one budget per analysis across all
ranks: dumps are decoded one rank at a time, and a rank that does not fit what is left is an error naming the total
limit; the node summaries draw on theirs only for what each holds beyond a free share (an honest summary holds far
less), and their declared shape is checked field by field (stepscope_contract.node_summary_shape). The defaults keep
the
analysis well inside the analyzer Job's default 2Gi memory (under 1 GiB with eight hostile dumps). Each limit can be
changed with its environment variable (`STEPSCOPE_LIMIT_<NAME>`, docs/interfaces.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from stepscope_analyzer.trace_error import TraceError
from stepscope_contract.node_summary_shape import MAX_NODE_SUMMARY_BYTES, MAX_NODE_SUMMARY_VALUES

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Limits:
    """The named limits (field name = limit name). The docstring of each is the message users read."""

    max_trace_file_bytes: int = 1 * GiB  # a trace object as stored (gzip or plain)
    max_inflated_bytes: int = 1 * GiB  # a trace's JSON text after gzip
    max_inflate_ratio: int = 100  # inflated / stored bytes (real Kineto traces: 12-20)
    min_ratio_checked_bytes: int = 64 * MiB  # traces inflating to less than this are never refused for their ratio
    max_whole_parse_bytes: int = 128 * MiB  # a trace that cannot be read in chunks is parsed whole up to this size
    max_prefix_bytes: int = 16 * MiB  # JSON text before the "traceEvents" array
    max_event_bytes: int = 32 * MiB  # one event (or the space between two events)
    max_events: int = 5_000_000  # complete events in one trace
    max_distinct_names: int = 500_000  # distinct event names in one trace
    max_name_chars_total: int = 64 * MiB  # characters of all distinct event names of one trace
    max_name_chars: int = 4096  # one event name in the report (longer names are cut, with a hash)
    max_steps: int = 10_000  # ProfilerStep# events in one trace
    max_event_duration_us: int = 7 * 24 * 3600 * 1_000_000  # one event's 'dur' (a week)
    max_world_size: int = 1 << 20  # world size a trace or manifest may claim (and 1 + the largest rank)
    max_ranks: int = 131_072  # rank folders or trace files analysed in one run
    max_manifest_bytes: int = 1 * MiB  # a rank's manifest.json
    max_stacks_bytes: int = 256 * KiB  # a rank's stacks.txt (longer stacks are cut)
    max_stacks_total_bytes: int = 64 * MiB  # every rank's stacks kept for the hang diagnosis, together
    max_summary_bytes: int = 64 * MiB  # a rank's summary written by the map step
    max_node_summary_bytes: int = MAX_NODE_SUMMARY_BYTES  # a rank's node summary as stored (made by its sidecar)
    max_node_summary_values: int = MAX_NODE_SUMMARY_VALUES  # JSON values in it, counted before decoding
    max_node_summary_free_bytes: int = 256 * KiB  # of each node summary, not charged to the analysis's budget
    max_node_summary_total_bytes: int = 256 * MiB  # what every node summary holds beyond the free bytes, together
    max_listed_missing_ranks: int = 256  # missing ranks listed one by one in report.json (the rest as ranges)
    max_flight_recorder_file_bytes: int = 32 * MiB  # a rank's Flight Recorder dump as stored
    max_flight_recorder_json_bytes: int = 64 * MiB  # its JSON after gzip
    max_flight_recorder_total_bytes: int = 256 * MiB  # every rank's dump as kept for the analysis (estimated memory)
    max_flight_recorder_total_entries: int = 4_000_000  # every rank's dump: recorded collectives kept in total
    max_gpu_metrics_file_bytes: int = 64 * MiB  # a rank's gpu_metrics.jsonl.gz as stored
    max_report_json_bytes: int = 512 * MiB  # report.json as written (the analyzer pod's scratch space holds it)

    @staticmethod
    def env_name(name: str) -> str:
        return f"STEPSCOPE_LIMIT_{name.upper()}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        e = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            text = e.get(cls.env_name(f.name))
            if text:
                value = int(text)
                if value <= 0:
                    raise ValueError(f"{cls.env_name(f.name)} must be a positive integer, got {text}")
                values[f.name] = value
        return cls(**values)

    def exceeded(self, name: str, detail: str) -> LimitExceededError:
        """The per-rank error for input beyond the limit `name`."""
        value = getattr(self, name)
        return LimitExceededError(f"{detail}: beyond the limit {name}={value} (raise it with {self.env_name(name)})")

    def inflate_cap(self, stored_bytes: int) -> tuple[int, str]:
        """How far a trace of `stored_bytes` may inflate, and the name of the limit that decides it."""
        by_ratio = max(self.min_ratio_checked_bytes, self.max_inflate_ratio * stored_bytes)
        if by_ratio < self.max_inflated_bytes:
            return by_ratio, "max_inflate_ratio"
        return self.max_inflated_bytes, "max_inflated_bytes"


class LimitExceededError(TraceError):
    """Input beyond one of the analyzer's limits; the message names the limit and how to raise it."""


LIMITS = Limits.from_env()


def current() -> Limits:
    return LIMITS


@contextlib.contextmanager
def override(**values: int) -> Iterator[Limits]:
    """Tests: run with some limits changed."""
    global LIMITS  # noqa: PLW0603 - the one table, swapped for the duration
    saved = LIMITS
    LIMITS = replace(saved, **values)
    try:
        yield LIMITS
    finally:
        LIMITS = saved
