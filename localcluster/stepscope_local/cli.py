"""`stepscope local-cluster`: the embedded cluster in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from stepscope_local.cluster import LocalCluster


def cluster_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="stepscope local-cluster", description=__doc__)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(".demo/cluster"),
        help="kubeconfig, logs and pod volumes (default: .demo/cluster)",
    )
    parser.add_argument("--bucket", action="append", default=[], help="S3 bucket to create (repeatable)")
    parser.add_argument("--nodes", type=int, default=4, help="simulated node names node-0..node-N-1")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    nodes = tuple(f"node-{i}" for i in range(args.nodes))
    with LocalCluster(workdir=args.workdir.resolve(), nodes=nodes, buckets=tuple(args.bucket)) as cluster:
        print(f"kubeconfig:  {cluster.kubeconfig_path}")
        print(f"api server:  {cluster.api.url}")
        print(
            f"S3 endpoint: {cluster.s3_endpoint} (access key {cluster.s3_access_key!r}, "
            f"secret {cluster.s3_secret_key!r})"
        )
        print(f"pod logs:    {cluster.logs_dir}")
        print(f"try: KUBECONFIG={cluster.kubeconfig_path} kubectl get profilesessions   (Ctrl-C stops)", flush=True)
        stop.wait()
    print("local cluster stopped")
    return 0
