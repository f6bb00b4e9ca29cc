import pytest

from stepscope_contract.storage import (
    MAX_SEGMENT,
    Scheme,
    StorageUriError,
    parse_storage_uri,
    rank_from_key,
    rank_location,
    relative_link,
    report_location,
    sanitize_segment,
    session_location,
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


def test_layout_matches_design() -> None:
    base = parse_storage_uri("s3://bucket/prefix")
    session = session_location(base, "ml", "run-1", "1234abcd-5678-90ef")
    assert session.uri == "s3://bucket/prefix/ml/run-1-1234abcd"
    assert rank_location(session, 3).key("trace.pt.trace.json.gz") == (
        "prefix/ml/run-1-1234abcd/ranks/3/trace.pt.trace.json.gz"
    )
    assert report_location(session).key("report.html") == "prefix/ml/run-1-1234abcd/report/report.html"
    assert rank_from_key(session, "prefix/ml/run-1-1234abcd/ranks/12/manifest.json") == 12
    assert rank_from_key(session, "prefix/ml/other/ranks/12/manifest.json") is None


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


def test_relative_links_follow_the_layout() -> None:
    session = session_location(parse_storage_uri("s3://bucket/prefix"), "ml", "run-1", "1234abcd")
    trace = f"s3://bucket/{rank_location(session, 3).key('trace.pt.trace.json.gz')}"
    assert relative_link(report_location(session), trace) == "../ranks/3/trace.pt.trace.json.gz"
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
