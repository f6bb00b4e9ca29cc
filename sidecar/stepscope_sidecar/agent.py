"""The pod's capture bookkeeping: one active capture at a time, idempotent per capture id."""

from __future__ import annotations

from collections import OrderedDict

from stepscope_contract.version import VERSION
from stepscope_contract.wire import AgentStatus, CaptureRequest, CaptureStatus
from stepscope_sidecar import capture_records as records
from stepscope_sidecar.agent_metrics import Metrics
from stepscope_sidecar.capture import AgentConfig, CaptureRun
from stepscope_sidecar.hookfiles import HookDir

HISTORY = 32


class Busy(Exception):
    def __init__(self, active: str) -> None:
        super().__init__(f"capture '{active}' is still active")
        self.active = active


class Agent:
    def __init__(self, config: AgentConfig, metrics: Metrics, gpu_metrics: str) -> None:
        self.config = config
        self.metrics = metrics
        self.hooks = HookDir(config.hook_dir)
        self.gpu_metrics = gpu_metrics
        self.captures: OrderedDict[str, CaptureRun] = OrderedDict()
        self.current: CaptureRun | None = None

    def start(self, request: CaptureRequest) -> tuple[CaptureStatus, bool]:
        """(status, created). Raises Busy when another capture id is active."""
        existing = self.captures.get(request.capture_id)
        if existing is not None:
            return existing.status, False
        if self.current is not None and not self.current.status.state.terminal:
            raise Busy(self.current.capture_id)
        run = CaptureRun(request, self.config, self.hooks, self.metrics)
        self.captures[request.capture_id] = run
        while len(self.captures) > HISTORY:
            self.captures.popitem(last=False)
        self.current = run
        run.start()
        return run.status, True

    def resume(self) -> list[str]:
        """After a restart: the captures an earlier process of this sidecar recorded in the hook directory, the
        finished ones answered from their final status, an unfinished one carried on (capture_records). Needs the
        running event loop. The ids resumed."""
        resumed = []
        for saved in records.saved_requests(self.hooks):
            run = CaptureRun(saved.request, self.config, self.hooks, self.metrics, started_at=saved.started_at)
            final = records.final_status(self.hooks, run.capture_id)
            self.captures[run.capture_id] = run
            if final is not None:
                run.status = final
                continue
            if self.current is not None and not self.current.status.state.terminal:
                continue  # one capture at a time: the later one waits for the operator to ask again
            self.current = run
            run.resume()
            resumed.append(run.capture_id)
        while len(self.captures) > HISTORY:
            self.captures.popitem(last=False)
        return resumed

    def get(self, capture_id: str) -> CaptureRun | None:
        return self.captures.get(capture_id)

    def status(self) -> AgentStatus:
        ranks = sorted(self.hooks.states())
        self.metrics.hook_ranks.set(len(ranks))
        busy = self.current is not None and not self.current.status.state.terminal
        self.metrics.busy.set(1 if busy else 0)
        return AgentStatus(
            version=VERSION,
            pod=self.config.pod,
            node=self.config.node,
            busy=busy,
            current=self.current.status if self.current is not None else None,
            hook_ranks=ranks,
            gpu_metrics=self.gpu_metrics,
        )

    async def shutdown(self) -> None:
        if self.current is not None and not self.current.status.state.terminal:
            await self.current.abort()
