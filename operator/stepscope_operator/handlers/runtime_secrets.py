"""kopf startup handler of runtime_secrets.py: before the other startup handlers read the master token file and the
webhook's certificate, the Secrets holding them are made when absent (or read when present) and written there.
Each part runs only when the chart left it to the operator: `STEPSCOPE_SIDECAR_MASTER_SECRET` for the master token,
`STEPSCOPE_WEBHOOK_TLS_SECRET` (with `STEPSCOPE_WEBHOOK_SERVICE` and `STEPSCOPE_WEBHOOK_CONFIGURATION`) for the
webhook's certificate; both live in `STEPSCOPE_OPERATOR_NAMESPACE`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kopf

from stepscope_operator.runtime.config import OperatorConfig
from stepscope_operator.runtime.kube import Kube
from stepscope_operator.runtime.secrets import TLS_DAYS, ensure_master, ensure_webhook_tls


async def ensure_install_secrets(env: Mapping[str, str], logger: Any) -> None:
    master = env.get("STEPSCOPE_SIDECAR_MASTER_SECRET", "")
    tls = env.get("STEPSCOPE_WEBHOOK_TLS_SECRET", "")
    if not master and not tls:
        return
    namespace = env.get("STEPSCOPE_OPERATOR_NAMESPACE") or "stepscope-system"
    kube = Kube()
    try:
        if master:
            token_file = Path(OperatorConfig.from_env(env).sidecar_token_file)
            created = await ensure_master(kube, namespace, master, token_file)
            logger.info("sidecar master token: %s Secret %s/%s", "created" if created else "read", namespace, master)
        if tls:
            cert_dir = Path(env.get("STEPSCOPE_WEBHOOK_CERT_DIR") or "/etc/stepscope/webhook-tls")
            made, patched = await ensure_webhook_tls(
                kube, namespace, tls, service=env.get("STEPSCOPE_WEBHOOK_SERVICE", ""), cert_dir=cert_dir,
                configuration=env.get("STEPSCOPE_WEBHOOK_CONFIGURATION", ""),
                days=int(env.get("STEPSCOPE_WEBHOOK_TLS_DAYS") or TLS_DAYS),
            )  # fmt: skip
            logger.info(
                "webhook certificate: %s Secret %s/%s%s", "created" if made else "read", namespace, tls,
                "; caBundle set" if patched else "",
            )  # fmt: skip
    finally:
        kube.close()


@kopf.on.startup(id="install-secrets")  # a failure is retried by kopf before the operator goes on
async def install_secrets(logger: kopf.Logger, **_: Any) -> None:
    await ensure_install_secrets(os.environ, logger)
