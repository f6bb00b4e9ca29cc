"""Which trace events mark which part of a training step, decided on the names PyTorch itself emits. Pure.

The markers come from PyTorch, not from user code: the DataLoader's `enumerate(DataLoader)#...__next__`
region and its Python frames (`torch/utils/data/`), the optimizer's `Optimizer.step#...`/`Optimizer.zero_grad#...`
regions, autograd's `autograd::engine::evaluate_function: ...` ops, DDP's reducer ops and its
`DistributedDataParallel.forward` region (FSDP's likewise), collectives (`gloo:*`, `nccl:*`, `c10d::*`, the
functional collectives DTensor and compiled code call with their waits (`_c10d_functional::all_reduce`,
`_c10d_functional::wait_tensor`),
`record_param_comms`, and FSDP2's regions that issue and wait for its collectives: `FSDP::all_gather`,
`FSDP::post_backward_reduce`, `FSDP::root_post_backward_callback`). Regions users commonly add with
`record_function` (`## forward ##`, `## backward ##`, `## optimizer ##`, `## data_load ##`, ...) are read as the
same markers. A region with any other name is the
user's own work: it counts as host time (phase `other`) and is named in the evidence.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.parse import TraceColumns

Mask = npt.NDArray[np.bool_]

COMM = re.compile(
    r"^(gloo:|c10d::|_?c10d_functional::|nccl:|record_param_comms$|"
    r"FSDP::(all_gather|post_backward_reduce|root_post_backward_callback)\b)"
)
IN_FLIGHT = re.compile(r"^gloo:(send|recv)$")
"""gloo's point-to-point work: its span on the calling thread runs from the isend/irecv to the end of its wait, so
the thread's own ops inside it (a pipeline schedule computing the next microbatch while the last one's activations
are sent) are that work, not a wait; only the span's time with no op of the thread running is waiting"""
DATA = re.compile(
    r"^enumerate\(DataLoader\)|torch/utils/data/|"
    r"(?i:^(## ?)?(data_?load(ing|er)?|load_?(batch|data)|(next|get|fetch|wait_for)_?batch)\b)"
)
OPTIMIZER = re.compile(r"^Optimizer\.(step|zero_grad)#|(?i:^## ?(optimizer|zero_grad)\b)")
BACKWARD = re.compile(r"^autograd::engine::evaluate_function|^torch\.distributed\.ddp\.reducer::|(?i:^## ?backward\b)")
FORWARD = re.compile(r"^(DistributedDataParallel|FullyShardedDataParallel)\.forward$|(?i:^## ?forward\b)")
STEP = re.compile(r"^ProfilerStep#\d+")


def name_mask(ev: TraceColumns, pattern: re.Pattern[str]) -> Mask:
    """Rows whose name matches `pattern` (each distinct name is tested once)."""
    return ev.name_mask(ev.names_matching(pattern))
