"""`stepscope local-cluster`: the embedded cluster with the operator, ready for the examples as they are.

It starts the API emulator, S3 (moto) and the pod runner, installs what a Helm install would (storage settings,
Secrets, buckets; `install.py`), starts the operator (unless `--no-operator`), and prints `export` lines a shell can
`eval` (KUBECONFIG, the S3 endpoint and keys) followed by `#` comments. In the foreground it runs until Ctrl-C;
`--background` starts it detached, waits until it is ready, prints the same lines and returns, so that

    eval "$(stepscope local-cluster --background)"

leaves a shell ready for `kubectl`; `stepscope local-cluster --stop` stops it. The lines are also written to
`<workdir>/env.sh` while the cluster runs.

Every start regenerates what is tied to a port or a process (the kubeconfigs, the operator's token file, env.sh,
the pid file), so a workdir survives `--stop` and a new start. The lines are printed only once the operator is
healthy: its `/healthz` answers and the API server has recorded its requests as its ServiceAccount. Otherwise the
command exits with status 1 and prints why, with the last lines of the operator's log.

While it runs, the operator and the object store are supervised (`supervision.py`): one that exits is started
again, and the log says so; `--stop` also stops the operator and the object store it recorded when the cluster's
own process is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_local.install import (
    BUCKETS,
    INSTALL_NAMESPACE,
    ONBOARDING_ENV,
    STORAGE_CONFIGMAP,
    install,
    shell_lines,
    start_operator,
)
from stepscope_local.operator_health import log_tail, wait_operator_ready
from stepscope_local.ports import free_port
from stepscope_local.runner.pods import kill_group
from stepscope_local.supervision import Watched, check, record_pid, stop_recorded

if TYPE_CHECKING:
    from stepscope_local.cluster import LocalCluster

DEFAULT_WORKDIR = Path(".demo/local-cluster")
RECORDED = {"operator": "operator", "object-store": "moto_server"}
"""the processes a cluster records (supervision.record_pid) and what their command lines hold"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stepscope local-cluster",
        description="Run the embedded local cluster (Kubernetes API emulator, S3, pod runner) with the operator.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="kubeconfig, logs, pod volumes, env.sh")
    parser.add_argument(
        "--bucket", action="append", default=[], help=f"S3 bucket to create besides {', '.join(BUCKETS)} (repeatable)"
    )
    parser.add_argument("--nodes", type=int, default=4, help="simulated node names node-0..node-N-1")
    parser.add_argument("--no-operator", action="store_true", help="do not start the operator")
    parser.add_argument(
        "--operator-timeout", type=float, default=120.0, help="seconds to wait for the operator's /healthz"
    )
    parser.add_argument(
        "--operator-command",
        help="the operator's command line as a JSON list (a stand-in); default: stepscope operator",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--background", action="store_true", help="start detached, print the export lines once ready, and return"
    )
    mode.add_argument("--stop", action="store_true", help="stop the local cluster running in --workdir")
    return parser


def _pid_file(workdir: Path) -> Path:
    return workdir / "local-cluster.pid"


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    return True


def _running_pid(workdir: Path) -> int | None:
    try:
        pid = int(_pid_file(workdir).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _comments(cluster: LocalCluster, operator: str, env_file: Path) -> list[str]:
    buckets = ", ".join(sorted(cluster.s3.buckets)) if cluster.s3 else ""
    return [
        f"# stepscope local cluster: API {cluster.api.url}, S3 {cluster.s3_endpoint} (buckets {buckets})",
        f"# operator: {operator}",
        f"# storage settings: ConfigMap {INSTALL_NAMESPACE}/{STORAGE_CONFIGMAP}; Secrets stepscope-s3 and "
        "stepscope-sidecar-token in namespace default",
        f"# pod logs: {cluster.logs_dir}",
        f"# these lines are in {env_file}; try: kubectl apply -f examples/profilesession-minimal.yaml",
    ]


def _start_operator(args: argparse.Namespace, cluster: LocalCluster, workdir: Path) -> subprocess.Popen[bytes] | None:
    """The operator, once healthy; None (with the reason and its log's last lines on stderr) when it is not."""
    log = workdir / "operator.log"
    offset = log.stat().st_size if log.exists() else 0  # this start's lines only
    health = free_port()
    command = json.loads(args.operator_command) if args.operator_command else None
    operator = start_operator(cluster, workdir, command=command, health_port=health, extra_env=ONBOARDING_ENV)
    problem = wait_operator_ready(cluster, operator, health, args.operator_timeout)
    if problem is None:
        return operator
    kill_group(operator, 10)
    print(  # the cause last, where a terminal leaves it in view
        f"{log_tail(log, offset)}\nstepscope local-cluster: the operator is not healthy: {problem} "
        f"(the lines above end {log})",
        file=sys.stderr,
        flush=True,
    )
    return None


class _Operator:
    """The operator process this cluster runs, started again by the supervisor when it exits."""

    def __init__(self, args: argparse.Namespace, cluster: LocalCluster, workdir: Path) -> None:
        self.args, self.cluster, self.workdir = args, cluster, workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def restart(self) -> str:
        command = json.loads(self.args.operator_command) if self.args.operator_command else None
        self.proc = start_operator(self.cluster, self.workdir, command=command, extra_env=ONBOARDING_ENV)
        record_pid(self.workdir, "operator", self.proc.pid)
        return f"pid {self.proc.pid}, log {self.workdir / 'operator.log'}"


def _stop_operator(operator: _Operator | None) -> None:
    if operator is not None and operator.proc is not None:
        kill_group(operator.proc, 10)
        operator.proc = None


def _object_store(cluster: LocalCluster, workdir: Path) -> Watched | None:
    s3 = cluster.s3
    if s3 is None:
        return None
    if s3.pid is not None:
        record_pid(workdir, "object-store", s3.pid)

    def restart() -> str:
        s3.restart()
        if s3.pid is not None:
            record_pid(workdir, "object-store", s3.pid)
        return f"{s3.endpoint} (pid {s3.pid}; buckets {', '.join(s3.buckets)}; the objects it held are lost)"

    return Watched("object store", s3.exit_code, restart)


def _supervise(stop: threading.Event, watched: list[Watched]) -> None:
    while not stop.is_set():
        for one in watched:
            said = check(one, time.monotonic())
            if said:
                print(said, flush=True)
        stop.wait(1.0)


def run_foreground(args: argparse.Namespace) -> int:
    workdir: Path = args.workdir.resolve()
    if (pid := _running_pid(workdir)) is not None and pid != os.getpid():
        print(f"stepscope local-cluster: one already runs in {workdir} (pid {pid}); --stop it first", file=sys.stderr)
        return 1
    workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    nodes = tuple(f"node-{i}" for i in range(args.nodes))
    env_file = workdir / "env.sh"
    env_file.unlink(missing_ok=True)
    _pid_file(workdir).write_text(str(os.getpid()))
    stop_recorded(workdir, RECORDED)  # what an earlier cluster in this workdir left running
    operator: _Operator | None = None
    try:
        from stepscope_local.cluster import LocalCluster  # the emulator, S3 and the runner: only to run a cluster

        with LocalCluster(workdir=workdir / "cluster", nodes=nodes, buckets=tuple(args.bucket)) as cluster:
            try:
                install(cluster)
                described = "not started (--no-operator)"
                watched = [w for w in [_object_store(cluster, workdir)] if w is not None]
                if not args.no_operator:
                    operator = _Operator(args, cluster, workdir)
                    operator.proc = _start_operator(args, cluster, workdir)
                    if operator.proc is None:
                        return 1
                    record_pid(workdir, "operator", operator.proc.pid)
                    described = f"pid {operator.proc.pid}, log {workdir / 'operator.log'}"
                    watched.append(Watched("operator", operator.exit_code, operator.restart, started=time.monotonic()))
                lines = [*shell_lines(cluster), *_comments(cluster, described, env_file)]
                partial = env_file.with_suffix(".partial")
                partial.write_text("\n".join(lines) + "\n")
                partial.replace(env_file)  # --background prints it once it exists: never half of it
                print("\n".join([*lines, "# Ctrl-C (or stepscope local-cluster --stop) stops everything"]), flush=True)
                _supervise(stop, watched)
            finally:  # the API server's clients before the server: a live operator's watches hold its shutdown up
                _stop_operator(operator)
    finally:
        _stop_operator(operator)
        stop_recorded(workdir, RECORDED)
        env_file.unlink(missing_ok=True)
        _pid_file(workdir).unlink(missing_ok=True)
    print("# local cluster stopped", flush=True)
    return 0


def run_background(args: argparse.Namespace, argv: list[str]) -> int:
    workdir: Path = args.workdir.resolve()
    if (pid := _running_pid(workdir)) is not None:
        print(f"stepscope local-cluster: one already runs in {workdir} (pid {pid}); --stop it first", file=sys.stderr)
        return 1
    workdir.mkdir(parents=True, exist_ok=True)
    env_file = workdir / "env.sh"
    env_file.unlink(missing_ok=True)
    forwarded = [a for a in argv if a != "--background"]
    log_path = workdir / "local-cluster.log"
    offset = log_path.stat().st_size if log_path.exists() else 0  # this start's lines only
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "stepscope_cli.main", "local-cluster", *forwarded, "--workdir", str(workdir)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    limit = args.operator_timeout + 120
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if env_file.exists() and child.poll() is None:
            print(env_file.read_text(), end="", flush=True)
            return 0
        if child.poll() is not None:
            break
        time.sleep(0.3)
    code = child.poll()
    if code is None:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGTERM)
        reason = f"it did not come up within {limit:.0f} s"
    else:
        reason = f"it exited with status {code}"
    print(
        f"{log_tail(log_path, offset, lines=60)}\nstepscope local-cluster: {reason} (the lines above end {log_path})",
        file=sys.stderr,
    )
    return code or 1


def run_stop(args: argparse.Namespace) -> int:
    workdir: Path = args.workdir.resolve()
    pid = _running_pid(workdir)
    if pid is None:
        left = stop_recorded(workdir, RECORDED)  # the cluster's process is gone: what it started may not be
        if left:
            print(f"# the local cluster in {workdir} was gone; stopped what it left: {', '.join(left)}")
            return 0
        print(f"stepscope local-cluster: none runs in {workdir}", file=sys.stderr)
        return 1
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.3)
    left = stop_recorded(workdir, RECORDED)
    if _alive(pid):
        print(f"stepscope local-cluster: pid {pid} did not stop within 120 s", file=sys.stderr)
        return 1
    print(f"# local cluster in {workdir} stopped" + (f"; also stopped {', '.join(left)}" if left else ""))
    return 0


def cluster_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.stop:
        return run_stop(args)
    if args.background:
        return run_background(args, argv)
    return run_foreground(args)
