"""What a target pod's containers say about its rank. A training container that terminated (OOMKilled, Error, a
signal's exit code) ends the rank at once, with the kubelet's reason and exit code, instead of leaving it to the
capture deadline: the hook's step watchdog lives in the process that died. Pure functions over pod dicts.

The training containers are the one `spec.targets.container` names, else every regular container but stepscope's
sidecar (a native sidecar is an init container and never one of them). A sidecar that still reports on its capture
goes first: a rank whose hook recorded its own error (a collective that failed because a peer died) is uploading its
stacks and Flight Recorder dump when its process exits, and is left to finish (`CRASH_GRACE_SECONDS`).

A sidecar the kubelet is starting again is not lost while it is down (`sidecar_restarting`): it resumes its capture
from the hook directory."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from stepscope_contract.constants import SIDECAR_CONTAINER_NAME
from stepscope_contract.session import TargetState, TargetStatus

CRASH_GRACE_SECONDS = 3.0
"""how long after a training container terminated its sidecar may still move the rank on (to uploading or a final
state) before the rank is ended as Crashed"""

_WAITING_STATES = frozenset({TargetState.PENDING, TargetState.SIGNALLED, TargetState.CAPTURING})
"""target states in which a dead training process leaves the rank waiting for the capture deadline"""

MAX_REASON = 64


@dataclass(frozen=True)
class Termination:
    """One training container's end, as the kubelet reports it in the pod's status."""

    container: str
    reason: str
    exit_code: int | None
    finished_at: datetime | None

    def describe(self) -> str:
        """'training container trainer terminated: OOMKilled (exit code 137, SIGKILL)'"""
        code = "no exit code" if self.exit_code is None else f"exit code {self.exit_code}"
        if self.exit_code is not None and 128 < self.exit_code < 128 + 65:
            with contextlib.suppress(ValueError):
                code += f", {signal.Signals(self.exit_code - 128).name}"
        return f"training container {self.container} terminated: {self.reason} ({code})"


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _training_names(pod: Mapping[str, Any], container: str | None) -> set[str]:
    if container is not None:
        return {container}
    containers = (pod.get("spec") or {}).get("containers") or []
    return {str(c.get("name")) for c in containers if c.get("name") != SIDECAR_CONTAINER_NAME}


def _exit_code(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def training_termination(pod: Mapping[str, Any], container: str | None = None) -> Termination | None:
    """The first training container of `pod` whose current state is terminated (None: all still run, or the pod
    says nothing yet). `container`: spec.targets.container."""
    names = _training_names(pod, container)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if not isinstance(status, Mapping) or status.get("name") not in names:
            continue
        terminated = (status.get("state") or {}).get("terminated")
        if not isinstance(terminated, Mapping):
            continue
        code = _exit_code(terminated.get("exitCode"))
        reason = str(terminated.get("reason") or ("Completed" if code == 0 else "Error"))[:MAX_REASON]
        return Termination(str(status.get("name")), reason, code, _parse_time(terminated.get("finishedAt")))
    return None


def sidecar_restarting(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's stepscope sidecar is down but the kubelet starts it again (a native sidecar, or a pod whose
    restartPolicy restarts its containers): its capture is then resumed from the hook directory, and a sidecar
    that does not answer meanwhile is not lost."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    native = any(
        c.get("name") == SIDECAR_CONTAINER_NAME and c.get("restartPolicy") == "Always"
        for c in spec.get("initContainers") or []
    )
    if not native and spec.get("restartPolicy") not in ("Always", "OnFailure"):
        return False
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    mine = next((s for s in statuses if isinstance(s, Mapping) and s.get("name") == SIDECAR_CONTAINER_NAME), None)
    state = (mine or {}).get("state") or {}
    return mine is not None and "running" not in state and (pod.get("metadata") or {}).get("deletionTimestamp") is None


def crashed(target: TargetStatus, termination: Termination | None, now: datetime) -> bool:
    """Whether the rank ends as Crashed now: its training container terminated while the rank waits for a step its
    process will never take, and its sidecar had `CRASH_GRACE_SECONDS` to say otherwise."""
    if termination is None or target.state not in _WAITING_STATES:
        return False
    finished = termination.finished_at
    return finished is None or now - finished >= timedelta(seconds=CRASH_GRACE_SECONDS)
