"""What-if replay of a data-parallel job's steps: the step time if a slow rank (or every slow rank) ran like its
peers. Pure.

Every rank runs its own work of a step (the step's phases less its wait on collectives) and then joins the
others in the step's gradient collective, so a replayed step lasts as long as its slowest rank's work. A slow
rank running like its peers takes, each step, the median of the other ranks' work that step. As in
diagnosis.replay, the what-if is read as a difference: the recorded step less the mean replayed saving.
"""

from __future__ import annotations

import numpy as np

from stepscope_contract.report import RankReport, StepPhases, WhatIf


def _work(p: StepPhases) -> float:
    return p.data_loading + p.forward + p.backward + p.optimizer + p.other


def dp_what_ifs(ranks: list[RankReport], slow: list[int], step_us: float) -> list[WhatIf]:
    """A `like_peers` what-if for each slow rank and, with several, `slow_like_peers` for all of them at once,
    where every rank has the same recorded steps."""
    counts = {len(r.step_phases) for r in ranks}
    if len(counts) != 1 or 0 in counts or len(ranks) < 2 or step_us <= 0:
        return []
    work = {r.rank: [_work(p) for p in r.step_phases] for r in ranks}
    steps = counts.pop()
    chosen = [s for s in slow if s in work]
    groups = [(("like_peers", [rank])) for rank in chosen]
    if len(chosen) > 1:
        groups.append(("slow_like_peers", chosen))
    out = []
    for kind, changed in groups:
        saved = []
        for t in range(steps):
            now = {r: w[t] for r, w in work.items()}
            like = float(np.median([w for r, w in now.items() if r not in changed] or list(now.values())))
            saved.append(max(now.values()) - max({**now, **dict.fromkeys(changed, like)}.values()))
        after = max(step_us - float(np.mean(saved)), 0.0)
        out.append(
            WhatIf(
                kind=kind,
                change=ran_like_peers(changed),
                step_us=round(after, 1),
                gain_us=round(step_us - after, 1),
                speedup=round(step_us / after, 3) if after > 0 else None,
            )
        )
    return out


def ran_like_peers(ranks: list[int]) -> str:
    """'rank 3 ran like its peers', 'ranks 3 and 7 ran like their peers'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]} ran like its peers"
    names = ", ".join(str(r) for r in ranks[:-1])
    return f"ranks {names} and {ranks[-1]} ran like their peers"
