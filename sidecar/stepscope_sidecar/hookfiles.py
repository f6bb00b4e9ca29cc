"""The sidecar's side of the hook file protocol (contract wire.py): request.json, state/, captures/."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from stepscope_contract.wire import (
    HOOK_CAPTURES_DIR,
    HOOK_META_FILE,
    HOOK_REQUEST_FILE,
    HOOK_STATE_DIR,
    HookRequest,
    HookState,
    RankMeta,
)


class HookDir:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        (self.root / HOOK_STATE_DIR).mkdir(parents=True, exist_ok=True)
        (self.root / HOOK_CAPTURES_DIR).mkdir(parents=True, exist_ok=True)

    @property
    def request_path(self) -> Path:
        return self.root / HOOK_REQUEST_FILE

    def write_request(self, request: HookRequest) -> None:
        data = request.model_dump_json(by_alias=True)
        fd, tmp = tempfile.mkstemp(prefix=".request-", dir=self.root)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, self.request_path)

    def clear_request(self, capture_id: str) -> None:
        """Remove request.json if it still names `capture_id` (a restarted process must not act on it)."""
        try:
            current = json.loads(self.request_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(current, dict) and current.get("captureId") == capture_id:
            self.request_path.unlink(missing_ok=True)

    def states(self) -> dict[int, HookState]:
        """Every rank that reported in; unreadable or invalid files are skipped (they are rewritten atomically)."""
        out: dict[int, HookState] = {}
        for path in (self.root / HOOK_STATE_DIR).glob("rank-*.json"):
            try:
                state = HookState.model_validate_json(path.read_bytes())
            except (OSError, ValidationError):
                continue
            out[state.rank] = state
        return out

    def rank_dir(self, capture_id: str, rank: int) -> Path:
        return self.root.joinpath(*self.rank_parts(capture_id, rank))

    def rank_parts(self, capture_id: str, rank: int) -> tuple[str, ...]:
        """The folders from the run folder down to the rank's (rank_files.open_rank_files opens them one by one)."""
        return (HOOK_CAPTURES_DIR, capture_id, f"rank-{rank}")

    def capture_dir(self, capture_id: str) -> Path:
        return self.root / HOOK_CAPTURES_DIR / capture_id

    def meta(self, capture_id: str, rank: int) -> tuple[RankMeta | None, str | None]:
        path = self.rank_dir(capture_id, rank) / HOOK_META_FILE
        if not path.exists():
            return None, None
        try:
            return RankMeta.model_validate_json(path.read_bytes()), None
        except (OSError, ValidationError) as exc:
            return None, f"meta.json unreadable: {exc}"
