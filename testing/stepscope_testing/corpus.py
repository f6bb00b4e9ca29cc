"""The diagnosis' scenario corpus: real gloo jobs on CPU and multi-rank GPU jobs derived from real Kineto traces, each
with its truth. bench/diagnosis_accuracy.py generates them (cached), analyses each folder as a user would and scores
the verdicts.

Built to resemble real jobs, not the detector: balanced jobs and jobs where every rank got uniformly slower (several
runs each, 2 to 16 ranks, to measure false alarms), compute stragglers from 20% to 2x, host stalls with and without
annotations (collate_fn, plain Python, time.sleep in logging, GC pressure, a user's own region), two stragglers at
once, GPU jobs (balanced, uniform, a ~7% compute straggler, host stalls, one rank's memory copies 3-4x slower), a
transformer on sequences whose length varies from step to step (healthy, a 2x-batch rank, a Python stall; recorded
with and without input shapes), and hangs (one rank stuck in data loading, one in a different collective) whose
verdict the hang diagnosis owns. Pipeline-parallel jobs (torch.distributed.pipelining, 1F1B over gloo; pp2 x dp2 and
pp4 x dp2, their groups named as torchtitan and Megatron name them or not at all): healthy, a slow worker, a heavy
last stage, sequence lengths that vary per microbatch; and 3D GPU jobs (pipeline x data x tensor parallel, NCCL
traces from a 1F1B timing model): healthy, a slow GPU (its last-stage peers waiting in the collective or on the
host), a heavy stage, varying sequence lengths, a TP-group straggler, too few microbatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope_testing.fsdp_jobs import FsdpJob
from stepscope_testing.fsdp_jobs import run_job as run_fsdp
from stepscope_testing.gloo_jobs import GlooJob, run_job
from stepscope_testing.gpu_jobs import GpuJob, write_job
from stepscope_testing.gpu_moe_jobs import GpuMoeJob
from stepscope_testing.gpu_moe_jobs import write_job as write_gpu_moe
from stepscope_testing.gpu_pipeline_jobs import GpuPipeJob
from stepscope_testing.gpu_pipeline_jobs import write_job as write_gpu_pipeline
from stepscope_testing.pipeline_jobs import PipeJob
from stepscope_testing.pipeline_jobs import run_job as run_pipeline

HTA_TRACES = Path(__file__).resolve().parents[2] / "tests" / "analyzer_job" / "fixtures" / "hta"
"""where the GPU scenarios' source traces are read (HTA's public test data, committed with the tests);
bench/diagnosis_accuracy.py --traces points it at a folder of the full traces"""
QUIET = (3.0, 600.0)
"""before each real gloo job: wait up to 10 minutes for a 1-minute load average of at most 3 (the machine is
shared; the load it ran under is recorded in truth.json)"""
PIPE_QUIET = (4.0, 120.0)
"""pipeline jobs are short: wait up to 2 minutes for a load average of at most 4"""
GPU_SOURCES = {
    "ddp": "nccl_2rank_rank0.json.gz",  # DDP CNN on A100s, all-reduce
    "dlrm": "nccl_8rank_rank3.json.gz",  # recommendation model: all-to-all + all-reduce
}


@dataclass(frozen=True)
class Scenario:
    name: str
    group: str
    job: GlooJob | GpuJob | PipeJob | GpuPipeJob | GpuMoeJob | FsdpJob

    @property
    def truth(self) -> dict[str, Any]:
        return self.job.truth()

    @property
    def is_hang(self) -> bool:
        return isinstance(self.job, GlooJob) and self.job.fault.startswith("hang")

    @property
    def balanced(self) -> bool:
        return self.truth.get("kind") == "balanced"

    def generate(self, out: Path) -> Path:
        if isinstance(self.job, PipeJob):
            return run_pipeline(self.job, out, quiet=PIPE_QUIET)
        if isinstance(self.job, GpuPipeJob):
            return write_gpu_pipeline(self.job, out)
        if isinstance(self.job, GpuMoeJob):
            return write_gpu_moe(self.job, out)
        if isinstance(self.job, FsdpJob):
            return run_fsdp(self.job, out, quiet=PIPE_QUIET)
        if isinstance(self.job, GlooJob):
            return run_job(self.job, out, timeout_s=240.0 if self.is_hang else 900.0, quiet=QUIET)
        return write_job(self.job, out)


def _gloo(group: str, name: str, world: int, **kw: Any) -> Scenario:
    return Scenario(name, group, GlooJob(name=name, world=world, **kw))


def _transformer(group: str, name: str, world: int, **kw: Any) -> Scenario:
    """A gloo job of the transformer model (sequence lengths drawn per rank and step), batches of 16."""
    return _gloo(group, name, world, model="transformer", batch=16, **kw)


def _gpu(group: str, name: str, source: str, world: int, **kw: Any) -> Scenario:
    return Scenario(name, group, GpuJob(name=name, source=str(HTA_TRACES / GPU_SOURCES[source]), world=world, **kw))


def balanced() -> list[Scenario]:
    out = [_gloo("balanced", f"cpu-balanced-2r-mlp-{s}", 2, seed=s) for s in range(3)]
    out += [_gloo("balanced", f"cpu-balanced-2r-loader-{s}", 2, model="loader", seed=s) for s in range(2)]
    out += [_gloo("balanced", f"cpu-balanced-4r-mlp-{s}", 4, seed=s) for s in range(4)]
    out += [_gloo("balanced", f"cpu-balanced-4r-loader-{s}", 4, model="loader", seed=s) for s in range(2)]
    out += [_gloo("balanced", "cpu-balanced-4r-cnn", 4, model="cnn", batch=32)]
    out += [_gloo("balanced", "cpu-balanced-4r-accum", 4, model="accum")]
    out += [_gloo("balanced", f"cpu-balanced-4r-hook-{s}", 4, capture="hook", seed=s) for s in range(2)]
    out += [_gloo("balanced", f"cpu-balanced-8r-hook-{s}", 8, capture="hook", seed=s, steps=6) for s in range(2)]
    out += [_gloo("balanced", f"cpu-balanced-8r-mlp-{s}", 8, seed=s, steps=6) for s in range(2)]
    out += [_gloo("balanced", "cpu-balanced-8r-cnn", 8, model="cnn", steps=6, batch=32)]
    out += [_gloo("balanced", f"cpu-balanced-16r-mlp-{s}", 16, seed=s, steps=6, batch=64) for s in range(2)]
    out += [_transformer("balanced", f"cpu-balanced-{w}r-transformer-{s}", w, seed=s, steps=8 if w < 8 else 6)
            for w, s in ((2, 0), (2, 1), (4, 0), (4, 1), (8, 0))]  # fmt: skip
    out += [_transformer("balanced", f"cpu-balanced-{w}r-transformer-shapes-{s}", w, seed=s + 10, shapes=True)
            for w, s in ((2, 0), (4, 0), (4, 1))]  # fmt: skip
    out += [_transformer("balanced", "cpu-balanced-4r-transformer-32-64", 4, seed=30, tokens=(32, 64))]
    out += [_gpu("balanced", f"gpu-balanced-{w}r-{src}-{s}", src, w, seed=s, repeat=2 if src == "ddp" else 1)
            for w, src, s in ((2, "ddp", 0), (2, "ddp", 1), (4, "dlrm", 0), (4, "dlrm", 1), (8, "dlrm", 2),
                              (8, "ddp", 3), (16, "dlrm", 4), (16, "ddp", 5))]  # fmt: skip
    return out


def uniform() -> list[Scenario]:
    return [
        _gloo("uniform", "cpu-uniform-2r-mlp-1.5x", 2, fault="uniform", amount=1.5),
        _gloo("uniform", "cpu-uniform-4r-cnn-1.5x", 4, model="cnn", fault="uniform", amount=1.5, batch=32),
        _gloo("uniform", "cpu-uniform-8r-mlp-2x", 8, fault="uniform", amount=2.0, steps=6),
        _gloo("uniform", "cpu-uniform-16r-mlp-1.5x", 16, fault="uniform", amount=1.5, steps=6, batch=64),
        _gpu("uniform", "gpu-uniform-4r-dlrm-1.3x", "dlrm", 4, scale=dict.fromkeys(range(4), 1.3), seed=7),
        _gpu("uniform", "gpu-uniform-8r-ddp-1.2x", "ddp", 8, scale=dict.fromkeys(range(8), 1.2), repeat=2, seed=8),
    ]


def compute_stragglers() -> list[Scenario]:
    """Real CPU jobs: 2 ranks have a core each; from 4 ranks on, the ranks share 2 cores and the scheduler alone
    makes healthy ranks differ by up to ~1.75x, so the stragglers there do twice the work (a batch twice as large).
    16 ranks on 2 cores (8 per core) are balanced and uniform runs only: there the scheduler's stretches exceed a
    2x straggler's own work. 8 ranks (4 per core) come twice: recorded with plain torch.profiler, where the
    contention is inferred from op calls, and through the hook, which measures each step's wait for a CPU.
    GPU jobs are quiet: 20% to 2x, 2 to 16 ranks."""
    return [
        _gloo("compute", "cpu-compute-2r-mlp-1.5x", 2, fault="compute", slow_ranks=(0,), amount=1.5),
        _gloo("compute", "cpu-compute-2r-mlp-2x", 2, fault="compute", slow_ranks=(1,), amount=2.0),
        _gloo("compute", "cpu-compute-4r-mlp-2x", 4, fault="compute", slow_ranks=(2,), amount=2.0),
        _gloo(
            "compute", "cpu-compute-4r-cnn-2x", 4, model="cnn", fault="compute", slow_ranks=(3,), amount=2.0, batch=32
        ),
        _gloo("compute", "cpu-compute-4r-loader-2x", 4, model="loader", fault="compute", slow_ranks=(0,), amount=2.0),
        *transformer_stragglers(),
        _gloo("compute", "cpu-compute-8r-mlp-2x", 8, fault="compute", slow_ranks=(5,), amount=2.0, steps=6),
        _gloo("compute", "cpu-compute-4r-hook-2x", 4, fault="compute", slow_ranks=(1,), amount=2.0, capture="hook"),
        _gloo(
            "compute",
            "cpu-compute-8r-hook-2x",
            8,
            fault="compute",
            slow_ranks=(5,),
            amount=2.0,
            steps=6,
            capture="hook",
        ),
        _gpu("compute", "gpu-compute-2r-ddp-2x", "ddp", 2, scale={1: 2.0}, repeat=2, seed=11),
        _gpu("compute", "gpu-compute-4r-dlrm-1.2x", "dlrm", 4, scale={2: 1.2}, seed=12),
        _gpu("compute", "gpu-compute-8r-dlrm-1.11x-7pct", "dlrm", 8, scale={6: 1.11}, seed=13),
        _gpu("compute", "gpu-compute-16r-ddp-1.5x", "ddp", 16, scale={12: 1.5}, repeat=2, seed=14),
    ]


def transformer_stragglers() -> list[Scenario]:
    """A 2x-batch rank among ranks whose sequence length varies from step to step (16-64 tokens, or 32-64 as with
    length-bucketed batches), recorded with and without input shapes, over 8 or 24 steps."""
    c = {"fault": "compute", "amount": 2.0}
    return [
        _transformer("compute", "cpu-compute-2r-transformer-2x", 2, slow_ranks=(1,), **c),
        _transformer("compute", "cpu-compute-4r-transformer-2x", 4, slow_ranks=(3,), **c),
        _transformer("compute", "cpu-compute-2r-transformer-shapes-2x", 2, slow_ranks=(0,), shapes=True, seed=20, **c),
        _transformer("compute", "cpu-compute-4r-transformer-shapes-2x", 4, slow_ranks=(2,), shapes=True, seed=21, **c),
        _transformer(
            "compute",
            "cpu-compute-4r-hook-transformer-shapes-2x",
            4,
            slow_ranks=(1,),
            shapes=True,
            capture="hook",
            seed=22,
            **c,
        ),
        _transformer("compute", "cpu-compute-4r-transformer-24steps-2x", 4, slow_ranks=(3,), steps=24, seed=5, **c),
        _transformer(
            "compute", "cpu-compute-4r-transformer-32-64-2x", 4, slow_ranks=(1,), tokens=(32, 64), seed=31, **c
        ),
        _transformer(
            "compute",
            "cpu-compute-4r-transformer-32-64-shapes-2x",
            4,
            slow_ranks=(2,),
            tokens=(32, 64),
            shapes=True,
            seed=32,
            **c,
        ),
    ]


def host_stalls() -> list[Scenario]:
    return [
        _gloo("host", "cpu-host-2r-loader-collate", 2, model="loader", fault="collate", slow_ranks=(0,), amount=25),
        _gloo("host", "cpu-host-4r-loader-collate", 4, model="loader", fault="collate", slow_ranks=(1,), amount=30),
        _gloo("host", "cpu-host-4r-mlp-python", 4, fault="python", slow_ranks=(2,), amount=30),
        _transformer("host", "cpu-host-4r-transformer-python", 4, fault="python", slow_ranks=(1,), amount=40),
        _gloo(
            "host",
            "cpu-host-8r-cnn-python",
            8,
            model="cnn",
            fault="python",
            slow_ranks=(6,),
            amount=40,
            steps=6,
            batch=32,
        ),
        _gloo("host", "cpu-host-2r-mlp-sleep-log", 2, fault="sleep_log", slow_ranks=(0,), amount=8),
        _gloo("host", "cpu-host-4r-mlp-sleep-log", 4, fault="sleep_log", slow_ranks=(3,), amount=30),
        _gloo("host", "cpu-host-8r-mlp-sleep-log", 8, fault="sleep_log", slow_ranks=(3,), amount=40, steps=6),
        _gloo(
            "host",
            "cpu-host-8r-hook-sleep-log",
            8,
            fault="sleep_log",
            slow_ranks=(6,),
            amount=40,
            steps=6,
            capture="hook",
        ),
        _gloo("host", "cpu-host-4r-accum-sleep-log", 4, model="accum", fault="sleep_log", slow_ranks=(0,), amount=25),
        _gloo("host", "cpu-host-4r-mlp-gc", 4, fault="gc", slow_ranks=(1,)),
        _gloo("host", "cpu-host-4r-hook-annotated", 4, fault="annotated", slow_ranks=(2,), amount=30, capture="hook"),
        _gloo("host", "cpu-host-2r-hook-python", 2, fault="python", slow_ranks=(1,), amount=25, capture="hook"),
        _gloo("host", "cpu-host-4r-hook-python", 4, fault="python", slow_ranks=(2,), amount=50, capture="hook"),
        _gpu("host", "gpu-host-4r-dlrm-stall", "dlrm", 4, host_stall_us={1: 8000.0}, seed=21),
        _gpu("host", "gpu-host-8r-ddp-stall", "ddp", 8, host_stall_us={3: 30000.0}, repeat=2, seed=22),
    ]


def memory_stragglers() -> list[Scenario]:
    """GPU ranks whose memory copies alone are slower (pageable host memory, a slower link): cause `memory`."""
    return [
        _gpu("memory", "gpu-memory-4r-dlrm-copies-4x", "dlrm", 4, copy_scale={2: 4.0}, seed=41),
        _gpu("memory", "gpu-memory-8r-dlrm-copies-3x", "dlrm", 8, copy_scale={5: 3.0}, seed=42),
    ]


def intermittent_stalls() -> list[Scenario]:
    """One rank stalls every few steps only (a checkpoint written to slow storage, an evaluation pass in Python, a
    periodic host stall on a GPU rank): its median step is ordinary, the job pays for every stall."""
    return [
        _gloo("intermittent", "cpu-intermittent-2r-mlp-ckpt", 2, fault="periodic", slow_ranks=(1,), amount=100),
        _gloo("intermittent", "cpu-intermittent-4r-mlp-ckpt", 4, fault="periodic", slow_ranks=(2,), amount=150),
        _gloo(
            "intermittent",
            "cpu-intermittent-4r-loader-eval",
            4,
            model="loader",
            fault="periodic_cpu",
            slow_ranks=(0,),
            amount=120,
            period=4,
        ),
        _gloo(
            "intermittent",
            "cpu-intermittent-4r-hook-ckpt",
            4,
            fault="periodic",
            slow_ranks=(1,),
            amount=150,
            capture="hook",
        ),
        _gloo(
            "intermittent", "cpu-intermittent-8r-mlp-ckpt", 8, fault="periodic", slow_ranks=(5,), amount=300, steps=6
        ),
        _gpu(
            "intermittent", "gpu-intermittent-4r-dlrm-stall", "dlrm", 4, host_stall_us={1: 60e3}, stall_every=3, seed=51
        ),
        _gpu(
            "intermittent",
            "gpu-intermittent-8r-ddp-stall",
            "ddp",
            8,
            host_stall_us={6: 200e3},
            stall_every=2,
            repeat=2,
            seed=52,
        ),
    ]


def two_stragglers() -> list[Scenario]:
    return [
        _gloo("two", "cpu-two-4r-mlp-compute", 4, fault="compute", slow_ranks=(1, 3), amount=2.0),
        _gloo(
            "two",
            "cpu-two-8r-loader-collate",
            8,
            model="loader",
            fault="collate",
            slow_ranks=(2, 5),
            amount=40,
            steps=6,
        ),
        _gpu("two", "gpu-two-8r-dlrm-compute", "dlrm", 8, scale={1: 1.25, 6: 1.25}, seed=31),
        _gpu("two", "gpu-two-4r-dlrm-compute-host", "dlrm", 4, scale={0: 1.3}, host_stall_us={3: 12000.0}, seed=32),
        _gpu("two", "gpu-two-4r-dlrm-compute-memory", "dlrm", 4, scale={1: 1.3}, copy_scale={3: 4.0}, seed=33),
    ]


def hangs() -> list[Scenario]:
    return [
        _gloo("hang", "cpu-hang-4r-data", 4, fault="hang_data", slow_ranks=(2,), capture="hook"),
        _gloo("hang", "cpu-hang-4r-collective", 4, fault="hang_collective", slow_ranks=(1,), capture="hook"),
    ]


def held_out() -> list[Scenario]:
    """Jobs generated after the rule on the others' waiting (slow_ranks._flag_late) was set, with seeds no rule was
    tuned on: healthy transformer, mlp and DataLoader jobs at 2-8 ranks, 2x-batch transformer ranks at 2-8 ranks, a
    1.5x one, and a Python stall. They stay in the corpus as the first check of any later rule."""
    c = {"fault": "compute", "amount": 2.0}
    return [
        _transformer("balanced", "cpu-balanced-2r-transformer-40", 2, seed=40),
        _transformer("balanced", "cpu-balanced-2r-transformer-41", 2, seed=41),
        _transformer("balanced", "cpu-balanced-4r-transformer-42", 4, seed=42),
        _transformer("balanced", "cpu-balanced-4r-transformer-43", 4, seed=43),
        _transformer("balanced", "cpu-balanced-4r-transformer-shapes-46", 4, seed=46, shapes=True),
        _transformer("balanced", "cpu-balanced-8r-transformer-45", 8, seed=45, steps=6),
        _transformer("balanced", "cpu-balanced-4r-hook-transformer-47", 4, seed=47, capture="hook"),
        _gloo("balanced", "cpu-balanced-4r-mlp-60", 4, seed=60),
        _gloo("balanced", "cpu-balanced-8r-mlp-61", 8, seed=61, steps=6),
        _gloo("balanced", "cpu-balanced-4r-loader-62", 4, model="loader", seed=62),
        _transformer("compute", "cpu-compute-2r-transformer-2x-50", 2, slow_ranks=(0,), seed=50, **c),
        _transformer("compute", "cpu-compute-4r-transformer-2x-51", 4, slow_ranks=(1,), seed=51, **c),
        _transformer(
            "compute", "cpu-compute-4r-transformer-32-64-2x-52", 4, slow_ranks=(2,), tokens=(32, 64), seed=52, **c
        ),
        _transformer("compute", "cpu-compute-8r-transformer-2x-55", 8, slow_ranks=(6,), seed=55, steps=6, **c),
        _transformer(
            "compute", "cpu-compute-4r-transformer-1.5x-53", 4, slow_ranks=(3,), seed=53, fault="compute", amount=1.5
        ),
        _transformer(
            "host", "cpu-host-4r-transformer-python-54", 4, fault="python", slow_ranks=(1,), amount=40, seed=54
        ),
    ]


def _pipe(group: str, name: str, pp: int, dp: int, **kw: Any) -> Scenario:
    return Scenario(name, group, PipeJob(name=name, pp=pp, dp=dp, **kw))


def pipelines() -> list[Scenario]:
    """Real pipeline-parallel jobs (1F1B, 4 microbatches): healthy (groups named as torchtitan or Megatron name
    them, or unnamed), a worker computing twice as long as its peers, a last stage with twice the layers, sequence
    lengths drawn per microbatch. pp4 with 4 microbatches idles 3/7 of its step in warm-up and cool-down."""
    return [
        _pipe("balanced", "cpu-pp2dp2-balanced-titan", 2, 2, seed=0),
        _pipe("balanced", "cpu-pp2dp2-balanced-megatron", 2, 2, seed=1, names="megatron"),
        _pipe("balanced", "cpu-pp2dp2-balanced-unnamed", 2, 2, seed=2, names="none"),
        _pipe("balanced", "cpu-pp4dp2-balanced-titan", 4, 2, seed=3),
        _pipe("balanced", "cpu-pp4dp2-balanced-unnamed", 4, 2, seed=4, names="none"),
        _pipe("pipeline", "cpu-pp2dp2-slow-worker-2x", 2, 2, fault="slow_worker", slow_rank=2, amount=2, seed=5),
        _pipe(
            "pipeline",
            "cpu-pp2dp2-slow-worker-first-2x",
            2,
            2,
            fault="slow_worker",
            slow_rank=1,
            amount=2,
            seed=6,
            names="megatron",
        ),
        _pipe("pipeline", "cpu-pp4dp2-slow-worker-2x", 4, 2, fault="slow_worker", slow_rank=5, amount=2, seed=7),
        _pipe("pipeline", "cpu-pp2dp2-heavy-stage-2x", 2, 2, fault="heavy_stage", amount=2, seed=8),
        _pipe("pipeline", "cpu-pp4dp2-heavy-stage-2x", 4, 2, fault="heavy_stage", amount=2, seed=9, names="none"),
        _pipe("pipeline", "cpu-pp2dp2-seqlen", 2, 2, fault="seqlen", seed=10),
        _pipe("pipeline", "cpu-pp4dp2-seqlen", 4, 2, fault="seqlen", seed=11),
    ]


def pipelines_held_out() -> list[Scenario]:
    """Real pipeline jobs recorded after the pipeline rules were set, with seeds and shapes no rule was tuned on: a
    healthy pp2 x dp2 and pp4 x dp2, a slow worker on the first stage of pp4, a last stage with 1.75x the layers
    (7 blocks against 4), sequence lengths per microbatch on pp4 with Megatron's names."""
    return [
        _pipe("balanced", "cpu-pp2dp2-balanced-70", 2, 2, seed=70, names="megatron"),
        _pipe("balanced", "cpu-pp4dp2-balanced-71", 4, 2, seed=71),
        _pipe("pipeline", "cpu-pp4dp2-slow-worker-72", 4, 2, fault="slow_worker", slow_rank=1, amount=2, seed=72),
        _pipe("pipeline", "cpu-pp2dp2-heavy-stage-73", 2, 2, fault="heavy_stage", amount=1.75, layers=4, seed=73),
        _pipe("pipeline", "cpu-pp4dp2-seqlen-74", 4, 2, fault="seqlen", seed=74, names="megatron"),
    ]


def _gpu_pipe(group: str, name: str, pp: int, dp: int, **kw: Any) -> Scenario:
    return Scenario(name, group, GpuPipeJob(name=name, pp=pp, dp=dp, **kw))


def gpu_pipelines() -> list[Scenario]:
    """3D GPU jobs (stepscope_testing.gpu_pipeline_jobs), 8 microbatches unless said: healthy at several seeds and
    shapes, a GPU 1.3x slower (with the other replicas' last stage waiting in the collective, or on the host with
    the GPU idle), a last stage with 1.65x the work, microbatches of varying length (+-50%), a TP rank 1.3x slower,
    4 microbatches over 4 stages."""
    return [
        *(_gpu_pipe("balanced", f"gpu-pp4dp2-balanced-{s}", 4, 2, seed=s) for s in range(3)),
        _gpu_pipe("balanced", "gpu-pp2dp8-balanced", 2, 8, seed=3),
        _gpu_pipe("balanced", "gpu-pp2dp2tp2-balanced", 2, 2, tp=2, seed=4),
        _gpu_pipe("pipeline", "gpu-pp4dp4-slow-worker-1.3x", 4, 4, rank_scale={13: 1.3}, seed=5),
        _gpu_pipe(
            "pipeline", "gpu-pp4dp4-slow-worker-host-wait", 4, 4, rank_scale={13: 1.3}, wait_on_host=True, seed=6
        ),
        _gpu_pipe("pipeline", "gpu-pp4dp4-slow-first-stage-1.3x", 4, 4, rank_scale={1: 1.3}, seed=7),
        _gpu_pipe("pipeline", "gpu-pp4dp2-heavy-stage-1.65x", 4, 2, stage_scale={3: 1.65}, seed=8),
        _gpu_pipe("pipeline", "gpu-pp2dp8-seqlen", 2, 8, microbatch_spread=0.5, seed=9),
        _gpu_pipe("pipeline", "gpu-pp2dp2tp2-tp-straggler", 2, 2, tp=2, rank_scale={5: 1.3}, seed=10),
        _gpu_pipe("pipeline", "gpu-pp4dp2-bubble", 4, 2, microbatches=4, seed=11),
    ]


def moe_jobs() -> list[Scenario]:
    """Mixture-of-experts GPU jobs (stepscope_testing.gpu_moe_jobs), 8 ranks of one expert-parallel group: tokens
    routed evenly (healthy, two seeds), a rank holding hot experts (2x the tokens) and one 1.6x, and a GPU 1.3x
    slower with the tokens even (a slow worker, not the routing)."""
    return [
        *(
            Scenario(f"gpu-ep8-moe-balanced-{s}", "balanced", GpuMoeJob(f"gpu-ep8-moe-balanced-{s}", seed=s))
            for s in (0, 1)
        ),
        Scenario(
            "gpu-ep8-moe-hot-experts", "moe", GpuMoeJob("gpu-ep8-moe-hot-experts", token_share={3: 2.0, 6: 1.6}, seed=2)
        ),
        Scenario(
            "gpu-ep8-moe-slow-worker-1.3x",
            "moe",
            GpuMoeJob("gpu-ep8-moe-slow-worker-1.3x", rank_scale={5: 1.3}, seed=3),
        ),
    ]


def fsdp_jobs() -> list[Scenario]:
    """Real FSDP2 jobs (stepscope_testing.fsdp_jobs, `fully_shard` over gloo), 2 and 4 processes: healthy, and one
    rank's blocks over 3x (2 ranks) or 2x (4 ranks) their tokens (a slow worker)."""
    return [
        Scenario("cpu-fsdp2-2r-balanced", "balanced", FsdpJob("cpu-fsdp2-2r-balanced", world=2)),
        Scenario(
            "cpu-fsdp2-2r-slow-worker-3x",
            "stragglers",
            FsdpJob("cpu-fsdp2-2r-slow-worker-3x", world=2, fault="slow_worker", slow_rank=1, amount=3.0),
        ),
        Scenario("cpu-fsdp2-4r-balanced", "balanced", FsdpJob("cpu-fsdp2-4r-balanced", world=4)),
        Scenario(
            "cpu-fsdp2-4r-slow-worker-2x",
            "stragglers",
            FsdpJob("cpu-fsdp2-4r-slow-worker-2x", world=4, fault="slow_worker", slow_rank=2, amount=2.0),
        ),
    ]


def corpus() -> list[Scenario]:
    stragglers = compute_stragglers() + host_stalls() + memory_stragglers() + intermittent_stalls() + two_stragglers()
    pipes = pipelines() + pipelines_held_out() + gpu_pipelines() + moe_jobs() + fsdp_jobs()
    return balanced() + uniform() + stragglers + hangs() + held_out() + pipes
