import re

import pytest

from stepscope_contract.storage import (
    GPU_METRICS_FILE,
    MANIFEST_FILE,
    MAX_SEGMENT,
    STACKS_FILE,
    TRACE_FILE,
    FetchLayout,
    Scheme,
    StorageUriError,
    fetch_path,
    parse_storage_uri,
    rank_artifact,
    rank_artifact_key,
    rank_from_key,
    rank_location,
    relative_link,
    report_location,
    sanitize_segment,
    session_location,
    summary_key,
    traces_location,
)

pytestmark = pytest.mark.unit


def test_parse_s3_oss_file() -> None:
    s3 = parse_storage_uri("s3://bucket/a/b/")
    assert (s3.scheme, s3.bucket, s3.prefix) == (Scheme.S3, "bucket", "a/b")
    oss = parse_storage_uri("oss://bkt")
    assert (oss.scheme, oss.bucket, oss.prefix) == (Scheme.OSS, "bkt", "")
    local = parse_storage_uri("file:///tmp//x/")
    assert (local.scheme, local.prefix) == (Scheme.FILE, "/tmp/x")


@pytest.mark.parametrize(
    "uri", ["http://x/y", "bucket/key", "s3:///key", "s3://b/../x", "file://rel/x", "file:///a/../b"]
)
def test_rejected_uris(uri: str) -> None:
    with pytest.raises(StorageUriError):
        parse_storage_uri(uri)


SESSION = session_location(parse_storage_uri("s3://bucket/prefix"), "ml", "run-1", "1234abcd-5678-90ef")
ROOT = "prefix/ml/run-1-1234abcd"


def test_layout_matches_design() -> None:
    assert SESSION.uri == "s3://bucket/prefix/ml/run-1-1234abcd"
    assert rank_artifact_key(SESSION, 3, TRACE_FILE) == f"{ROOT}/traces/rank3.pt.trace.json.gz"
    assert rank_artifact_key(SESSION, 3, MANIFEST_FILE) == f"{ROOT}/traces/rank3/manifest.json"
    assert rank_artifact_key(SESSION, 3, STACKS_FILE) == f"{ROOT}/traces/rank3/stacks.txt"
    assert traces_location(SESSION).uri == f"s3://bucket/{ROOT}/traces"
    assert report_location(SESSION).key("report.html") == f"{ROOT}/report/report.html"
    assert summary_key(SESSION, 3) == f"{ROOT}/summaries/rank-3.json"


def test_the_traces_folder_holds_only_traces() -> None:
    """HTA takes every *.json and *.gz file directly in trace_dir as a trace; TensorBoard's profiler plugin takes the
    *.pt.trace.json[.gz] files of a folder as one run's workers (named by what comes before `.pt.trace.json`, a
    `.<digits>` span suffix aside). So: in traces/ only traces, named rank<R>.pt.trace.json.gz."""
    folder = traces_location(SESSION).prefix + "/"
    worker = re.compile(r"^rank\d+\.pt\.trace\.json\.gz$")
    for rank in (0, 7, 1023):
        for artifact in (TRACE_FILE, MANIFEST_FILE, STACKS_FILE, GPU_METRICS_FILE):
            rest = rank_artifact_key(SESSION, rank, artifact)[len(folder) :]
            if "/" not in rest:  # directly in traces/
                assert artifact == TRACE_FILE and worker.match(rest) and rest.startswith(f"rank{rank}."), rest


@pytest.mark.parametrize(
    ("key", "found"),
    [
        (f"{ROOT}/traces/rank12.pt.trace.json.gz", (12, TRACE_FILE)),
        (f"{ROOT}/traces/rank12/manifest.json", (12, MANIFEST_FILE)),
        (f"{ROOT}/traces/rank0/gpu_metrics.jsonl.gz", (0, GPU_METRICS_FILE)),
        (f"{ROOT}/ranks/12/trace.pt.trace.json.gz", (12, TRACE_FILE)),  # the first layout
        (f"{ROOT}/ranks/12/manifest.json", (12, MANIFEST_FILE)),
        (f"{ROOT}/ranks/012/manifest.json", None),  # one spelling per rank
        (f"{ROOT}/traces/rank012.pt.trace.json.gz", None),
        (f"{ROOT}/traces/rank12/trace.pt.trace.json.gz", None),
        (f"{ROOT}/traces/rank12/other.txt", None),
        (f"{ROOT}/traces/rank12/x/manifest.json", None),
        (f"{ROOT}/traces/rank-1.pt.trace.json.gz", None),
        (f"{ROOT}/report/report.json", None),
        (f"{ROOT}/summaries/rank-1.json", None),
        ("prefix/ml/other/ranks/12/manifest.json", None),
        (f"{ROOT}-x/traces/rank1.pt.trace.json.gz", None),
    ],
)
def test_rank_artifacts_in_both_layouts(key: str, found: tuple[int, str] | None) -> None:
    assert rank_artifact(SESSION, key) == found
    assert rank_from_key(SESSION, key) == (found[0] if found else None)


def test_the_first_layout_is_still_addressable() -> None:
    assert rank_location(SESSION, 3).key(TRACE_FILE) == f"{ROOT}/ranks/3/trace.pt.trace.json.gz"


@pytest.mark.parametrize(
    ("key", "session", "hta", "tensorboard"),
    [
        (f"{ROOT}/traces/rank3.pt.trace.json.gz", "traces/rank3.pt.trace.json.gz", "rank3.pt.trace.json.gz",
         "run-1-1234abcd/rank3.pt.trace.json.gz"),
        (f"{ROOT}/ranks/3/trace.pt.trace.json.gz", "ranks/3/trace.pt.trace.json.gz", "rank3.pt.trace.json.gz",
         "run-1-1234abcd/rank3.pt.trace.json.gz"),
        (f"{ROOT}/traces/rank3/manifest.json", "traces/rank3/manifest.json", None, None),
        (f"{ROOT}/report/report.html", "report/report.html", None, None),
        ("prefix/ml/elsewhere/x.json", None, None, None),
        (f"{ROOT}/a/../../../etc/passwd", None, None, None),
    ],
)  # fmt: skip
def test_fetch_paths_per_layout(key: str, session: str | None, hta: str | None, tensorboard: str | None) -> None:
    assert fetch_path(SESSION, key, FetchLayout.SESSION) == session
    assert fetch_path(SESSION, key, FetchLayout.HTA) == hta
    assert fetch_path(SESSION, key, FetchLayout.TENSORBOARD) == tensorboard


@pytest.mark.parametrize("hostile", ["..", ".", "../../etc", "a/b", "/abs", "x\x00y", "ünï", "." * 5, ""])
def test_no_traversal_from_names(hostile: str) -> None:
    seg = sanitize_segment(hostile)
    assert "/" not in seg and seg not in ("", ".", "..") and not seg.startswith(".")
    base = parse_storage_uri("file:///data/root")
    loc = session_location(base, hostile, hostile, "uid")
    assert loc.prefix.startswith("/data/root/")
    assert ".." not in loc.prefix.split("/")


def test_distinct_names_stay_distinct_and_bounded() -> None:
    assert sanitize_segment("a/b") != sanitize_segment("a_b")
    long = sanitize_segment("x" * 500)
    assert len(long) <= MAX_SEGMENT
    assert long != sanitize_segment("x" * 499)
    assert sanitize_segment("train-pod-0") == "train-pod-0"


def test_negative_rank_rejected() -> None:
    with pytest.raises(ValueError, match="rank"):
        rank_location(parse_storage_uri("s3://b/p"), -1)
    with pytest.raises(ValueError, match="rank"):
        rank_artifact_key(parse_storage_uri("s3://b/p"), -1, TRACE_FILE)


def test_relative_links_follow_the_layout() -> None:
    session = session_location(parse_storage_uri("s3://bucket/prefix"), "ml", "run-1", "1234abcd")
    trace = f"s3://bucket/{rank_artifact_key(session, 3, TRACE_FILE)}"
    assert relative_link(report_location(session), trace) == "../traces/rank3.pt.trace.json.gz"
    legacy = f"s3://bucket/{rank_location(session, 3).key(TRACE_FILE)}"
    assert relative_link(report_location(session), legacy) == "../ranks/3/trace.pt.trace.json.gz"
    assert relative_link(report_location(session), "s3://other-bucket/x/trace.json") is None
    assert relative_link(report_location(session), "oss://bucket/prefix/x.json") is None
    assert relative_link(report_location(session), "not a uri") is None
    out = parse_storage_uri("file:///tmp/out")
    assert relative_link(out, "file:///data/traces/rank0.json.gz") == "../../data/traces/rank0.json.gz"
    assert relative_link(out, "file:///tmp/out/rank0.json") == "./rank0.json"


def test_relative_links_cannot_carry_a_scheme_or_markup() -> None:
    out = parse_storage_uri("file:///tmp/out")
    link = relative_link(out, 'file:///tmp/out/javascript:alert(1)"><b>.json')
    assert link is not None and link.startswith("./") and ":" not in link and '"' not in link and "<" not in link
