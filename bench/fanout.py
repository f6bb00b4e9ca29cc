"""Fan-out benchmark: 1,000 simulated sidecars on loopback, 1,000 Running+Ready pods in the Kubernetes API
emulator, one ProfileSession. Prints the time from create to all start requests received and the operator's
peak RSS, as ratios against the bars (< 5 s, < 250 MB); --targets 1000, 3000 or 10000. Exit 1 when a bar is missed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from pathlib import Path

import psutil
import uvloop
import yaml
from aiohttp import web
from loopback_sidecars import serve_captures

from stepscope_contract.tokens import namespace_token
from stepscope_local.kube import EmulatorServer

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-token"  # the operator's master token
SIDECAR_TOKEN = namespace_token(TOKEN, "default")  # what the stand-ins of namespace default accept
BAR_SECONDS = 5.0
BAR_RSS_MB = 250.0


class _Counts:
    """What the sidecars' process shares with the harness: requests accepted, first and last arrival (monotonic
    clock, the same in every process of the machine)."""

    def __init__(self, ctx: BaseContext) -> None:
        self.started = ctx.Value("q", 0, lock=False)
        self.first_at = ctx.Value("d", 0.0, lock=False)
        self.last_at = ctx.Value("d", 0.0, lock=False)


def _serve_sidecars(count: int, host: str, counts: _Counts, ports_out: Connection) -> None:
    """The child process: `count` listening sockets, one tiny handler that checks the token, reads the JSON body,
    counts the request and answers as a sidecar does."""

    async def start(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SIDECAR_TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await request.json()
        counts.started.value += 1
        counts.last_at.value = time.monotonic()
        counts.first_at.value = counts.first_at.value or counts.last_at.value
        return web.json_response({"captureId": body["captureId"], "state": "armed"}, status=202)

    async def get(request: web.Request) -> web.Response:
        return web.json_response({"captureId": request.match_info["cid"], "state": "armed"})

    async def serve() -> None:
        ports_out.send(await serve_captures(host, count, start, get))
        ports_out.close()
        await asyncio.Event().wait()

    uvloop.run(serve())


class Sidecars:
    """Many listening sockets on one address, served by a process of their own: in a cluster every sidecar has its
    pod's CPU, so here they must not share the emulator's interpreter (one GIL would make them the bottleneck)."""

    def __init__(self, count: int, host: str = "127.0.13.1") -> None:
        self.count = count
        self.host = host
        self.ports: list[int] = []
        ctx = multiprocessing.get_context("spawn")
        self._counts = _Counts(ctx)
        self._ports_in, ports_out = ctx.Pipe(duplex=False)
        self._process = ctx.Process(
            target=_serve_sidecars, args=(count, host, self._counts, ports_out), name="sidecars", daemon=True
        )

    @property
    def started(self) -> int:
        return int(self._counts.started.value)

    @property
    def first_at(self) -> float:
        return float(self._counts.first_at.value)

    @property
    def last_at(self) -> float:
        return float(self._counts.last_at.value)

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    def __enter__(self) -> Sidecars:
        self._process.start()
        if not self._ports_in.poll(120):
            raise RuntimeError("the simulated sidecars did not start within 120 s")
        self.ports = self._ports_in.recv()
        return self

    def __exit__(self, *_: object) -> None:
        self._process.terminate()
        self._process.join(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=128)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="stepscope-fanout-"))
    with EmulatorServer(workdir=workdir) as api, Sidecars(args.targets) as sidecars:
        api.apply(yaml.safe_load((REPO / "crds" / "profilesessions.stepscope.dev.yaml").read_text()))
        for i, port in enumerate(sidecars.ports):
            name = f"train-{i}"
            api.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": "default",
                        "labels": {"app": "bench"},
                        "annotations": {"stepscope.dev/sidecar-port": str(port), "stepscope.dev/rank": str(i)},
                    },
                    "spec": {"nodeName": f"node-{i // 8}", "containers": [{"name": "trainer", "image": "t"}]},
                }
            )
            api.patch_status(
                "v1",
                "pods",
                "default",
                name,
                {"phase": "Running", "podIP": sidecars.host, "conditions": [{"type": "Ready", "status": "True"}]},
            )
        token = workdir / "token"
        token.write_text(TOKEN)
        ports_file = workdir / "operator-ports.json"
        env = {
            **os.environ,
            "KUBECONFIG": str(api.kubeconfig_path),
            "STEPSCOPE_SIDECAR_TOKEN_FILE": str(token),
            "STEPSCOPE_WATCH_NAMESPACES": "default",
            "STEPSCOPE_SIGNAL_CONCURRENCY": str(args.concurrency),
            "STEPSCOPE_METRICS_PORT": "0",  # any free port: the operator says which in the ports file
            "STEPSCOPE_HEALTH_PORT": "0",
            "STEPSCOPE_PORTS_FILE": str(ports_file),
            "STEPSCOPE_TICK_SECONDS": "1",
        }
        operator = subprocess.Popen(
            [str(Path(sys.executable).parent / "stepscope"), "operator"],
            env=env,
            stdout=(workdir / "operator.log").open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    health = json.loads(ports_file.read_text())["health"]
                    urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=2).close()
                    break
                except (OSError, ValueError):
                    if time.monotonic() > deadline or operator.poll() is not None:
                        print((workdir / "operator.log").read_text()[-2000:])
                        return 1
                    time.sleep(0.3)
            proc = psutil.Process(operator.pid)
            peak = proc.memory_info().rss
            harness = [psutil.Process(), psutil.Process(sidecars.pid)]
            operator_cpu = sum(proc.cpu_times()[:2])
            emulator_cpu, sidecars_cpu = (sum(p.cpu_times()[:2]) for p in harness)
            created = time.monotonic()
            api.apply(
                {
                    "apiVersion": "stepscope.dev/v1alpha1",
                    "kind": "ProfileSession",
                    "metadata": {"name": "fanout", "namespace": "default"},
                    "spec": {
                        "targets": {"selector": {"matchLabels": {"app": "bench"}}, "maxTargets": max(args.targets, 1)},
                        "capture": {"steps": 3, "timeoutSeconds": 600},
                        "storage": {"uri": "s3://bucket/p"},
                    },
                }
            )
            while sidecars.started < args.targets and time.monotonic() - created < 120:
                peak = max(peak, proc.memory_info().rss)
                time.sleep(0.02)
            elapsed = sidecars.last_at - created
            operator_cpu = sum(proc.cpu_times()[:2]) - operator_cpu
            emulator_cpu = sum(harness[0].cpu_times()[:2]) - emulator_cpu
            sidecars_cpu = sum(harness[1].cpu_times()[:2]) - sidecars_cpu
            for _ in range(20):  # the polling that follows, for the peak
                peak = max(peak, proc.memory_info().rss)
                time.sleep(0.1)
        finally:
            with contextlib.suppress(ProcessLookupError):  # it may have exited by itself
                os.killpg(operator.pid, signal.SIGTERM)
            operator.wait(20)
    rss_mb = peak / 2**20
    print(f"targets signalled      {sidecars.started}/{args.targets}")
    print(f"create -> all signalled {elapsed:.2f} s   bar {BAR_SECONDS:.0f} s   ratio {elapsed / BAR_SECONDS:.2f}")
    print(f"  of which resolve      {sidecars.first_at - created:.2f} s (create -> first signalled)")
    print(f"CPU in that window      operator {operator_cpu:.2f} s, emulator {emulator_cpu:.2f} s, "
          f"simulated sidecars {sidecars_cpu:.2f} s (all on this machine's {os.cpu_count()} CPUs)")  # fmt: skip
    print(f"operator peak RSS       {rss_mb:.0f} MB   bar {BAR_RSS_MB:.0f} MB   ratio {rss_mb / BAR_RSS_MB:.2f}")
    ok = sidecars.started == args.targets and elapsed < BAR_SECONDS and rss_mb < BAR_RSS_MB
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
