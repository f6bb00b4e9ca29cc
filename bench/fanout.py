"""Fan-out benchmark: 1,000 simulated sidecars on loopback, 1,000 Running+Ready pods in the Kubernetes API
emulator, one ProfileSession. Prints the time from create to all start requests received and the operator's
peak RSS, as ratios against the bars (< 5 s, < 250 MB); --targets 1000, 3000 or 10000. Exit 1 when a bar is missed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
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


class Sidecars:
    """Many listening sockets on one address, one tiny handler: accepts the start request and counts it."""

    def __init__(self, count: int, host: str = "127.0.13.1") -> None:
        self.count = count
        self.host = host
        self.ports: list[int] = []
        self.started = 0
        self.first_at = 0.0
        self.last_at = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _start(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {SIDECAR_TOKEN}":
            return web.json_response({"error": "unauthorized"}, status=401)
        body = await request.json()
        self.started += 1
        self.last_at = time.monotonic()
        self.first_at = self.first_at or self.last_at
        return web.json_response({"captureId": body["captureId"], "state": "armed"}, status=202)

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response({"captureId": request.match_info["cid"], "state": "armed"})

    async def _serve(self) -> None:
        self.ports = await serve_captures(self.host, self.count, self._start, self._get)

    def __enter__(self) -> Sidecars:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(120)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


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
            operator_cpu, harness_cpu = sum(proc.cpu_times()[:2]), sum(psutil.Process().cpu_times()[:2])
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
            harness_cpu = sum(psutil.Process().cpu_times()[:2]) - harness_cpu
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
    print(f"CPU in that window      operator {operator_cpu:.2f} s, harness (emulator + sidecars) {harness_cpu:.2f} s")
    print(f"operator peak RSS       {rss_mb:.0f} MB   bar {BAR_RSS_MB:.0f} MB   ratio {rss_mb / BAR_RSS_MB:.2f}")
    ok = sidecars.started == args.targets and elapsed < BAR_SECONDS and rss_mb < BAR_RSS_MB
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
