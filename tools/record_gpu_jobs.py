"""Record real GPU jobs for the test fixtures: gloo DDP trainings on a machine's first GPU, captured by stepscope's
own hook (CUDA activity included) with NVML samples taken by the sidecar's sampler, laid out as a session folder
(`ranks/<rank>/{trace.pt.trace.json.gz, manifest.json, gpu_metrics.jsonl.gz}` plus truth.json).

Runs where a GPU is (it needs torch with CUDA and nvidia-ml-py); each job's folder is packed as OUT/<job>.tar.gz.
Usage: PYTHONPATH=testing:sidecar python tools/record_gpu_jobs.py OUT [JOB ...]
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

from stepscope_sidecar.nvml import Sampler, write_records
from stepscope_testing.gloo_jobs import GlooJob, run_job

GPU_METRICS_FILE = "gpu_metrics.jsonl.gz"
JOBS = {
    "gpu-2r-balanced": GlooJob(name="gpu-2r-balanced", world=2, model="cnn", capture="hook", device="cuda"),
    "gpu-2r-compute": GlooJob(
        name="gpu-2r-compute",
        world=2,
        model="cnn",
        fault="compute",
        slow_ranks=(1,),
        amount=2.0,
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-python": GlooJob(
        name="gpu-4r-python",
        world=4,
        model="cnn",
        fault="python",
        slow_ranks=(2,),
        amount=40.0,
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-balanced": GlooJob(name="gpu-4r-balanced", world=4, model="cnn", capture="hook", device="cuda"),
    "gpu-4r-compute": GlooJob(
        name="gpu-4r-compute",
        world=4,
        model="cnn",
        fault="compute",
        slow_ranks=(3,),
        amount=2.0,
        capture="hook",
        device="cuda",
    ),
    "gpu-2r-transformer": GlooJob(
        name="gpu-2r-transformer", world=2, model="transformer", batch=64, capture="hook", device="cuda"
    ),
    "gpu-2r-profiler": GlooJob(name="gpu-2r-profiler", world=2, model="cnn", capture="profiler", device="cuda"),
    "gpu-8r-balanced": GlooJob(name="gpu-8r-balanced", world=8, model="cnn", capture="hook", device="cuda"),
    "gpu-8r-compute": GlooJob(
        name="gpu-8r-compute",
        world=8,
        model="cnn",
        fault="compute",
        slow_ranks=(5,),
        amount=2.0,
        capture="hook",
        device="cuda",
    ),
    "gpu-2r-sleep": GlooJob(
        name="gpu-2r-sleep",
        world=2,
        model="cnn",
        fault="sleep_log",
        slow_ranks=(0,),
        amount=30.0,
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-collate": GlooJob(
        name="gpu-4r-collate",
        world=4,
        model="loader",
        fault="collate",
        slow_ranks=(1,),
        amount=40.0,
        batch=64,
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-periodic": GlooJob(
        name="gpu-4r-periodic",
        world=4,
        model="cnn",
        fault="periodic",
        slow_ranks=(1,),
        amount=200.0,
        period=3,
        capture="hook",
        device="cuda",
    ),
    "gpu-2r-hang": GlooJob(
        name="gpu-2r-hang",
        world=2,
        model="cnn",
        fault="hang_collective",
        slow_ranks=(1,),
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-balanced-seed1": GlooJob(
        name="gpu-4r-balanced-seed1", world=4, model="cnn", seed=1, capture="hook", device="cuda"
    ),
    "gpu-4r-transformer": GlooJob(
        name="gpu-4r-transformer", world=4, model="transformer", batch=64, capture="hook", device="cuda"
    ),
    "gpu-2r-loader": GlooJob(name="gpu-2r-loader", world=2, model="loader", batch=64, capture="hook", device="cuda"),
    "gpu-2r-accum": GlooJob(name="gpu-2r-accum", world=2, model="accum", capture="hook", device="cuda"),
    "gpu-8r-balanced-seed1": GlooJob(
        name="gpu-8r-balanced-seed1", world=8, model="cnn", seed=1, capture="hook", device="cuda"
    ),
    "gpu-4r-mlp": GlooJob(name="gpu-4r-mlp", world=4, model="mlp", batch=512, capture="hook", device="cuda"),
    "gpu-4r-compute-1.3x": GlooJob(
        name="gpu-4r-compute-1.3x",
        world=4,
        model="cnn",
        fault="compute",
        slow_ranks=(2,),
        amount=1.3,
        capture="hook",
        device="cuda",
    ),
    "gpu-4r-copies": GlooJob(
        name="gpu-4r-copies",
        world=4,
        model="cnn",
        fault="copies",
        slow_ranks=(1,),
        amount=4,
        capture="hook",
        device="cuda",
    ),
    "gpu-2r-copies": GlooJob(
        name="gpu-2r-copies",
        world=2,
        model="cnn",
        fault="copies",
        slow_ranks=(0,),
        amount=4,
        capture="hook",
        device="cuda",
    ),
    "gpu-2r-balanced-seed1": GlooJob(
        name="gpu-2r-balanced-seed1", world=2, model="cnn", seed=1, capture="hook", device="cuda"
    ),
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
