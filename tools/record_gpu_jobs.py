"""Record real GPU jobs for the test fixtures: gloo DDP trainings on a machine's first GPU, captured by stepscope's
own hook (CUDA activity included) with NVML samples taken by the sidecar's sampler, laid out as a session folder
(`ranks/<rank>/{trace.pt.trace.json.gz, manifest.json, gpu_metrics.jsonl.gz}` plus truth.json).

Runs where a GPU is (it needs torch with CUDA and nvidia-ml-py); each job's folder is packed as OUT/<job>.tar.gz.
Usage: PYTHONPATH=testing:sidecar python tools/record_gpu_jobs.py [--timeout S] OUT [JOB ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import tarfile
import time
import traceback
from pathlib import Path
from typing import Any

from stepscope_sidecar.nvml import Sampler, write_records
from stepscope_testing.gloo_jobs import GlooJob, run_job

GPU_METRICS_FILE = "gpu_metrics.jsonl.gz"  # stepscope_contract.storage names it too; the GPU image has no pydantic


def _job(name: str, world: int, model: str = "cnn", **kw: Any) -> GlooJob:
    """A job on the GPU captured by the hook (`capture` may say otherwise)."""
    return GlooJob(name=name, world=world, model=model, **{"capture": "hook", "device": "cuda", **kw})


JOBS = {
    job.name: job
    for job in (
        _job("gpu-2r-balanced", 2),
        _job("gpu-2r-compute", 2, fault="compute", slow_ranks=(1,), amount=2.0),
        _job("gpu-4r-python", 4, fault="python", slow_ranks=(2,), amount=40.0),
        _job("gpu-4r-balanced", 4),
        _job("gpu-4r-compute", 4, fault="compute", slow_ranks=(3,), amount=2.0),
        _job("gpu-2r-transformer", 2, model="transformer", batch=64),
        _job("gpu-2r-profiler", 2, capture="profiler"),
        _job("gpu-8r-balanced", 8),
        _job("gpu-8r-compute", 8, fault="compute", slow_ranks=(5,), amount=2.0),
        _job("gpu-2r-sleep", 2, fault="sleep_log", slow_ranks=(0,), amount=30.0),
        _job("gpu-4r-collate", 4, model="loader", fault="collate", slow_ranks=(1,), amount=40.0, batch=64),
        _job("gpu-4r-periodic", 4, fault="periodic", slow_ranks=(1,), amount=200.0, period=3),
        _job("gpu-2r-hang", 2, fault="hang_collective", slow_ranks=(1,)),
        _job("gpu-4r-balanced-seed1", 4, seed=1),
        _job("gpu-4r-transformer", 4, model="transformer", batch=64),
        _job("gpu-2r-loader", 2, model="loader", batch=64),
        _job("gpu-2r-accum", 2, model="accum"),
        _job("gpu-8r-balanced-seed1", 8, seed=1),
        _job("gpu-4r-mlp", 4, model="mlp", batch=512),
        _job("gpu-4r-compute-1.3x", 4, fault="compute", slow_ranks=(2,), amount=1.3),
        _job("gpu-4r-copies", 4, fault="copies", slow_ranks=(1,), amount=4),
        _job("gpu-2r-copies", 2, fault="copies", slow_ranks=(0,), amount=4),
        _job("gpu-2r-balanced-seed1", 2, seed=1),
    )
}


def _add_gpu_metrics(folder: Path, sampler: Sampler, since: float) -> None:
    """What each rank's sidecar would have uploaded beside its trace: the samples of the job's window."""
    records = [r for r in sampler.records if float(r.get("t", 0.0)) >= since]
    for manifest_path in sorted(folder.glob("ranks/*/manifest.json")):
        rank_dir = manifest_path.parent
        manifest = json.loads(manifest_path.read_text())
        manifest["gpuMetrics"] = sampler.status
        if records:
            write_records(records, rank_dir / GPU_METRICS_FILE, 0)
            data = (rank_dir / GPU_METRICS_FILE).read_bytes()
            manifest["files"].append(
                {"name": GPU_METRICS_FILE, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            )
        manifest_path.write_text(json.dumps(manifest))


def _environment() -> dict[str, object]:
    import torch

    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("out")
    p.add_argument("jobs", nargs="*", default=list(JOBS))
    p.add_argument("--timeout", type=float, default=150.0, help="seconds per job")
    a = p.parse_args(argv)
    out = Path(a.out)
    work = Path("/tmp/stepscope-gpu-jobs")
    out.mkdir(parents=True, exist_ok=True)
    env = _environment()
    print(json.dumps(env), flush=True)
    failed = 0
    for name in a.jobs:
        job = JOBS[name]
        began = time.time()
        sampler = Sampler(0.05)
        sampler.start()
        try:
            folder = run_job(job, work / name, timeout_s=a.timeout)
        except Exception:
            failed += 1
            print(f"{name}: FAILED after {time.time() - began:.1f} s\n{traceback.format_exc()}", flush=True)
            continue
        finally:
            sampler.stop()
        if job.capture == "hook":
            _add_gpu_metrics(folder, sampler, began)
        truth = json.loads((folder / "truth.json").read_text())
        truth["machine"]["recording"] = env
        (folder / "truth.json").write_text(json.dumps(truth, indent=1))
        with tarfile.open(out / f"{name}.tar.gz", "w:gz") as tar:
            tar.add(folder, arcname=name)
        size = (out / f"{name}.tar.gz").stat().st_size
        print(f"{name}: ok in {time.time() - began:.1f} s, {size} bytes, nvml {sampler.status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
