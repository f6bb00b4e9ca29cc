"""The step's work by op type, the slow rank against its peers: the names kernel libraries and PyTorch give their
work say the type, and the slow rank's excess shows in the type it ran more of (real demo session, GPU 3D job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope_analyzer.diagnosis.op_types import op_type
from stepscope_analyzer.report.html import render_html
from stepscope_testing.corpus import gpu_pipelines
from stepscope_testing.gpu_pipeline_jobs import GpuPipeJob, write_job
from stepscope_testing.local_analysis import analyse_folder

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32", "matmul"),
        ("ampere_sgemm_128x64_tn", "matmul"),
        ("aten::addmm", "matmul"),
        ("aten::linear", "other compute"),  # a wrapper: its own time only
        ("flash_fwd_kernel", "attention"),
        ("aten::_scaled_dot_product_flash_attention", "attention"),
        ("cudnn::maxwell::gemm::computeOffsetsKernel", "convolution"),
        ("aten::native_layer_norm", "normalization"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
        ("gloo:all_reduce", "communication"),
        ("Memcpy HtoD (Pageable -> Device)", "memory"),
        ("aten::copy_", "memory"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "other compute"),
    ],
)
def test_the_names_say_the_op_type(name: str, kind: str) -> None:
    assert op_type(name) == kind


def test_the_slow_ranks_excess_is_in_the_op_type_it_ran_more_of() -> None:
    """The compute demo session: rank 2 runs extra matrix products outside forward/backward/optimizer."""
    report = analyse_folder(FIXTURES / "demo_sessions" / "compute")
    rows = {t.op_type: t for t in report.diagnosis.by_op_type}
    assert {t.rank for t in rows.values()} == {2}
    top = max(rows.values(), key=lambda t: t.beyond_median_us)
    assert top.op_type == "matmul" and top.rank_us > 5 * top.median_us, rows
    assert rows["communication"].beyond_median_us < 0  # it waits less than the others
    html = render_html(report)
    assert 'id="op-type-table"' in html and "<td>matmul</td>" in html
    less = html[html.index("<td>communication</td>") :].split("</tr>")[0]
    assert '<td class="num">-' in less and "ms</td>" in less  # a negative difference in ms, as its columns


def test_a_slow_gpu_is_set_against_its_stage(tmp_path: Path) -> None:
    job = next(s.job for s in gpu_pipelines() if s.name == "gpu-pp4dp4-slow-worker-1.3x")
    assert isinstance(job, GpuPipeJob)
    d = analyse_folder(write_job(job, tmp_path / "job")).diagnosis
    rows = {t.op_type: t for t in d.by_op_type}
    assert rows["matmul"].rank == 13 and rows["matmul"].beyond_median_us > 0.2 * rows["matmul"].median_us
    assert max(rows.values(), key=lambda t: t.beyond_median_us).op_type == "matmul"
