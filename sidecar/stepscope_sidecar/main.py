"""`stepscope sidecar`: the agent beside a training container."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope_contract.constants import (
    DEFAULT_SIDECAR_PORT,
    ENV_NODE_NAME,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_STORAGE_BASE,
    ENV_STORAGE_ENDPOINT,
)
from stepscope_contract.storage import StorageUriError
from stepscope_storage.store import DEFAULT_MULTIPART_CHUNK, DEFAULT_MULTIPART_THRESHOLD, TransferSettings

if TYPE_CHECKING:
    from stepscope_sidecar.agent import Agent
    from stepscope_sidecar.destinations import DestinationPolicy

log = logging.getLogger("stepscope.sidecar")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stepscope sidecar",
        description="capture agent beside a training container",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (the pod IP in a cluster)")
    p.add_argument("--port", type=int, default=DEFAULT_SIDECAR_PORT, help="0 picks a free port")
    p.add_argument("--hook-dir", required=True, help="volume shared with the training container")
    p.add_argument("--token-file", required=True, help="file holding the bearer token (mounted Secret)")
    p.add_argument("--port-file", help="write the bound port here once listening (unset: nowhere)")
    p.add_argument(
        "--storage-base",
        default=os.environ.get(ENV_STORAGE_BASE, ""),
        help=f"comma-separated storage bases sessions must use (default ${ENV_STORAGE_BASE}); none: no capture",
    )
    p.add_argument(
        "--storage-endpoint",
        default=os.environ.get(ENV_STORAGE_ENDPOINT, ""),
        help=f"comma-separated S3-compatible endpoints uploads may use (default ${ENV_STORAGE_ENDPOINT})",
    )
    p.add_argument(
        "--multipart-threshold",
        type=int,
        default=DEFAULT_MULTIPART_THRESHOLD,
        help="bytes above which uploads are multipart",
    )
    p.add_argument("--multipart-chunk", type=int, default=DEFAULT_MULTIPART_CHUNK, help="bytes per multipart part")
    p.add_argument(
        "--retry-attempts",
        type=int,
        default=TransferSettings.attempts,
        help="attempts per storage request (a multipart part is one request); the capture deadline bounds them all",
    )
    p.add_argument(
        "--retry-mode", choices=["standard", "adaptive"], default=TransferSettings.retry_mode, help="botocore retries"
    )
    p.add_argument("--poll-interval", type=float, default=0.2, help="seconds between looks at the hooks' states")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _write_port(path: str, port: int) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(str(port), encoding="utf-8")
    os.replace(tmp, path)


async def _serve(args: argparse.Namespace, agent: Agent, token: str, destinations: DestinationPolicy) -> None:
    import asyncio

    from aiohttp import web

    from stepscope_sidecar.app import build_app

    agent.resume()  # what an earlier process of this sidecar left unfinished in the hook directory
    runner = web.AppRunner(build_app(agent, token, destinations), handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else args.port
    log.info("listening on %s:%s, hook dir %s", args.host, port, args.hook_dir)
    if args.port_file:
        _write_port(args.port_file, port)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str]) -> int:
    import asyncio
    import signal

    args = parse_args(argv)
    # the agent's modules (aiohttp, the storage clients), once the arguments are parsed: `--help` loads none of them
    from stepscope_sidecar import nvml
    from stepscope_sidecar.agent import Agent
    from stepscope_sidecar.agent_metrics import Metrics
    from stepscope_sidecar.auth import TokenError, load_token
    from stepscope_sidecar.capture import AgentConfig
    from stepscope_sidecar.destinations import DestinationPolicy

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        token = load_token(args.token_file)
    except TokenError as exc:
        log.error("%s", exc)
        return 2
    try:
        destinations = DestinationPolicy.from_settings(
            args.storage_base, args.storage_endpoint, os.environ.get(ENV_POD_NAMESPACE)
        )
    except StorageUriError as exc:
        log.error("--storage-base: %s", exc)
        return 2
    if not destinations.bases or not destinations.namespace:
        log.warning("no storage base or namespace configured: every capture request will be refused")
    log.info("uploads allowed to: %s", destinations.describe())
    config = AgentConfig(
        hook_dir=Path(args.hook_dir),
        pod=os.environ.get(ENV_POD_NAME) or None,
        node=os.environ.get(ENV_NODE_NAME) or None,
        poll_s=args.poll_interval,
        transfer=TransferSettings(
            multipart_threshold=args.multipart_threshold,
            multipart_chunk=args.multipart_chunk,
            attempts=args.retry_attempts,
            retry_mode=args.retry_mode,
        ),
    )
    gpu = nvml.probe()
    log.info("GPU metrics: %s", gpu)
    agent = Agent(config, Metrics(), gpu)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            if task is not None:
                loop.add_signal_handler(sig, task.cancel)
        try:
            await _serve(args, agent, token, destinations)
        except asyncio.CancelledError:
            await agent.shutdown()

    asyncio.run(run())
    return 0
