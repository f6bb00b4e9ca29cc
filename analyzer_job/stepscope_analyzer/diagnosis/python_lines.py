"""The Python lines behind a host finding: what the named rank runs that its peers do not, from sampled stacks.

Each rank's folded stacks (analyses.folded_stacks) are ms per recorded step. The differential keeps, stack by
stack, what the named rank spends beyond the median of its peers (positive parts only: the time its peers spend
waiting for it in collectives is theirs, not its). Those excesses are summed into a tree of functions (a frame's
function and file; its lines are kept apart inside the node). A function is named when it holds a significant part
of the excess (SHARE of it, at least MIN_SAMPLES samples and one sample per recorded step on average), the rank
spends at least PEER_RATIO times what its peers spend in it, and none of the functions it calls does both: the
deepest functions that account for the excess, each with the line that holds most of it. Frames every rank runs
alike (the training loop, forward, backward) hold no excess and are never named.

One sample per step: a sample is taken when the sampling thread gets the GIL, so a stretch of Python that holds it
shifts the sample to the next point the thread lets it go (at most sys.getswitchinterval() later); such shifted
samples make less than one sample per step at the rates the contract allows up to 1 / switch interval. Pure.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from stepscope_analyzer.analyses.folded_stacks import FoldedStacks, parse_frame
from stepscope_analyzer.diagnosis.stats import median
from stepscope_contract.python_stacks import MAX_FLAME_STACKS, MAX_LINES, FlameStack, PythonLine, PythonProfile
from stepscope_contract.ranks import format_rank_set
from stepscope_contract.report import Cause, Diagnosis, SlowRank

SHARE = 0.1
MIN_SAMPLES = 3
PEER_RATIO = 2.0

_Where = tuple[str, str]


@dataclass
class _Node:
    excess: float = 0.0
    lines: Counter[int] = field(default_factory=Counter)
    heaviest: tuple[float, tuple[str, ...]] = (0.0, ())
    children: dict[_Where, _Node] = field(default_factory=dict)


def differential(
    mine: dict[tuple[str, ...], float], peers: list[dict[tuple[str, ...], float]]
) -> dict[tuple[str, ...], float]:
    """Per stack, what `mine` spends beyond the median of `peers` (positive parts only)."""
    out = {}
    for stack, value in mine.items():
        extra = value - median([p.get(stack, 0.0) for p in peers]) if peers else value
        if extra > 0:
            out[stack] = extra
    return out


def _places(stack: tuple[str, ...]) -> list[tuple[_Where, int, int]]:
    """(function, line, depth) of each frame of `stack`, root first; a comprehension, generator expression or lambda
    counts as the function it is written in (its line is that function's line)."""
    out: list[tuple[_Where, int, int]] = []
    for depth, text in enumerate(stack):
        frame = parse_frame(text)
        if out and frame.function.startswith("<") and frame.function != "<module>" and frame.file == out[-1][0][1]:
            out[-1] = (out[-1][0], frame.line, depth)
        else:
            out.append((frame.where, frame.line, depth))
    return out


def _tree(diff: dict[tuple[str, ...], float]) -> _Node:
    root = _Node()
    for stack, extra in diff.items():
        node = root
        node.excess += extra
        for where, line, depth in _places(stack):
            node = node.children.setdefault(where, _Node())
            node.excess += extra
            node.lines[line] += extra  # type: ignore[assignment]
            if extra > node.heaviest[0]:
                node.heaviest = (extra, stack[: depth + 1])
    return root


def _inclusive(stacks: dict[tuple[str, ...], float]) -> dict[tuple[_Where, ...], float]:
    """Per function path (root first), the ms per step spent there and below."""
    out: dict[tuple[_Where, ...], float] = {}
    for stack, value in stacks.items():
        path: tuple[_Where, ...] = ()
        for where, _, _ in _places(stack):
            path = (*path, where)
            out[path] = out.get(path, 0.0) + value
    return out


@dataclass
class _Search:
    floor: float
    mine: dict[tuple[_Where, ...], float]
    peers: list[dict[tuple[_Where, ...], float]]
    found: list[tuple[tuple[_Where, ...], _Node]] = field(default_factory=list)

    def peer_value(self, path: tuple[_Where, ...]) -> float:
        return median([p.get(path, 0.0) for p in self.peers]) if self.peers else 0.0

    def named(self, path: tuple[_Where, ...], node: _Node) -> bool:
        return node.excess >= self.floor and self.mine.get(path, 0.0) >= PEER_RATIO * self.peer_value(path)

    def walk(self, path: tuple[_Where, ...], node: _Node) -> bool:
        """Whether this node or one below it is named (the deepest ones go to `found`)."""
        below = False
        for where, child in node.children.items():
            if child.excess >= self.floor:
                below = self.walk((*path, where), child) or below
        if below or not path or not self.named(path, node):
            return below
        self.found.append((path, node))
        return True


def python_lines(mine: FoldedStacks, peers: list[FoldedStacks]) -> list[PythonLine]:
    """The deepest functions that account for `mine`'s excess against `peers`, the most first."""
    own = mine.per_step()
    others = [p.per_step() for p in peers]
    root = _tree(differential(own, others))
    floor = max(SHARE * root.excess, max(MIN_SAMPLES, mine.steps) * mine.ms_per_sample_step)
    if root.excess <= 0 or floor <= 0:
        return []
    search = _Search(floor, _inclusive(own), [_inclusive(o) for o in others])
    search.walk((), root)
    out = []
    for path, node in sorted(search.found, key=lambda f: -f[1].excess)[:MAX_LINES]:
        function, file = path[-1]
        stack = node.heaviest[1][: len(node.heaviest[1]) - _anonymous_tail(node.heaviest[1])]
        out.append(
            PythonLine(
                function=function,
                file=file,
                line=node.lines.most_common(1)[0][0],
                ms_per_step=round(search.mine.get(path, 0.0), 3),
                peers_ms_per_step=round(search.peer_value(path), 3),
                excess_ms_per_step=round(node.excess, 3),
                callers=list(reversed(stack[-4:-1])),
            )
        )
    return out


def _anonymous_tail(stack: tuple[str, ...]) -> int:
    """How many innermost frames of `stack` are comprehensions or lambdas (counted as their function)."""
    n = 0
    for text in reversed(stack):
        name = parse_frame(text).function
        if not name.startswith("<") or name == "<module>":
            break
        n += 1
    return n


def _heaviest(stacks: dict[tuple[str, ...], float]) -> list[FlameStack]:
    ranked = sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_FLAME_STACKS]
    return [FlameStack(frames=list(s), ms_per_step=round(v, 4)) for s, v in ranked]


def python_profile(rank: int, mine: FoldedStacks, peers: dict[int, FoldedStacks]) -> PythonProfile:
    """The flame graphs' data: the rank's heaviest stacks and its heaviest positive differences."""
    others = [p.per_step() for p in peers.values()]
    own = mine.per_step()
    return PythonProfile(rank=rank, hz=mine.hz, samples=mine.ticks, peers=format_rank_set(sorted(peers)),
                         stacks=_heaviest(own), differential=_heaviest(differential(own, others)))  # fmt: skip


def host_named(slow: SlowRank) -> bool:
    """A rank whose finding is host work: cause host, or its excess in a host phase."""
    return slow.cause is Cause.HOST or (slow.cause is Cause.COMPUTE and slow.phase == "data_loading")


def peers_of(rank: int, ranks: list[int], slow: set[int], most: int) -> list[int]:
    """Up to `most` ranks that are not slow, the nearest ranks first."""
    return sorted((r for r in ranks if r != rank and r not in slow), key=lambda r: (abs(r - rank), r))[:most]


def with_python_lines(
    diagnosis: Diagnosis, stacks: dict[int, FoldedStacks], peers: dict[int, list[int]]
) -> tuple[Diagnosis, PythonProfile | None]:
    """The diagnosis with each host-named slow rank's Python lines (where its stacks and its peers' are there), and
    the first such rank's profile."""
    profile = None
    slow_ranks = []
    for slow in diagnosis.slow_ranks:
        mine = stacks.get(slow.rank)
        others = {r: stacks[r] for r in peers.get(slow.rank, []) if r in stacks}
        if not host_named(slow) or mine is None or not others:
            slow_ranks.append(slow)
            continue
        lines = python_lines(mine, list(others.values()))
        slow_ranks.append(slow.model_copy(update={"python_lines": lines}))
        if profile is None:
            profile = python_profile(slow.rank, mine, others)
    return diagnosis.model_copy(update={"slow_ranks": slow_ranks}), profile
