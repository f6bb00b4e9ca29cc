"""The traces one click away: each rank's trace as a link relative to report.html, and how to open the traces in
Perfetto, TensorBoard and HTA. Pure.

Links are computed from the traces' URIs (found through the contract's layout functions) and the report's folder
(report_location), with stepscope_contract.storage.relative_link: they work when the session folder is
downloaded, and follow the layout if it changes.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from stepscope_contract.report import Report
from stepscope_contract.storage import StorageLocation, relative_link


def with_trace_links(report: Report, report_dir: StorageLocation) -> Report:
    """The report with `trace_link` (and the stacks' and Flight Recorder dump's links) set on every rank whose
    files lie in the report's bucket (or file system)."""

    def link(uri: str | None) -> str | None:
        return relative_link(report_dir, uri) if uri else None

    ranks = [
        r.model_copy(
            update={
                "trace_link": link(r.trace_uri),
                "stacks_link": link(r.stacks_uri),
                "flight_recorder_link": link(r.flight_recorder_uri),
            }
        )
        for r in report.ranks
    ]
    return report.model_copy(update={"ranks": ranks})


@dataclass(frozen=True)
class TraceAccess:
    """What the report says about opening the traces; commands run in the folder of report.html."""

    linked: int
    total: int
    example: str | None
    """one rank's link, for the Perfetto line"""
    gather: str | None
    """shell command that copies every trace into ./traces/ with the rank in its name (TensorBoard and HTA read one
    folder of *.pt.trace.json.gz); None when the traces already share one folder"""
    folder: str | None
    """the folder of traces HTA reads"""

    @property
    def logdir(self) -> str | None:
        """TensorBoard's --logdir: the folder above `folder` (the profiler plugin shows each sub-folder as a run)."""
        if self.folder is None:
            return None
        return posixpath.dirname(self.folder.rstrip("/")) or "."


def _rank_folder_pattern(links: dict[int, str]) -> str | None:
    """'../ranks/*/trace.pt.trace.json.gz' when every trace sits in a folder named for its rank, with one name."""
    names = {posixpath.basename(link) for link in links.values()}
    parents = {posixpath.dirname(posixpath.dirname(link)) for link in links.values()}
    named_for_rank = all(posixpath.basename(posixpath.dirname(link)) == str(r) for r, link in links.items())
    if len(names) != 1 or len(parents) != 1 or not named_for_rank:
        return None
    return posixpath.join(parents.pop(), "*", names.pop())


def trace_access(report: Report) -> TraceAccess:
    links = {r.rank: r.trace_link for r in report.ranks if r.trace_link}
    total = sum(1 for r in report.ranks if r.trace_uri)
    if not links:
        return TraceAccess(linked=0, total=total, example=None, gather=None, folder=None)
    example = links[min(links)]
    folders = {posixpath.dirname(link) for link in links.values()}
    if len(folders) == 1:
        return TraceAccess(len(links), total, example, gather=None, folder=folders.pop() or ".")
    pattern = _rank_folder_pattern(links)
    if pattern is None:
        return TraceAccess(len(links), total, example, gather=None, folder=None)
    gather = (
        f'mkdir -p traces && for f in {pattern}; do r=$(basename "$(dirname "$f")"); '
        f'cp "$f" "traces/rank$r.pt.trace.json.gz"; done'
    )
    return TraceAccess(len(links), total, example, gather=gather, folder="traces")
