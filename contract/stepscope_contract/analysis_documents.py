"""The two documents that pass between the operator and the analyzer Job, so that the Job needs no Kubernetes API and
the operator stays the only writer of a session's status. Pure.

- `SessionDocument`: what the operator accepted (the frozen spec, the object's namespace, name, uid and capture id).
  The operator hands it to the Job in its arguments; the Job writes it into the session folder (`session.json`)
  before anything else, and every later step (and `stepscope analyze` of the folder) reads it from there.
- `NodeSummary`: one rank's summary, made where its trace was recorded (the sidecar runs the analyzer's own rank
  summary on it) and stored beside the trace (`traces/rank<R>/summary.json`), carrying the rank's manifest; the
  analysis uses it instead of parsing the trace (and reading the manifest) when it was made by the same analyzer
  version with the same settings, and only when it is bound to what it summarises: it names the sha256 and size of
  the trace it was made from and the capture's id, which must be what the rank's manifest records of its trace and
  the session's capture id (`binding_error`), so a summary moved to another rank or replayed from another capture
  is not used. Its shape (every list, text and number) is declared and checked in node_summary_shape.
- `AnalysisOutcome`: what the analysis concluded (the status summary, the report's URLs, whether a report was
  written and why not, the Regressed condition of a gated session). The Job writes it beside the report
  (`report/outcome.json`) and as its container's termination message, which is how the operator, which holds no
  storage keys, reads it when the Job ends (Kubernetes keeps at most 4,096 bytes of it: `termination_message`
  fits the document into that, dropping what the operator can recompute or do without first).
"""

from typing import Annotated

from pydantic import Field, ValidationError

from stepscope_contract.manifest import RankManifest
from stepscope_contract.node_summary_shape import MAX_SUMMARY_TOP_N
from stepscope_contract.report import RankReport
from stepscope_contract.session import CamelModel, ConditionStatus, ProfileSessionSpec, ReportSummary

SESSION_DOCUMENT_VERSION = 1
MAX_SESSION_DOCUMENT_BYTES = 256 * 1024
MAX_TERMINATION_MESSAGE_BYTES = 4096  # what the kubelet keeps of a container's termination message
MAX_OUTCOME_BYTES = 256 * 1024


class SessionDocument(CamelModel):
    """A session as the operator accepted it: all the analyzer Job (or a later re-analysis) needs of it."""

    version: int = SESSION_DOCUMENT_VERSION
    namespace: Annotated[str, Field(min_length=1, max_length=253)]
    name: Annotated[str, Field(min_length=1, max_length=253)]
    uid: Annotated[str, Field(min_length=1, max_length=128)]
    capture_id: Annotated[str, Field(max_length=63)] | None = None
    spec: ProfileSessionSpec

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, data: str | bytes) -> "SessionDocument":
        """The document, or ValueError (with pydantic's reason) when it is not one."""
        if len(data) > MAX_SESSION_DOCUMENT_BYTES:
            raise ValueError(f"the session document is {len(data)} bytes, over {MAX_SESSION_DOCUMENT_BYTES}")
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise ValueError(f"not a session document: {exc.errors()[0].get('msg', exc)}") from exc


class NodeSummary(CamelModel):
    """A rank's summary as its node made it: the analyzer's RankReport of the trace (or the error it gave), with
    what makes it comparable to a central analysis (the analyzer's version and the kept top-N)."""

    analyzer_version: Annotated[str, Field(min_length=1, max_length=64)]
    top_n: Annotated[int, Field(ge=1, le=MAX_SUMMARY_TOP_N)]
    trace_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        default=None, description="SHA-256 of the trace object the summary was made from (as stored)"
    )
    trace_size: Annotated[int, Field(ge=0)] | None = Field(default=None, description="its size in bytes")
    capture_id: Annotated[str, Field(max_length=63)] | None = Field(
        default=None, description="the capture the trace was recorded in (the session's capture id)"
    )
    rank: int | None = Field(default=None, description="the rank the trace said (None: it said none)")
    summary: RankReport | None = None
    error: Annotated[str, Field(max_length=4000)] | None = None
    seconds: float | None = Field(default=None, description="CPU-time of the summary on the node")
    manifest: RankManifest | None = Field(
        default=None,
        description="the rank's manifest as the sidecar uploads it right after this summary, but for the upload's "
        "own figures (attempts, finish time): the analysis need not read manifest.json as well",
    )

    def usable_for(self, analyzer_version: str, top_n: int) -> str | None:
        """None when this summary stands for a central analysis by `analyzer_version` with `top_n`; else why not."""
        if self.analyzer_version != analyzer_version:
            return f"made by analyzer {self.analyzer_version}, this is {analyzer_version}"
        if self.top_n != top_n:
            return f"made with top-n {self.top_n}, this analysis keeps {top_n}"
        if self.summary is None:
            return f"the node could not summarise the trace ({self.error or 'no reason given'})"
        return None

    def binding_error(self, manifest: RankManifest | None, trace_file: str, capture_id: str | None) -> str | None:
        """None when this summary was made from the trace that `manifest` records as `trace_file` (same SHA-256 and
        size) in the capture `capture_id` (the session's; None: unknown, the manifest's is compared); else why not."""
        if self.trace_sha256 is None or self.trace_size is None or not self.capture_id:
            return "it names no trace SHA-256, size or capture id to bind it to"
        if capture_id is not None and self.capture_id != capture_id:
            return f"it was made in capture {self.capture_id}, this session's is {capture_id}"
        if manifest is None:
            return "no manifest records the rank's trace"
        if manifest.capture_id != self.capture_id:
            return f"it was made in capture {self.capture_id}, the rank's manifest says {manifest.capture_id}"
        recorded = next((f for f in manifest.files if f.name == trace_file), None)
        if recorded is None:
            return f"the rank's manifest records no {trace_file}"
        if (recorded.sha256, recorded.size) != (self.trace_sha256, self.trace_size):
            return (
                f"it was made from a trace of {self.trace_size} bytes, SHA-256 {self.trace_sha256[:12]}..., the "
                f"rank's manifest records {recorded.size} bytes, SHA-256 {recorded.sha256[:12]}..."
            )
        return None


class RegressedVerdict(CamelModel):
    """The Regressed condition of a session with a baseline (what the gate decided)."""

    status: ConditionStatus
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    message: str = ""


class AnalysisOutcome(CamelModel):
    """What one analysis concluded, for the session's status; `ok` False: no report, `message` says why."""

    ok: bool
    message: str = ""
    summary: ReportSummary | None = None
    report_url: str | None = Field(default=None, alias="reportURL")
    report_json_url: str | None = Field(default=None, alias="reportJSONURL")
    regressed: RegressedVerdict | None = None
    analyzer_version: str | None = None

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @classmethod
    def from_json(cls, data: str | bytes) -> "AnalysisOutcome | None":
        """The document, or None when `data` is not one (empty, cut short, another program's message)."""
        if not data or len(data) > MAX_OUTCOME_BYTES:
            return None
        try:
            return cls.model_validate_json(data)
        except ValidationError:
            return None


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: max(0, most - 3)] + "..."


def termination_message(outcome: AnalysisOutcome, most: int = MAX_TERMINATION_MESSAGE_BYTES) -> str:
    """The outcome as JSON within `most` bytes: whole when it fits, else without the URLs (the operator recomputes
    them from the session folder), then without the baseline's changes and address, then with the texts cut."""
    steps: list[AnalysisOutcome] = [outcome, outcome.model_copy(update={"report_url": None, "report_json_url": None})]
    summary = steps[-1].summary
    if summary is not None:
        lean = summary.model_copy(update={"top_changes": None, "baseline": None})
        steps.append(steps[-1].model_copy(update={"summary": lean}))
    for step in steps:
        text = step.to_json()
        if len(text.encode()) <= most:
            return text
    last = steps[-1]
    room = most // 4  # message, verdict and the Regressed message share what the rest leaves
    regressed = last.regressed
    if regressed is not None:
        regressed = regressed.model_copy(update={"message": _cut(regressed.message, room)})
    summary = last.summary
    if summary is not None and summary.verdict is not None:
        summary = summary.model_copy(update={"verdict": _cut(summary.verdict, room)})
    cut = last.model_copy(update={"message": _cut(last.message, room), "summary": summary, "regressed": regressed})
    text = cut.to_json()
    if len(text.encode()) <= most:
        return text
    return AnalysisOutcome(ok=outcome.ok, message=_cut(outcome.message, room)).to_json()
