"""The rank workers' fork server starts only when a command uses workers: for a job of three traces or more, as soon
as the traces are found; the analyze entry point imports nothing heavy, nor does the command before the server
starts."""

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
    """What lets the fork server's imports overlap the command's: the entry module itself pulls in neither numpy
    nor the pydantic models."""
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
    """What the command loads before it starts the fork server (storage, discovery, the server's module) is all
    that stands before the server's own imports: no pydantic, numpy or pipeline; those are imported beside it."""
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


@pytest.mark.parametrize(("workers", "started"), [("2", True), ("1", False), ("many", False)])
def test_start_early_starts_the_server_only_for_workers(workers: str, started: bool) -> None:
    out = _run(
        """
        import os
        from multiprocessing import forkserver
        from stepscope_analyzer.workers import fork_server
        began = fork_server.start_early()
        pid = forkserver._forkserver._forkserver_pid
        print(began, pid is not None, os.environ["OPENBLAS_NUM_THREADS"])
        """,
        workers,
    )
    assert out == f"{started} {started} 1"


def test_a_started_server_serves_the_pool() -> None:
    """The early server is the one the rank pool forks its workers from (no second server), and they work."""
    out = _run(
        """
        from multiprocessing import forkserver
        from stepscope_analyzer.workers import fork_server, rank_pool
        if __name__ == "__main__":
            fork_server.start_early()
            first = forkserver._forkserver._forkserver_pid
            with rank_pool._executor(2) as pool:
                print(pool.submit(divmod, 7, 2).result(), forkserver._forkserver._forkserver_pid == first)
        """,
        "2",
    )
    assert out == "(3, 1) True"


def test_the_workers_inherit_the_preload_frozen() -> None:
    """What the preload created is frozen in the server before it forks (fewer pages written in each worker, a
    quicker exit of the server), and nothing of the kind happens in the command's own process."""
    out = _run(
        """
        import gc
        from stepscope_analyzer.workers import fork_server, rank_pool
        if __name__ == "__main__":
            fork_server.start_early()
            with rank_pool._executor(2) as pool:
                print(pool.submit(gc.get_freeze_count).result() > 10_000, gc.get_freeze_count())
        """,
        "2",
    )
    assert out == "True 0"


def test_a_worker_finds_what_numpy_median_imports_on_first_use_loaded() -> None:
    """numpy.median imports numpy.ma on its first call; the server's preload does it once for every worker."""
    out = _run(
        """
        import sys
        from stepscope_analyzer.workers import fork_server, rank_pool
        if __name__ == "__main__":
            fork_server.start_early()
            with rank_pool._executor(2) as pool:
                print(pool.submit(eval, "'numpy.ma' in __import__('sys').modules").result(), "numpy" in sys.modules)
        """,
        "2",
    )
    assert out == "True False"


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


@pytest.mark.parametrize(("ranks", "pool"), [(2, False), (3, True)])
def test_the_server_starts_as_the_first_trace_is_read_and_not_for_a_small_job(
    tmp_path: Path, ranks: int, pool: bool
) -> None:
    """No server before the traces are found; for two traces none at all (each is parsed in the command's own
    process on every CPU), for three it starts (where there is more than one CPU to give workers)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gloo_2rank_rank0.pt.trace.json.gz"
    for rank in range(ranks):
        shutil.copy(fixture, tmp_path / f"rank{rank}.pt.trace.json.gz")
    out = _run(
        f"""
        from multiprocessing import forkserver
        from stepscope_analyzer.ranks.pipeline import discover, summarize_all
        from stepscope_analyzer.ranks.storage_io import LocalStore, location_of
        from stepscope_analyzer.workers.cpu_quota import worker_count
        if __name__ == "__main__":
            store = LocalStore()
            layout = discover(store, location_of({str(tmp_path)!r}))
            before = forkserver._forkserver._forkserver_pid is not None
            outcomes = summarize_all(store, layout)
            after = forkserver._forkserver._forkserver_pid is not None
            ok = all(o.summary.status.value == "ok" for o in outcomes)
            print(before, after, worker_count({ranks}) > 1, ok, len(outcomes))
        """,
        "",
    )
    before, after, cpus, ok, count = out.split()
    assert (before, ok, count) == ("False", "True", str(ranks))
    assert after == str(pool and cpus == "True")
