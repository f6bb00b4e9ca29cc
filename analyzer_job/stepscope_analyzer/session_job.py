"""`stepscope analyzer-job --namespace NS --name SESSION [--mode all|map|reduce] [--shards N]`.

The analyzer Job of a ProfileSession: reads the session (in-cluster config, or KUBECONFIG when set), finds its
storage folder, and
- map: summarises ranks i::n (i from JOB_COMPLETION_INDEX) into summaries/rank-<r>.json (contract RankReport);
- reduce: reads every summary, diagnoses, uploads report/{report.json, report.html} and patches the session's
  status (summary, reportURL, reportJSONURL, ReportReady);
- all: both in one pod;
- delete: the cleanup Job of a session being deleted (cleanup.py): its folder, recomputed from the session itself.
Failures exit non-zero with a message on stderr; reduce (and all) also set ReportReady=False with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError

from stepscope_analyzer.diagnosis import DiagnosisConfig
from stepscope_analyzer.diagnosis.status_summary import build_status_summary
from stepscope_analyzer.diff.step_samples import median_and_p90
from stepscope_analyzer.gate_step import run_gate, write_index_entry
from stepscope_analyzer.pipeline import Layout, RankInput, RankOutcome, discover, each_outcome, summarise, summarize_all
from stepscope_analyzer.rank_reading import read_rank
from stepscope_analyzer.reduction import flight_recorder_dumps, reduce_outcomes
from stepscope_analyzer.report import html_bytes, model_json_bytes, with_trace_links
from stepscope_analyzer.status_patch import status_patch
from stepscope_analyzer.storage_io import StorageError, Store, open_store, read_bounded
from stepscope_contract.constants import GROUP, PLURAL, VERSION
from stepscope_contract.errors import describe_validation_error
from stepscope_contract.report import CaptureInfo, RankError, RankReport, RankStatus, Report, SessionInfo
from stepscope_contract.session import ProfileSession, ProfileSessionSpec, ReportSummary
from stepscope_contract.session_folder import accepted_spec
from stepscope_contract.storage import (
    REPORT_HTML,
    REPORT_JSON,
    StorageLocation,
    parse_storage_uri,
    report_location,
    session_location,
    summary_key,
)
from stepscope_storage.credentials import Credentials

READ_WORKERS = 16
PATCH_ATTEMPTS = 5


class JobError(RuntimeError):
    """The analyzer Job cannot go on; the message says why."""


def _log(message: str) -> None:
    print(f"stepscope analyzer-job: {message}", file=sys.stderr, flush=True)


def job_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope analyzer-job",
        description="analyse a ProfileSession's traces",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--namespace", required=True, help="the session's namespace")
    p.add_argument("--name", required=True, help="the session's name")
    p.add_argument(
        "--mode",
        choices=["all", "map", "reduce", "delete"],
        default="all",
        help="all: one Job; map: per-rank shards; reduce; delete: the session's artifacts",
    )
    p.add_argument("--uid", default="", help="delete mode: the uid of the session being deleted")
    p.add_argument("--shards", type=int, default=1, help="number of map shards (Indexed Job completions)")
    p.add_argument("--index", type=int, default=None, help="map shard index (unset: $JOB_COMPLETION_INDEX or 0)")
    p.add_argument("--top-n", type=int, default=50, help="top kernels/functions kept per rank")
    return p


def custom_objects_api() -> Any:
    from kubernetes import client, config

    if os.environ.get("KUBECONFIG"):
        config.load_kube_config(config_file=os.environ["KUBECONFIG"])
    else:
        config.load_incluster_config()
    return client.CustomObjectsApi()


def read_session_object(api: Any, namespace: str, name: str) -> dict[str, Any]:
    from kubernetes.client.exceptions import ApiException

    try:
        obj: dict[str, Any] = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as exc:
        raise JobError(f"cannot read ProfileSession {namespace}/{name}: {exc.status} {exc.reason}") from exc
    return obj


def read_session(api: Any, namespace: str, name: str) -> tuple[dict[str, Any], ProfileSession]:
    obj = read_session_object(api, namespace, name)
    try:
        return obj, ProfileSession.model_validate(obj)
    except ValidationError as exc:
        raise JobError(f"ProfileSession {namespace}/{name} is invalid: {describe_validation_error(exc)}") from exc


def spec_of(session: ProfileSession) -> ProfileSessionSpec:
    """The accepted spec: the operator filled the install's storage settings (endpoint, Secret) into it."""
    return accepted_spec({"annotations": session.metadata.annotations}) or session.spec


def storage_of(session: ProfileSession) -> tuple[StorageLocation, Store]:
    spec = spec_of(session).storage
    base = parse_storage_uri(spec.uri)
    meta = session.metadata
    location = session_location(base, meta.namespace, meta.name, meta.uid)
    return location, open_store(location, spec, Credentials.from_env())


def with_step_numbers(summary: ReportSummary, report: Report) -> ReportSummary:
    """The job's median and p90 step time, and the slowest rank's slowdown, in the summary where the diagnosis left
    them out."""
    update: dict[str, float] = {}
    median, p90 = median_and_p90(report)
    if summary.median_step_ms is None and median > 0:
        update.update(median_step_ms=round(median / 1000, 3), p90_step_ms=round(p90 / 1000, 3))
    slow = report.diagnosis.slow_ranks
    if summary.slowdown_percent is None and slow:
        update["slowdown_percent"] = round(slow[0].slowdown_pct, 1)
    return summary.model_copy(update=update) if update else summary


def shard(layout: Layout, index: int, shards: int) -> list[RankInput]:
    """Ranks i::n of the session (sorted by rank)."""
    if shards < 1 or not 0 <= index < shards:
        raise JobError(f"shard index {index} is outside 0..{shards - 1}")
    return layout.inputs[index::shards]


def run_map(store: Store, location: StorageLocation, layout: Layout, *, index: int, shards: int, top_n: int) -> int:
    """Summarise this shard's ranks into summaries/rank-<r>.json, each written (and let go) as soon as it is done;
    how many were written."""
    part = Layout(session=layout.session, inputs=shard(layout, index, shards))
    _log(f"map shard {index}/{shards}: {len(part.inputs)} of {len(layout.inputs)} rank(s)")
    written = 0
    for o in each_outcome(store, part, top_n=top_n, progress=_log):
        _write_summary(store, location, o)
        written += 1
    return written


def _write_summary(store: Store, location: StorageLocation, outcome: RankOutcome) -> None:
    summary = outcome.summary
    store.write(summary_key(location, summary.rank), model_json_bytes(summary, indent=None), "application/json")


def read_summaries(store: Store, location: StorageLocation, layout: Layout) -> list[RankOutcome]:
    """Every rank's summary from storage; a rank without one is an error; hung ranks get their stacks back."""

    def one(inp: RankInput) -> RankOutcome:
        assert inp.rank is not None
        key = summary_key(location, inp.rank)
        try:
            summary = RankReport.model_validate_json(read_bounded(store, key, "max_summary_bytes"))
        except (StorageError, ValidationError, ValueError) as exc:
            message = f"no usable summary from the map step ({str(exc)[:300]})"
            return RankOutcome(RankReport(rank=inp.rank, status=RankStatus.ERROR, error=message))
        if summary.status is RankStatus.HUNG:
            return summarise(read_rank(store, inp, with_trace=False), store)  # manifest and stacks only
        return RankOutcome(summary)

    with ThreadPoolExecutor(READ_WORKERS) as pool:
        outcomes = list(pool.map(one, layout.inputs))
    for o in outcomes:
        s = o.summary
        if s.status is not RankStatus.OK and not o.errors:
            o.errors.append(RankError(rank=s.rank, source=s.trace_uri or "", message=s.error or s.status.value))
    return outcomes


def patch_status(api: Any, namespace: str, name: str, **fields: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    for attempt in range(PATCH_ATTEMPTS):
        current = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        body = status_patch(current, **fields)
        try:
            api.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, name, body, _content_type="application/merge-patch+json"
            )
            return
        except ApiException as exc:
            if exc.status == 409 and attempt + 1 < PATCH_ATTEMPTS:
                time.sleep(0.2 * (attempt + 1))
                continue
            raise JobError(f"cannot patch the status of {namespace}/{name}: {exc.status} {exc.reason}") from exc


def _run(args: argparse.Namespace, api: Any) -> None:
    started = time.perf_counter()
    raw, session = read_session(api, args.namespace, args.name)
    location, store = storage_of(session)
    _log(f"session {args.namespace}/{args.name}: storage {location.uri}, mode {args.mode}")
    layout = discover(store, location)
    if not layout.session or not layout.inputs:
        raise JobError(f"no rank's files under {location.uri}/traces/ (or the first layout's ranks/)")
    if args.mode == "map":
        index = args.index if args.index is not None else int(os.environ.get("JOB_COMPLETION_INDEX", "0"))
        run_map(store, location, layout, index=index, shards=args.shards, top_n=args.top_n)
        return
    if args.mode == "all":
        outcomes = summarize_all(store, layout, top_n=args.top_n, progress=_log)
        for o in outcomes:  # as the map step leaves them: a later reduce (or a person) reads them
            _write_summary(store, location, o)
    else:
        outcomes = read_summaries(store, location, layout)
    meta = session.metadata
    info = SessionInfo(namespace=meta.namespace, name=meta.name, uid=meta.uid, capture_id=session.status.capture_id)
    config = DiagnosisConfig.from_spec(session.spec.analysis)
    dumps = flight_recorder_dumps(store, layout)
    report = reduce_outcomes(
        outcomes, config=config, session=info, started=started, include_missing=True, flight_recorder=dumps
    )
    where = report_location(location)
    report = with_trace_links(report, where).model_copy(update={"capture": CaptureInfo.from_spec(session.spec.capture)})
    spec = spec_of(session)
    gate = run_gate(spec, meta.namespace, store, where, report, log=_log)
    if gate is not None:
        report = gate.into_report(report)
    json_url = store.write(where.key(REPORT_JSON), model_json_bytes(report), "application/json")
    html_url = store.write(where.key(REPORT_HTML), html_bytes(report), "text/html; charset=utf-8")
    summary = with_step_numbers(build_status_summary(report), report)
    if gate is not None:
        summary = gate.into_summary(summary)
    patch_status(
        api,
        args.namespace,
        args.name,
        ok=True,
        message=summary.verdict,
        summary=summary,
        report_url=html_url,
        report_json_url=json_url,
        regressed=gate.condition if gate is not None else None,
    )
    write_index_entry(
        spec, report, store, namespace=meta.namespace, name=meta.name, uid=meta.uid, folder=location,
        report_json=json_url, log=_log,
    )  # fmt: skip
    _log(f"report written to {html_url}; {report.diagnosis.verdict}")
    del raw


def _delete(args: argparse.Namespace, api: Any) -> int:
    from stepscope_analyzer.cleanup import CleanupRefused, run_delete

    def read() -> dict[str, Any]:
        return read_session_object(api, args.namespace, args.name)

    try:
        run_delete(read, args.uid, _log)
    except CleanupRefused as exc:
        _log(f"nothing deleted: {exc}")
        return 3
    except (JobError, StorageError, ValueError) as exc:
        _log(f"delete failed: {exc}")
        return 1
    return 0


def job_main(argv: list[str]) -> int:
    args = job_parser().parse_args(argv)
    try:
        api = custom_objects_api()
    except Exception as exc:
        _log(f"no Kubernetes access: {exc}")
        return 2
    if args.mode == "delete":
        return _delete(args, api)
    try:
        _run(args, api)
    except (JobError, StorageError, ValueError) as exc:
        _log(f"failed: {exc}")
        if args.mode != "map":
            try:
                patch_status(api, args.namespace, args.name, ok=False, message=f"analysis failed: {exc}")
            except Exception as patch_exc:
                _log(f"could not record the failure in the status either: {patch_exc}")
        return 1
    return 0
