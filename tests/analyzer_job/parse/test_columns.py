"""Row masks by id (categories, names): the same rows as numpy.isin, by comparisons for a few ids and by a table
lookup for many."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope_analyzer.parse.columns import FEW_IDS, id_mask

pytestmark = pytest.mark.unit


def test_id_masks_match_isin_for_few_and_many_ids() -> None:
    rng = np.random.default_rng(2)
    column = rng.integers(0, 40, 5000).astype(np.int32)
    for ids in ([], [3], [0, 39], list(range(FEW_IDS)), list(range(0, 40, 3)), [5, 5, -1, 40, 99]):
        expected = np.isin(column, [i for i in ids if 0 <= i < 40])
        assert np.array_equal(id_mask(column, ids, 40), expected), ids
