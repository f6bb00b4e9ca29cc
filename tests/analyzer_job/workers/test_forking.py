"""The rank workers are forked from the process that hands them ranks, once it has loaded what they run, and only
when a command uses workers (a job of three traces or more); the analyze entry point imports nothing heavy, nor
does the command before it finds the traces."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _run(code: str, workers: str) -> str:
    env = {"STEPSCOPE_ANALYZER_WORKERS": workers, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_analyze_entry_point_imports_nothing_heavy() -> None:
    """The entry module itself pulls in neither numpy nor the pydantic models (`--help` and usage errors stay quick)."""
    out = _run(
        """
        import sys
        import stepscope_analyzer.commands.cli
        print(sorted(m for m in ("numpy", "pydantic", "boto3", "stepscope_analyzer.analyses") if m in sys.modules))
        """,
        "2",
    )
    assert out == "[]"


def test_the_command_finds_the_traces_before_it_imports_the_models() -> None:
    """What the command loads before it finds the traces (storage, discovery): no pydantic, numpy or pipeline."""
    out = _run(
        """
        import sys
        import stepscope_analyzer.commands.analyze_command
        heavy = ("numpy", "pydantic", "boto3", "stepscope_analyzer.ranks.pipeline", "stepscope_contract.report")
        print(sorted(m for m in heavy if m in sys.modules))
        """,
        "2",
    )
    assert out == "[]"


def test_prepare_loads_what_the_workers_run_and_freezes_it_once() -> None:
    """The parser and the analyses imported in the calling process, the validators of the models a worker builds
    with them (deferred otherwise: every worker would build its own), and every object then alive frozen; a second
    call does nothing more."""
    out = _run(
        """
        import gc, os, sys
        from stepscope_analyzer.workers import forking
        before = "stepscope_analyzer.analyses" in sys.modules, gc.get_freeze_count()
        forking.prepare()
        frozen = gc.get_freeze_count()
        forking.prepare()
        from stepscope_contract.report import RankReport, StepStats
        print(before, "stepscope_analyzer.analyses" in sys.modules, frozen > 10_000, gc.get_freeze_count() == frozen,
              os.environ["OPENBLAS_NUM_THREADS"], RankReport.__pydantic_complete__, StepStats.__pydantic_complete__)
        """,
        "2",
    )
    assert out == "(False, 0) True True True 1 True True"


def test_the_workers_are_forks_of_the_caller_with_the_preload_loaded_and_frozen() -> None:
    """A worker is a child of the process that hands it ranks, forked once that process has loaded what a worker
    runs (and nothing a rank does not need: numpy.ma stays out) and frozen it: the worker's collector never walks
    those shared objects. The caller's own garbage collection still runs."""
    out = _run(
        """
        import gc, os
        from stepscope_analyzer.workers import rank_pool
        def probe():
            import sys
            return os.getppid(), "numpy.ma" not in sys.modules, gc.get_freeze_count() > 10_000, gc.isenabled()
        if __name__ == "__main__":
            with rank_pool._executor(2) as pool:
                parent, lean, frozen, collecting = pool.submit(probe).result()
            print(parent == os.getpid(), lean, frozen, collecting, gc.isenabled())
        """,
        "2",
    )
    assert out == "True True True True True"


def test_the_command_freezes_its_objects_before_the_interpreter_exits(tmp_path: Path) -> None:
    """The exit's collections skip what the analysis left alive (the report is written by then)."""
    source = tmp_path / "in"
    source.mkdir()
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gloo_2rank_rank0.pt.trace.json.gz"
    shutil.copy(fixture, source / "rank0.pt.trace.json.gz")
    out = _run(
        f"""
        import contextlib, gc, io
        from stepscope_analyzer.commands.cli import analyze_main
        if __name__ == "__main__":
            with contextlib.redirect_stdout(io.StringIO()):
                code = analyze_main([{str(source)!r}, "-o", {str(tmp_path / "out")!r}])
            print(code, gc.get_freeze_count() > 0)
        """,
        "1",
    )
    assert out == "0 True"
    assert (tmp_path / "out" / "report.html").is_file()


def test_the_analyze_command_hands_out_ranks_before_it_loads_the_reduce_step() -> None:
    """The command submits its first ranks once its own imports are done: its first half (analyze_command, the
    pipeline) loads neither numpy nor the parser, the diagnosis (the CR status summary included, which serves the
    Job) or the report (jinja2); those (not the analyses) come with analyze_finish, imported while the workers parse."""
    heavy = (
        "numpy",
        "jinja2",
        "stepscope_analyzer.parse",
        "stepscope_analyzer.analyses",
        "stepscope_analyzer.diagnosis",
        "stepscope_analyzer.diagnosis.status_summary",
        "stepscope_analyzer.report",
        "stepscope_analyzer.reduce.reduction",
    )
    out = _run(
        f"""
        import sys
        import stepscope_analyzer.commands.analyze_command
        print(sorted(m for m in {heavy!r} if m in sys.modules))
        import stepscope_analyzer.commands.analyze_finish
        print(sorted(m for m in {heavy!r} if m not in sys.modules))
        """,
        "2",
    )
    assert out.splitlines() == ["[]", "['stepscope_analyzer.analyses', 'stepscope_analyzer.diagnosis.status_summary']"]


def test_the_finishing_half_imports_nothing_heavy_once_the_ranks_are_in(tmp_path: Path) -> None:
    """What the reduce, the diagnosis and the report load on first use (numpy.ma, which numpy.median imports on its
    first call, among them) is imported beside the workers: once the last rank is in, the finish only computes."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gloo_2rank_rank0.pt.trace.json.gz"
    for rank in range(3):
        shutil.copy(fixture, tmp_path / f"rank{rank}.pt.trace.json.gz")
    out = _run(
        f"""
        import contextlib, io, sys
        import stepscope_analyzer.commands.analyze_finish as finishing
        from stepscope_analyzer.commands.cli import analyze_main
        run_finish, loaded = finishing.finish, []
        def finish(*args, **kwargs):
            before = set(sys.modules)
            code = run_finish(*args, **kwargs)
            loaded.extend(sorted(set(sys.modules) - before))
            return code
        finishing.finish = finish
        if __name__ == "__main__":
            with contextlib.redirect_stdout(io.StringIO()):
                code = analyze_main([{str(tmp_path)!r}, "-o", {str(tmp_path / "out")!r}])
            heavy = ("numpy", "pydantic", "jinja2", "markupsafe", "stepscope_analyzer")
            print(code, "numpy.ma" in sys.modules, [m for m in loaded if m.split(".")[0] in heavy])
        """,
        "2",
    )
    assert out == "0 True []"


@pytest.mark.parametrize(("ranks", "pool"), [(2, False), (3, True)])
def test_the_workers_are_prepared_only_for_a_job_that_uses_them(tmp_path: Path, ranks: int, pool: bool) -> None:
    """Nothing is prepared before the traces are found; for two traces nothing at all (each is parsed in the
    command's own process on every CPU), for three the workers' preload (where there is more than one CPU to give
    workers), and every rank is analysed either way."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gloo_2rank_rank0.pt.trace.json.gz"
    for rank in range(ranks):
        shutil.copy(fixture, tmp_path / f"rank{rank}.pt.trace.json.gz")
    out = _run(
        f"""
        import gc
        from stepscope_analyzer.ranks.pipeline import discover, summarize_all
        from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
        from stepscope_analyzer.workers.cpu_quota import worker_count
        if __name__ == "__main__":
            store = LocalStore()
            layout = discover(store, location_of({str(tmp_path)!r}))
            before = gc.get_freeze_count() > 0
            outcomes = summarize_all(store, layout)
            after = gc.get_freeze_count() > 0
            ok = all(o.summary.status.value == "ok" for o in outcomes)
            print(before, after, worker_count({ranks}) > 1, ok, len(outcomes))
        """,
        "",
    )
    before, after, cpus, ok, count = out.split()
    assert (before, ok, count) == ("False", "True", str(ranks))
    assert after == str(pool and cpus == "True")
