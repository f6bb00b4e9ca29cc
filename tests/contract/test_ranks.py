import pytest

from stepscope_contract.ranks import RankSetError, format_rank_set, parse_rank_set

pytestmark = pytest.mark.unit


def test_parse_ranges_and_singles() -> None:
    assert parse_rank_set("0-3,12, 7") == frozenset({0, 1, 2, 3, 7, 12})


def test_overlap_is_merged() -> None:
    assert parse_rank_set("0-2,1-3") == frozenset({0, 1, 2, 3})


@pytest.mark.parametrize(
    ("text", "needle"), [("", "empty"), ("3-1", "backwards"), ("a", "'a'"), ("1,,2", "''"), ("99999999", "maximum")]
)
def test_bad_subsets_say_why(text: str, needle: str) -> None:
    with pytest.raises(RankSetError, match=needle):
        parse_rank_set(text)


def test_format_is_inverse() -> None:
    ranks = frozenset({0, 1, 2, 3, 7, 9, 10})
    assert format_rank_set(ranks) == "0-3,7,9-10"
    assert parse_rank_set(format_rank_set(ranks)) == ranks
