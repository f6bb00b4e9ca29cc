"""One pod running two ranks (torchrun --nproc-per-node 2) beside one sidecar: every rank is uploaded."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sidecar_harness import HERE, Procs, base_env, capture_body, start_sidecar, stored_path, wait_for

from stepscope_contract.manifest import RankManifest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_a_pod_with_two_ranks_uploads_both(procs: Procs, workdir: Path, hook_path: Path, token_file: Path) -> None:
    control = workdir / "control-multi"
    control.mkdir()
    store = workdir / "store-multi"
    sc = start_sidecar(procs, workdir, token_file, "multi", bases=f"file://{store}")
    env = base_env() | {
        "PYTHONPATH": str(hook_path),
        "STEPSCOPE_HOOK_DIR": str(sc.hook_dir),
        "TRAIN_CONTROL_DIR": str(control),
    }
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    procs.start([*args, str(HERE / "train_explicit.py")], env, workdir / "train-multi.log")
    try:
        wait_for(lambda: sc.call("GET", "/v1/status")[1].get("hookRanks") == [0, 1], 240, "both hooks")
        body = capture_body("two-ranks", f"file://{store}/team-a/resnet-01234567", steps=2, skipSteps=0)
        assert sc.call("POST", "/v1/captures", body)[0] == 202
        final = sc.wait_terminal("two-ranks", 240)
        assert final["state"] == "uploaded" and final["ranks"] == [0, 1], final
        assert sorted(a["rank"] for a in final["artifacts"] if a["uri"].endswith("manifest.json")) == [0, 1]
        for rank in (0, 1):
            session = store / "team-a" / "resnet-01234567"
            manifest = RankManifest.model_validate_json(stored_path(session, rank, "manifest.json").read_bytes())
            assert manifest.meta is not None and manifest.meta.rank == rank and manifest.meta.local_rank == rank
            assert manifest.meta.world_size == 2 and stored_path(session, rank, "trace.pt.trace.json.gz").is_file()
    finally:
        (control / "stop").write_text("")
