"""A tiny kopf operator used by test_kopf.py (run with `python -m kopf run`)."""

from __future__ import annotations

from typing import Any

import kopf

RESOURCE = ("stepscope.dev", "v1alpha1", "profilesessions")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.level = 0
    settings.watching.connect_timeout = 5


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.create(*RESOURCE, id="accept")
def accept(body: kopf.Body, patch: kopf.Patch, name: str, **_: Any) -> None:
    patch.status["phase"] = "Pending"
    patch.status["progress"] = "0/0"
    kopf.info(body, reason="Accepted", message=f"accepted {name}")


@kopf.on.delete(*RESOURCE, id="abort")
def abort(name: str, logger: kopf.Logger, **_: Any) -> None:
    print(f"DELETE-HANDLED {name}", flush=True)
