"""Reading the sampled Python stacks of a few ranks (the named ones and their peers), each file within the
contract's byte bound (stepscope_contract.python_stacks.MAX_FILE_BYTES, refused beyond it). A file that cannot be
read or parsed becomes a rank error, never an exception."""

from __future__ import annotations

from stepscope_analyzer.analyses.folded_stacks import FoldedStacks, FoldedStacksError, read_folded
from stepscope_analyzer.ranks.discovery import Layout
from stepscope_analyzer.ranks.storage_io import StorageError, Store
from stepscope_contract.python_stacks import MAX_FILE_BYTES
from stepscope_contract.report import RankError


def load_python_stacks(
    store: Store, layout: Layout, ranks: list[int]
) -> tuple[dict[int, FoldedStacks], list[RankError]]:
    """The stacks of those of `ranks` that have a file, and an error per file refused."""
    keys = {i.rank: i.python_stacks_key for i in layout.inputs if i.rank is not None and i.python_stacks_key}
    out: dict[int, FoldedStacks] = {}
    errors: list[RankError] = []
    for rank in ranks:
        key = keys.get(rank)
        if key is None:
            continue
        try:
            out[rank] = read_folded(store.read(key, most=MAX_FILE_BYTES))
        except (StorageError, FoldedStacksError) as exc:
            errors.append(RankError(rank=rank, source=key, message=f"python stacks unreadable: {str(exc)[:300]}"))
    return out, errors
