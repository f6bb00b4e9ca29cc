"""report.json: the analyzer's output. snake_case, with HTA's column names for the breakdowns."""

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stepscope_contract.empty import new_list
from stepscope_contract.merged_trace import MergedTrace
from stepscope_contract.python_stacks import MAX_LINES, PythonLine, PythonProfile

if TYPE_CHECKING:  # only a method's parameter: the analyzer's workers build reports without the session models
    from stepscope_contract.session import CaptureSpec

REPORT_SCHEMA_VERSION = 1
REPORT_RANKS_IN_FULL = 64
"""report.json holds every rank in full up to this many analysed ranks; past it, the named ranks and their peers"""


class ReportModel(BaseModel):
    """Every report model builds its validator on first use (contract.deferred): a command imports them all and
    validates few, the rank workers' parent builds a rank's ahead of the fork."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Cause(StrEnum):
    COMPUTE = "compute"  # more device/CPU work time than peers for the same step
    HOST = "host"  # host-side gaps: input pipeline, data loading, CPU stalls before work starts
    COMMUNICATION = "communication"  # its collectives are slow themselves (not waiting for a late peer)
    MEMORY = "memory"  # memory copies/sets or allocator work
    HANG = "hang"  # did not reach a step boundary
    STAGE_IMBALANCE = "stage_imbalance"  # a pipeline stage computes more per step than the others (layers badly split)
    PIPELINE_BUBBLE = "pipeline_bubble"  # the stages idle in the schedule's warm-up and cool-down
    DATA_IMBALANCE = "data_imbalance"  # work per step varies with the inputs (sequence lengths), no persistent rank
    TP_STRAGGLER = "tp_straggler"  # one rank of a tensor-parallel group delays its group's collectives
    EXPERT_IMBALANCE = (
        "expert_imbalance"  # MoE: ranks holding hot experts get more tokens, the others wait in all-to-all
    )
    DESYNC = "desync"  # called another collective (op, sizes, group) than its peers at the same point: the job stands
    GPU_THROTTLE = (
        "gpu_throttle"  # a slow rank's GPU runs below its peers' clocks (heat, power): the device, not the work
    )


class RankStatus(StrEnum):
    OK = "ok"
    ERROR = "error"  # the trace could not be analysed; see error
    HUNG = "hung"
    MISSING = "missing"  # expected, but nothing was uploaded


class Evidence(ReportModel):
    metric: str = Field(description="what was compared, e.g. 'compute_time' or a kernel/function name")
    value: float
    baseline: float = Field(description="median of the other ranks")
    unit: str = "us"
    detail: str = ""


class Waiter(ReportModel):
    """A rank that waits for a slow rank, per step, in matched calls."""

    rank: Annotated[int, Field(ge=0)]
    us_per_step: float
    via: str = Field(description="the calls it waits in: 'recv from it', 'allreduce in 3:mesh_dp'")


class SlowRank(ReportModel):
    rank: Annotated[int, Field(ge=0)]
    cause: Cause
    confidence: Annotated[float, Field(ge=0.0, le=1.0)]
    slowdown_pct: float = Field(
        default=0.0,
        description="how much longer the job's steps take because of this rank: excess_us over the step time "
        "without it (median_step_us - excess_us), in %",
    )
    excess_us: float = Field(
        default=0.0,
        description="this rank's own cost per step beyond the median of the other ranks that the job pays for "
        "(at most what the other ranks wait for it), in µs",
    )
    phase: str | None = Field(
        default=None, description="the step phase (a StepPhases key) that holds most of the excess"
    )
    effect_z: float | None = Field(
        default=None,
        description="effect size: the excess over the job's measured step-to-step and rank-to-rank noise "
        "of that cost (robust z)",
    )
    node: str | None = None
    stalled_steps: list[int] | None = Field(
        default=None,
        description="set when the rank stalls intermittently (a few steps far longer, e.g. a checkpoint every few "
        "steps): the steps it stalled in, as indexes (0-based) into its ranks[].steps.durations_us; excess_us is "
        "then its excess averaged over every recorded step",
    )
    stall_us: float | None = Field(default=None, description="one stall's size: its median excess, µs")
    steps_recorded: int | None = Field(default=None, description="the steps compared (set with stalled_steps)")
    evidence: list[Evidence] = Field(default_factory=new_list)
    comparison: list["NameComparison"] = Field(
        default_factory=new_list, description="kernels/ops/functions that differ most from the median of the others"
    )
    waiters: list[Waiter] = Field(
        default_factory=new_list,
        description="the ranks that wait for it directly, from matched calls (diagnosis.waits), most first (<= 8)",
    )
    python_lines: Annotated[list[PythonLine], Field(max_length=MAX_LINES)] = Field(
        default_factory=new_list,
        description="host causes: the Python frames behind the excess, from the sampled stacks against its peers",
    )


class SlowNode(ReportModel):
    node: str
    ranks: list[int]
    cause: Cause


class Hang(ReportModel):
    """A rank that stopped reaching step boundaries: the one holding the job up (culprit) or one waiting for it."""

    rank: Annotated[int, Field(ge=0)]
    last_step: int | None = None
    seconds_since_last_step: float | None = None
    stacks: str = Field(default="", description="Python stacks, the main thread first, stepscope's own thread left out")
    waiting_collective: str | None = Field(
        default=None, description="the collective this rank waits in; None when it is stuck outside a collective"
    )
    culprit: bool = Field(default=False, description="this rank holds the others up (it is in diagnosis.slow_ranks)")
    location: str | None = Field(
        default=None,
        description="the Python line that issued the collective it waits in, or where it is stuck "
        "('train.py:35 in wait_forever')",
    )


class CollectiveCall(ReportModel):
    """One collective as a rank's Flight Recorder recorded it."""

    process_group: str = Field(description="'<name>:<description>', e.g. '0:default_pg'")
    seq: int = Field(description="the collective's sequence number in its process group")
    op: str = Field(description="e.g. all_reduce, broadcast")
    input_sizes: list[list[int]] = Field(default_factory=new_list)
    dtypes: list[str] = Field(default_factory=new_list)
    completed: bool = False
    call_site: str | None = Field(default=None, description="the Python line that issued it ('train.py:52 in step')")


class WavefrontRank(ReportModel):
    """One row of a process group's wavefront table: how far this rank got."""

    rank: Annotated[int, Field(ge=0)]
    state: str = Field(description="waiting (inside the wavefront collective) | behind (never entered it) | no dump")
    last_entered: CollectiveCall | None = None
    last_completed_seq: int | None = None


class CollectiveMismatch(ReportModel):
    """Ranks of one process group that disagree on the collective at one sequence number."""

    process_group: str
    seq: int | None = None
    kind: str = Field(description="op | sizes | dtypes | membership")
    ranks: list[int] = Field(description="the odd ones out")
    message: str = Field(description="e.g. 'rank 2 called broadcast [1024] where ranks 0, 1, 3 called all_reduce [4]'")


class GroupWavefront(ReportModel):
    """A process group in which some ranks wait inside a collective that others never entered."""

    process_group: str
    members: list[int] = Field(default_factory=new_list)
    seq: int = Field(description="sequence number of the collective the waiting ranks are in")
    collective: CollectiveCall | None = Field(default=None, description="what the waiting ranks wait in")
    waiting_ranks: list[int] = Field(default_factory=new_list)
    missing_ranks: list[int] = Field(default_factory=new_list, description="members that never entered it")
    rows: list[WavefrontRank] = Field(default_factory=new_list)


class FlightRecorderFindings(ReportModel):
    """Cross-rank analysis of PyTorch Flight Recorder dumps, aligned per process group by sequence number."""

    ranks: list[int] = Field(default_factory=new_list, description="ranks whose dump was read")
    wavefronts: list[GroupWavefront] = Field(default_factory=new_list)
    mismatches: list[CollectiveMismatch] = Field(default_factory=new_list)
    culprits: list[int] = Field(default_factory=new_list)
    notes: list[str] = Field(default_factory=new_list)


class StepStats(ReportModel):
    count: int = 0
    median_us: float = 0.0
    mean_us: float = 0.0
    min_us: float = 0.0
    max_us: float = 0.0
    spread_pct: float = Field(default=0.0, description="(max - min) / median, in %")
    durations_us: list[float] = Field(default_factory=new_list)
    numbers: list[int] = Field(
        default_factory=new_list,
        description="each recorded step's number (N of its ProfilerStep#N span), parallel to durations_us; empty "
        "when the spans are not numbered",
    )


class IdleBreakdown(ReportModel):
    """GPU idle time of a rank (µs), by what the GPU waited for. Streams merged: the three add up to idle_time."""

    host_wait: float = 0.0
    kernel_wait: float = 0.0
    other: float = 0.0


class StreamIdle(ReportModel):
    """HTA's idle-time breakdown of one GPU stream (µs); CPU-only traces use stream -1 for the training thread."""

    stream: int
    host_wait: float = 0.0
    kernel_wait: float = 0.0
    other: float = 0.0


class StepPhases(ReportModel):
    """Where a step's time goes, in µs (per step). On GPU ranks the phases follow the stream where the work runs.

    The six phases add up to the step's duration (the rank's mean step time for `RankReport.phases`)."""

    data_loading: float = 0.0
    forward: float = 0.0
    backward: float = 0.0
    optimizer: float = 0.0
    communication_wait: float = Field(default=0.0, description="blocked on a collective, not overlapped work")
    other: float = 0.0


class PhaseSpan(ReportModel):
    """A stretch of one step in one phase, in time order: offsets from the step's start, µs."""

    phase: str = Field(description="a StepPhases key")
    start_us: float
    end_us: float
    label: str = Field(default="", description="what runs there: the collective, the user's region")


class TimelineRow(ReportModel):
    """One row of the step timeline: a rank's spans in the timeline's step; a row may stand for a group of ranks
    (a large job's healthy ranks, in groups of similar step time), drawn as its `rank`."""

    rank: int
    ranks: str = Field(default="", description="the ranks the row stands for, as a rank set ('4-19'), when several")
    step_us: float
    spans: list[PhaseSpan] = Field(default_factory=new_list)


class StepTimeline(ReportModel):
    """The job's slowest recorded step, every rank (or group of ranks) a row of its phases in time order."""

    step_index: int = Field(description="index of the step among each rank's recorded steps")
    step_number: int | None = Field(default=None, description="its ProfilerStep#N, where numbered")
    rows: list[TimelineRow] = Field(default_factory=new_list)
    ranks_total: int = Field(default=0, description="the ranks the rows stand for")


class MemoryUsage(ReportModel):
    """The allocator's totals over the recorded steps (torch.profiler's profile_memory `[memory]` events): CUDA
    memory where the trace has CUDA events, else CPU memory."""

    device: str = Field(description="cuda or cpu")
    events: int = Field(default=0, description="allocator events inside the recorded steps")
    peak_allocated_bytes: float = 0.0
    peak_reserved_bytes: float = Field(default=0.0, description="0 on CPU (its allocator reserves nothing apart)")
    t_ms: list[float] = Field(default_factory=new_list, description="ms since the first recorded step's start")
    allocated_bytes: list[float] = Field(
        default_factory=new_list, description="the total allocated at t_ms (the most in each of at most 240 bins)"
    )
    reserved_bytes: list[float] = Field(default_factory=new_list)
    step_starts_ms: list[float] = Field(default_factory=new_list, description="each recorded step's start, ms")


class MetricStats(ReportModel):
    """Mean, least and largest value of one GPU metric over the captured window."""

    mean: float
    min: float
    max: float


class ThrottleShare(ReportModel):
    reason: str = Field(description="key of stepscope_contract.gpu_metrics.THROTTLE_REASONS, e.g. hw_thermal_slowdown")
    label: str = Field(description="the reason in words, e.g. 'thermal slowdown (hardware)'")
    slowdown: bool = Field(description="heat, power or a hardware signal holds the clocks down (not idle/settings)")
    share: Annotated[float, Field(ge=0.0, le=1.0)] = Field(description="share of the window's samples with it set")


class GpuSeries(ReportModel):
    """The samples over the window, thinned to at most GPU_SERIES_POINTS points (for the report's plots)."""

    t_s: list[float] = Field(default_factory=new_list, description="seconds since the window's start")
    sm_clock_mhz: list[float | None] = Field(default_factory=new_list)
    power_w: list[float | None] = Field(default_factory=new_list)
    temperature_c: list[float | None] = Field(default_factory=new_list)


GPU_SERIES_POINTS = 120


class GpuMetrics(ReportModel):
    """NVML samples of the rank's GPU over the captured window (the sidecar's gpu_metrics.jsonl.gz, whose line
    format is documented in stepscope_contract.gpu_metrics). A metric the device does not report is None."""

    gpu: int | None = Field(default=None, description="NVML index of the sampled device")
    name: str | None = None
    samples: int = Field(default=0, description="samples inside the window")
    window_s: float = Field(default=0.0, description="seconds between the first and last sample used")
    sm_clock_mhz: MetricStats | None = None
    sm_clock_max_mhz: float | None = Field(default=None, description="the SM clock the device can reach")
    mem_clock_mhz: MetricStats | None = None
    power_w: MetricStats | None = None
    power_limit_w: float | None = None
    temperature_c: MetricStats | None = None
    utilization_pct: MetricStats | None = Field(default=None, description="NVML GPU utilisation, %")
    memory_utilization_pct: MetricStats | None = None
    memory_used_bytes: MetricStats | None = None
    memory_total_bytes: int | None = None
    throttle: list[ThrottleShare] = Field(
        default_factory=new_list, description="throttle reasons seen, most frequent first"
    )
    series: GpuSeries = Field(default_factory=GpuSeries)


class RankEnvironment(ReportModel):
    """Where and with what a rank ran: the trace's metadata, the rank's manifest and the hook's meta.json."""

    hostname: str | None = None
    torch_version: str | None = None
    python_version: str | None = None
    backend: str | None = Field(default=None, description="torch.distributed backend: nccl, gloo, ...")
    nccl_version: str | None = None
    cuda_runtime_version: str | None = None
    cuda_driver_version: str | None = None
    device_name: str | None = Field(default=None, description="the GPU's name; None on CPU-only ranks")
    window_start: datetime | None = Field(default=None, description="first recorded step's start (trace clock)")
    window_end: datetime | None = Field(default=None, description="last recorded step's end (trace clock)")
    capture_started_at: datetime | None = Field(default=None, description="the sidecar's capture start")
    capture_finished_at: datetime | None = None
    gpu_metrics_status: str | None = Field(default=None, description="the manifest's 'captured' or why not")


class NameComparison(ReportModel):
    """One kernel (GPU) or op/function (CPU) of a slow rank beside the median of the other ranks, per step."""

    name: str
    category: str = Field(description="kernel | memory | cpu_op | python | user_annotation | runtime")
    time_us: float = Field(description="time per step on the slow rank")
    baseline_time_us: float = Field(description="median time per step of the other ranks")
    count: float = Field(description="calls per step on the slow rank")
    baseline_count: float = Field(description="median calls per step of the other ranks")
    ratio: float | None = Field(default=None, description="time_us / baseline_time_us; None when 0 on the others")
    summary: str = Field(default="", description="the difference in words: '1.35x longer, same count'")


class CaptureInfo(ReportModel):
    """What the session asked to record (its spec.capture), when known."""

    steps: int | None = None
    skip_steps: int | None = None
    activities: list[str] = Field(default_factory=new_list)
    record_shapes: bool | None = None
    with_stack: bool | None = None
    profile_memory: bool | None = None
    gpu_metrics_interval_ms: int | None = Field(default=None, description="None when GPU metrics were not asked")
    step_timeout_seconds: int | None = None

    @classmethod
    def from_spec(cls, spec: "CaptureSpec") -> "CaptureInfo":
        """What a session's spec.capture asked for."""
        return cls(
            steps=spec.steps,
            skip_steps=spec.skip_steps,
            activities=[a.value for a in spec.activities],
            record_shapes=spec.record_shapes,
            with_stack=spec.with_stack,
            profile_memory=spec.profile_memory,
            gpu_metrics_interval_ms=spec.gpu_metrics.interval_ms if spec.gpu_metrics.enabled else None,
            step_timeout_seconds=spec.step_timeout_seconds,
        )


class Bottleneck(ReportModel):
    name: str
    category: str = Field(description="kernel | memory | runtime | python | cpu_op | communication")
    count: int = 0
    total_us: float = 0.0
    self_us: float | None = Field(
        default=None,
        description="exclusive time: total_us less what its direct children on the same thread cover (host events; "
        "kernels: their time); absent in reports that predate it",
    )
    mean_us: float = 0.0
    bottleneck_ratio: float = Field(default=0.0, description="time not overlapped by compute / end-to-end time")
    ranks: list[int] = Field(default_factory=new_list)


class KernelStat(ReportModel):
    name: str
    kernel_type: str = Field(description="COMPUTATION | COMMUNICATION | MEMORY (HTA's classes)")
    count: int
    sum_us: float
    mean_us: float
    max_us: float
    min_us: float
    stddev: float


class Collective(ReportModel):
    name: str
    process_group: str | None = None
    count: int = 0
    total_us: float = 0.0
    exposed_us: float = Field(default=0.0, description="time not overlapped by compute")
    wait_us: float = Field(
        default=0.0,
        description="time spent waiting for the last rank to arrive (the ranks' collective_wait_time shared out "
        "over their collectives)",
    )
    op: str | None = Field(
        default=None, description="the collective its calls' args name ('all_to_all', 'allreduce'), where recorded"
    )
    elems: float = Field(
        default=0.0, description="elements sent and received over its calls (In + Out msg nelems), where recorded"
    )


MAX_COMM_CALLS = 1024
"""communication calls a rank's summary keeps (its first whole recorded steps' calls, in order)"""


class CommCalls(ReportModel):
    """A rank's communication calls, one entry per call in parallel lists (the order the rank started them), so
    that the ranks' calls can be matched with each other: a collective with the same collective of its process
    group's other members (the k-th call of that group and op in the step), a receive with its peer's send. The
    first whole steps' calls only, at most MAX_COMM_CALLS."""

    ops: list[str] = Field(
        default_factory=new_list, description="the ops named by op_index: 'allreduce', 'send', 'recv'"
    )
    groups: list[str] = Field(
        default_factory=new_list, description="the process groups named by group_index ('<name>:<description>')"
    )
    op_index: list[int] = Field(default_factory=new_list, description="each call's op, an index into ops")
    group_index: list[int] = Field(
        default_factory=new_list, description="each call's process group, an index into groups; -1 where not recorded"
    )
    peer: list[int] = Field(
        default_factory=new_list, description="sends and receives: the other end's global rank; -1 where not recorded"
    )
    toward: list[int] = Field(
        default_factory=new_list,
        description="sends and receives with no recorded peer: +1 the next pipeline stage, -1 the previous one, 0 "
        "not known (from the work beside the call); empty when no call needs it",
    )
    step: list[int] = Field(default_factory=new_list, description="the recorded step each call was issued in")
    start_us: list[float] = Field(
        default_factory=new_list, description="each call's start, µs after the rank's first recorded step began"
    )
    dur_us: list[float] = Field(default_factory=new_list, description="each call's duration (waiting included), µs")

    @model_validator(mode="after")
    def _parallel(self) -> "CommCalls":
        """One entry per call in every list (start_us and toward: every call or none), indices within their
        lists, no more than MAX_COMM_CALLS: a summary that says otherwise is refused, not half read."""
        n = len(self.dur_us)
        if n > MAX_COMM_CALLS:
            raise ValueError(f"{n} calls, more than MAX_COMM_CALLS ({MAX_COMM_CALLS})")
        if any(len(x) != n for x in (self.op_index, self.group_index, self.peer, self.step)):
            raise ValueError("op_index, group_index, peer, step and dur_us must hold one entry per call")
        if any(len(x) not in (0, n) for x in (self.start_us, self.toward)):
            raise ValueError("start_us and toward hold one entry per call, or none")
        if n and (min(self.op_index) < 0 or max(self.op_index) >= len(self.ops)):
            raise ValueError("op_index points outside ops")
        if n and (min(self.group_index) < -1 or max(self.group_index) >= len(self.groups)):
            raise ValueError("group_index points outside groups")
        if n and min(self.dur_us) < 0:
            raise ValueError("a call's duration is negative")
        if self.toward and (min(self.toward) < -1 or max(self.toward) > 1):
            raise ValueError("toward is -1, 0 or +1")
        return self


class WaitFor(ReportModel):
    """Time a rank spent in matched calls waiting for one other rank, per step (wall-clock time: calls that run at
    once, as gloo runs DDP's buckets, count their common waiting once)."""

    rank: Annotated[int, Field(ge=0)] = Field(description="the rank waited for")
    us_per_step: float
    via: str = Field(description="the calls it was waited for in: 'allreduce in 3:mesh_dp', 'recv from it'")
    calls: int = Field(default=0, description="matched calls in which it was the last to arrive")


class RankWaits(ReportModel):
    """Who a rank waits for, from its calls matched with its peers' (collectives within their process group, each
    receive with the send it receives): in a collective the rank that arrived last ends the others' wait; a receive
    waits for its sender."""

    rank: Annotated[int, Field(ge=0)]
    waited_us_per_step: float = Field(description="the rank's waiting in matched calls, per step")
    waits_for: list[WaitFor] = Field(default_factory=new_list, description="the ranks it waits for, most first (<= 3)")


class CallFloors(ReportModel):
    """CPU-only ranks: the training thread's op calls at their least own time over the recorded steps.

    A call is the k-th call of an op name in a step (`name#k`); its floor is the least time it took in any recorded
    step, which waiting for a CPU cannot raise (only a call stretched in every step is). Ranks running the same
    calls are compared call by call: more work per call (a larger batch) raises every floor, contention does not.
    The floors over the even and the odd steps alone tell how reproducible they are (variable-length inputs are
    not). The calls with the largest floors only (at most 128), in parallel lists."""

    calls: list[str] = Field(default_factory=new_list, description="`op name#k`: the k-th call of that op in a step")
    floor_us: list[float] = Field(default_factory=new_list, description="each call's least own time over the steps, µs")
    even_us: list[float] = Field(default_factory=new_list, description="the same over the even recorded steps only")
    odd_us: list[float] = Field(default_factory=new_list, description="the same over the odd recorded steps only")
    steps: int = Field(default=0, ge=0, description="recorded steps the floors are taken over")
    total_us: float = Field(
        default=0.0,
        ge=0.0,
        description="the floors of every call present in every recorded step, summed (not only the listed ones): "
        "the step's op work at its least, which waiting for a CPU does not raise; µs",
    )


class ProcessGroup(ReportModel):
    """One process group a rank belongs to, as its trace's distributedInfo.pg_config lists it."""

    name: str = Field(description="the group's name (torch numbers them in creation order, the same on every rank)")
    desc: str = Field(default="", description="its description: 'mesh_pp', 'DATA_PARALLEL_GROUP', 'undefined', ...")
    ranks: list[int] = Field(default_factory=new_list, description="its members' global ranks, in group-rank order")


class RankPerStep(ReportModel):
    """A rank's figures per step, µs (means over its recorded steps; the step its median): the figures the report's
    per-rank table, the evidence and the status quote. The RankReport's `*_time` fields are totals over the
    analysed window."""

    steps: int = 0
    step_median_us: float = 0.0
    compute_us: float = Field(default=0.0, description="phases forward + backward + optimizer")
    blocked_in_collectives_us: float = Field(default=0.0, description="phase communication_wait")
    waiting_us: float = Field(default=0.0, description="of the blocked time, waiting for other ranks")
    host_us: float = Field(default=0.0, description="data loading + other host work")
    memory_copies_us: float = Field(default=0.0, description="memcpy/memset (GPU ranks)")


class RankReport(ReportModel):
    rank: Annotated[int, Field(ge=0)]
    status: RankStatus = RankStatus.OK
    error: str | None = None
    node: str | None = None
    pod: str | None = None
    trace_uri: str | None = None
    device: str = "cpu"
    steps: StepStats = Field(default_factory=StepStats)
    # HTA temporal breakdown (µs and %), comm/comp overlap (%)
    idle_time: float = 0.0
    compute_time: float = 0.0
    non_compute_time: float = 0.0
    kernel_time: float = 0.0
    idle_time_pctg: float = 0.0
    compute_time_pctg: float = 0.0
    non_compute_time_pctg: float = 0.0
    comp_comm_overlap_pctg: float = 0.0
    gpu_utilization: float | None = Field(
        default=None, description="GPU ranks: busy / total over the captured window, 0..1; absent on CPU-only ranks"
    )
    cpu_utilization: float | None = Field(
        default=None,
        description="CPU-only ranks: share of the window the training thread runs ops, 0..1; absent on GPU ranks",
    )
    idle_breakdown: IdleBreakdown | None = Field(
        default=None, description="GPU ranks: idle time by cause, streams merged (adds up to idle_time)"
    )
    idle_breakdown_by_stream: list[StreamIdle] = Field(
        default_factory=new_list, description="GPU ranks: HTA's idle-time breakdown per stream (streams overlap)"
    )
    world_size: int | None = None
    window_us: float = Field(default=0.0, description="end-to-end time of the analysed window, µs")
    communication_time: float = 0.0
    memory_time: float = 0.0
    exposed_communication_time: float = 0.0
    collective_wait_time: float = Field(
        default=0.0,
        description="time this rank's steps wait for other ranks inside collectives (µs, whole window); "
        "estimated when collective_wait_estimated",
    )
    collective_wait_estimated: bool = Field(
        default=False,
        description="true when collective_wait_time is estimated across ranks (time blocked in collectives beyond "
        "the least of any rank) because the trace holds no direct measure",
    )
    host_gap_time: float = 0.0
    host_time: float = Field(
        default=0.0,
        description="time the steps spend outside forward/backward/optimizer work and collective waits (phases "
        "data_loading + other, µs, whole window); on GPU ranks, GPU time waiting for the host",
    )
    captured_from_unix_s: float | None = Field(default=None, description="wall-clock start of the recorded steps")
    captured_to_unix_s: float | None = Field(default=None, description="wall-clock end of the recorded steps")
    job_fingerprint: str | None = Field(
        default=None, description="backend, world size and process groups of the trace, to tell jobs apart"
    )
    process_groups: list[ProcessGroup] = Field(
        default_factory=new_list, description="the process groups the trace says this rank belongs to (pg_config)"
    )
    top_kernels: list[KernelStat] = Field(default_factory=new_list)
    top_functions: list[Bottleneck] = Field(default_factory=new_list)
    collectives: list[Collective] = Field(default_factory=new_list)
    phases: StepPhases | None = Field(default=None, description="mean µs per step in each phase")
    step_phases: list[StepPhases] = Field(default_factory=new_list, description="the phases of each recorded step")
    step_ops_outside_work: list[float] = Field(
        default_factory=new_list,
        description="CPU-only ranks, per recorded step: µs of tensor ops on the training thread that run outside "
        "the step's work (in phase other, not in forward, backward, the optimizer or data loading): work that is "
        "compute, whatever phase it falls in; empty when the steps have no phases",
    )
    step_spans: list[list[PhaseSpan]] = Field(
        default_factory=new_list,
        description="per recorded step: its phases in time order (GPU ranks: in the step's GPU window, stretched to "
        "the step; stretches under 1% of the step folded into a neighbour, at most 32 per step); report.json keeps "
        "them in `timeline` for one step only",
    )
    step_dilation: list[float] = Field(
        default_factory=new_list,
        description="CPU-only ranks, per recorded step: how much waiting for a CPU stretched the training thread's "
        "ops (their wall time over their time at each op's typical speed; at least the step's active time over "
        "that time less the training thread's measured CPU wait, where the hook recorded it); 1.0 = not at all",
    )
    step_cpu_wait: list[float] = Field(
        default_factory=new_list,
        description="CPU-only ranks captured through the hook (Linux), per recorded step: µs the training thread was "
        "runnable but waiting for a CPU (schedstat); empty when not measured",
    )
    comm_calls: CommCalls | None = Field(
        default=None, description="the rank's communication calls, for matching them with its peers' (central use)"
    )
    call_floors: CallFloors | None = Field(
        default=None, description="CPU-only ranks with at least 4 recorded steps: op calls at their least time"
    )
    gpu_metrics: GpuMetrics | None = Field(default=None, description="NVML samples over the window, when captured")
    memory: MemoryUsage | None = Field(
        default=None, description="allocated and reserved memory over the recorded steps, where profile_memory was on"
    )
    environment: RankEnvironment | None = None
    per_step: RankPerStep | None = Field(default=None, description="the rank's figures per step (analysed ranks)")
    stacks_uri: str | None = Field(default=None, description="the Python stacks the rank uploaded when it hung")
    flight_recorder_uri: str | None = Field(default=None, description="the rank's Flight Recorder dump, when uploaded")
    stacks_link: str | None = Field(default=None, description="stacks_uri relative to report.html")
    flight_recorder_link: str | None = Field(default=None, description="flight_recorder_uri relative to report.html")
    trace_link: str | None = Field(
        default=None, description="the trace relative to report.html (works in a downloaded session folder)"
    )


class LayoutRank(ReportModel):
    """One rank's place in the job's parallel layout."""

    rank: Annotated[int, Field(ge=0)]
    stage: int = Field(default=0, description="pipeline stage, 0 = first")
    replica: int = Field(default=0, description="data-parallel replica")
    tp: int = Field(default=0, description="position in its tensor-parallel group")
    compute_us: float | None = Field(default=None, description="median compute per step (forward+backward+optimizer)")


class GroupTime(ReportModel):
    """Where the step of one pipeline stage or one data-parallel replica goes, µs per step: the median over the
    group's ranks of each rank's median step, split by what ran."""

    group: str = Field(description="'stage 0', 'replica 3'")
    ranks: list[int] = Field(default_factory=new_list)
    step_us: float = 0.0
    compute_us: float = Field(default=0.0, description="forward + backward + optimizer")
    waiting_us: float = Field(default=0.0, description="blocked on a collective or a peer's send (communication_wait)")
    host_us: float = Field(default=0.0, description="data loading and other host work")
    compute_excess_us: float = Field(
        default=0.0,
        description="compute beyond the median group of its kind (stages with stages, replicas with replicas)",
    )


class ParallelLayout(ReportModel):
    """The job's parallel layout: rank -> (pipeline stage, data-parallel replica, tensor-parallel position)."""

    stages: int = 1
    replicas: int = 1
    tp: int = 1
    source: str = Field(description="process groups (named | unnamed) | collectives (who meets whom)")
    summary: str = Field(description="'4 ranks = 2 stages x 2 replicas, from process groups'")
    microbatches: int | None = Field(default=None, description="per step, from the first stage's sends")
    ranks: list[LayoutRank] = Field(default_factory=new_list)
    by_stage: list[GroupTime] = Field(default_factory=new_list, description="the step decomposed per pipeline stage")
    by_replica: list[GroupTime] = Field(
        default_factory=new_list, description="the step decomposed per data-parallel replica"
    )


class OpTypeTime(ReportModel):
    """One op type's time per step: the compared ranks' median, and the rank set against them."""

    op_type: str = Field(
        description="matmul | attention | convolution | normalization | other compute | communication | memory"
    )
    median_us: float = Field(description="µs per step, the median of the compared ranks")
    rank: int | None = Field(default=None, description="the rank set against them: the top slow rank, else the slowest")
    rank_us: float = Field(default=0.0, description="that rank's µs per step")
    beyond_median_us: float = Field(default=0.0, description="rank_us - median_us")


class JobFinding(ReportModel):
    """A cause of the job's own shape (a stage, the schedule, the data) rather than of one rank."""

    cause: Cause
    summary: str = Field(description="the finding in one sentence")
    ranks: list[int] = Field(default_factory=new_list, description="the ranks it concerns (a stage's, a group's)")
    stage: int | None = None
    gain_us: float = Field(default=0.0, description="estimated µs per step saved by the remedy")
    remedy: str = ""
    evidence: list[Evidence] = Field(default_factory=new_list)


class WhatIf(ReportModel):
    """The step time if one thing ran differently, from a replay of the recorded steps' dependencies."""

    kind: str = Field(
        description="like_peers | all_like_peers (every slow rank at once) | balanced_stages | median_work"
    )
    change: str = Field(description="the change in words: 'rank 13 ran like its peers'")
    step_us: float = Field(description="the step time with the change, µs")
    gain_us: float = Field(description="µs per step saved")
    speedup: float | None = None
    gain_low_us: float | None = Field(
        default=None,
        description="lower end of the saving's noise interval (the mean over the replayed steps less two "
        "standard errors), µs per step",
    )
    gain_high_us: float | None = Field(default=None, description="upper end of that interval, µs per step")


class Diagnosis(ReportModel):
    verdict: str = Field(description="one line a person reads first")
    headline: str | None = Field(
        default=None,
        description="the one name that stands for the cause (status.summary.topBottleneck): what the slowest rank "
        "runs in its excess (its top evidence), where a hung rank is stuck or which collective a desynchronised "
        "rank called; with no culprit, the top bottleneck across ranks",
    )
    ranks_analysed: int = Field(default=0, description="ranks whose traces were compared")
    ranks_expected: int | None = Field(default=None, description="the job's world size, when the traces say it")
    median_step_us: float = Field(default=0.0, description="the job's step time: median over ranks and steps, µs")
    p90_step_us: float = Field(default=0.0, description="90th percentile of every analysed step, µs")
    mean_step_us: float = Field(
        default=0.0, description="mean over ranks and steps, µs: what a step costs on average, stalls included"
    )
    expected_step_us: float | None = Field(
        default=None,
        description="estimated step time if the slow ranks matched the others, µs: from the median step, or from "
        "the mean step when a slow rank stalls intermittently (its stalls do not move the median)",
    )
    estimated_speedup: float | None = Field(
        default=None,
        description="median_step_us (mean_step_us when a slow rank stalls intermittently) / expected_step_us: how "
        "much faster fixing the slow ranks makes it",
    )
    slow_ranks: list[SlowRank] = Field(default_factory=new_list)
    slow_nodes: list[SlowNode] = Field(default_factory=new_list)
    hangs: list[Hang] = Field(default_factory=new_list)
    flight_recorder: FlightRecorderFindings | None = Field(
        default=None, description="what the ranks' Flight Recorder dumps say (hangs and desyncs)"
    )
    bottlenecks: list[Bottleneck] = Field(default_factory=new_list)
    communication: list[Collective] = Field(default_factory=new_list)
    next_steps: list[str] = Field(default_factory=new_list)
    layout: ParallelLayout | None = Field(
        default=None, description="the job's parallel layout, when it has pipeline stages or tensor parallelism"
    )
    findings: list[JobFinding] = Field(
        default_factory=new_list,
        description="causes of the job's shape: stage imbalance, pipeline bubble, data imbalance",
    )
    what_if: list[WhatIf] = Field(
        default_factory=new_list,
        description="pipeline jobs: the step time under each what-if, from a replay of the steps",
    )
    waits: list[RankWaits] = Field(
        default_factory=new_list, description="who waits for whom, from the ranks' matched calls (ranks that wait)"
    )
    by_op_type: list[OpTypeTime] = Field(
        default_factory=new_list,
        description="the step's work by op type: the top slow rank (else the slowest rank) against its peers' median "
        "(its stage's ranks in a pipeline, every other rank otherwise); GPU ranks from their top kernels, CPU ranks "
        "from their ops' self time",
    )


class RankError(ReportModel):
    rank: int | None = None
    source: str = ""
    message: str


class SessionInfo(ReportModel):
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    capture_id: str | None = None


class BaselineChange(ReportModel):
    """A name whose time or calls per step moved against the baseline (stepscope_contract.diff.TopChange's fields)."""

    name: str
    kind: str
    change: str = Field(description="added, removed or changed")
    baseline_us_per_step: float
    candidate_us_per_step: float
    delta_us_per_step: float
    at_equal_op_speed_delta_us_per_step: float | None = Field(
        default=None, description="with the machine's speed taken out: what the changes are ordered by"
    )
    count_delta: float
    rank: int | None = Field(default=None, description="the rank it sits on; null: job-wide, per rank")


class VsBaseline(ReportModel):
    """The session against spec.baseline (the regression gate); the whole comparison is report/diff.json."""

    baseline: str = Field(description="the baseline's report or folder")
    baseline_session: str | None = Field(default=None, description="its session name, when named by spec.baseline")
    verdict: str = Field(description="passed, regressed, improved or unusable (stepscope_contract.diff.DiffVerdict)")
    reason: str = ""
    max_regression_pct: float
    confidence: float = Field(default=0.90, description="two-sided level of the intervals (diff.json's)")
    regression_pct: float | None = None
    regression_ci_low_pct: float | None = None
    regression_ci_high_pct: float | None = None
    at_equal_op_speed: bool = Field(
        default=False, description="regression_pct is at equal op speed (diff.json: the machine's speed taken out)"
    )
    step_regression_pct: float | None = Field(default=None, description="the measured (wall-clock) steps' slowdown")
    added_work_pct: float | None = Field(
        default=None, description="the added work's share of the rest of the step (diff.json's added_work.pct)"
    )
    added_work_ci_low_pct: float | None = None
    added_work_ci_high_pct: float | None = None
    decided_by: list[str] = Field(default_factory=new_list, description="what cleared the gate: steps, added_work")
    top_changes: list[BaselineChange] = Field(
        default_factory=new_list,
        description="diff.json's list, in its order (at_equal_op_speed_delta_us_per_step, largest increase first; "
        "largest decrease first when improved), at most 20",
    )
    diff_url: str | None = Field(
        default=None, description="report/diff.html: an https:// link under spec.storage.urlBase when set"
    )


class Quantiles(ReportModel):
    """One number's distribution over a set of ranks (exact, from every rank's row of the ranks table)."""

    column: str = Field(description="the ranks table's column ('step_median_us', ...)")
    count: int = 0
    min: float = 0.0
    p10: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    max: float = 0.0


class NodeSpread(ReportModel):
    """The median step times of one node's analysed ranks."""

    node: str
    ranks: int = 0
    min_us: float = 0.0
    median_us: float = 0.0
    max_us: float = 0.0


class Distributions(ReportModel):
    """Every analysed rank's numbers as distributions: the job's, and the slowest nodes' (by their slowest rank);
    every rank's own numbers are in the ranks table (`Report.ranks_table`)."""

    ranks: int = Field(default=0, description="rows of the ranks table: every rank the analysis read")
    analysed: int = Field(default=0, description="ranks analysed (status ok)")
    compared_in_full: int = Field(
        default=0, description="analysed ranks the diagnosis compared in full (all of them up to its budget)"
    )
    columns: list[Quantiles] = Field(default_factory=new_list)
    nodes: list[NodeSpread] = Field(default_factory=new_list, description="the slowest nodes first, bounded")
    nodes_total: int = 0


class Report(ReportModel):
    schema_version: int = REPORT_SCHEMA_VERSION
    tool_version: str = ""
    generated_at: datetime
    session: SessionInfo = Field(default_factory=SessionInfo)
    world_size: int | None = None
    analysis_seconds: float = 0.0
    ranks: list[RankReport] = Field(
        default_factory=new_list,
        description="ranks in full: every rank of a small job; past REPORT_RANKS_IN_FULL analysed ranks, the ranks "
        "the diagnosis names, a few peers and the ranks that were not analysed (every rank: ranks_table)",
    )
    ranks_table: str | None = Field(
        default=None, description="the file beside report.json with every rank's compact numbers (ranks.csv.gz)"
    )
    distributions: Distributions | None = Field(
        default=None, description="every analysed rank's numbers as distributions (job, nodes)"
    )
    diagnosis: Diagnosis
    errors: list[RankError] = Field(default_factory=new_list)
    notes: list[str] = Field(
        default_factory=new_list, description="what the analysis left aside and why (files that are not traces, ...)"
    )
    capture: CaptureInfo | None = Field(default=None, description="the session's capture spec, when known")
    missing_ranks: str = Field(
        default="",
        description="every rank the world size announces with nothing uploaded, as a rank set ('4-1023,2000'); "
        "only the first few of them also have a RankReport (status missing), so the report stays small",
    )
    timeline: StepTimeline | None = Field(
        default=None, description="the slowest recorded step of every rank, phases in time order"
    )
    vs_baseline: VsBaseline | None = Field(
        default=None, description="against spec.baseline, when the session names one"
    )
    python_profile: PythonProfile | None = Field(
        default=None, description="the first host-named rank's sampled Python stacks and its differential"
    )
    merged_trace: MergedTrace | None = Field(
        default=None, description="the merged Chrome/Perfetto trace of the named ranks and a few peers"
    )
