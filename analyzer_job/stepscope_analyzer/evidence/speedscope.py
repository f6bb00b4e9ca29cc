"""The named rank's sampled Python stacks (report.json's python_profile) in speedscope's file format
(https://www.speedscope.app/file-format-schema.json): two sampled profiles in ms per step, the rank's stacks and
its differential against its peers' median. Pure; its size follows the profile's caps."""

from __future__ import annotations

import json
from typing import Any

from stepscope_analyzer.analyses.folded_stacks import parse_frame
from stepscope_contract.python_stacks import FlameStack, PythonProfile

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def _profile(name: str, stacks: list[FlameStack], index: dict[str, int]) -> dict[str, Any]:
    samples = [[index.setdefault(f, len(index)) for f in s.frames] for s in stacks]
    weights = [s.ms_per_step for s in stacks]
    return {"type": "sampled", "name": name, "unit": "milliseconds", "startValue": 0,
            "endValue": round(sum(weights), 4), "samples": samples, "weights": weights}  # fmt: skip


def speedscope_document(profile: PythonProfile) -> dict[str, Any]:
    index: dict[str, int] = {}
    profiles = [
        _profile(f"rank {profile.rank}: Python stacks, ms per step", profile.stacks, index),
        _profile(f"rank {profile.rank} beyond ranks {profile.peers} (median), ms per step", profile.differential,
                 index),
    ]  # fmt: skip
    frames = []
    for text in sorted(index, key=index.__getitem__):
        frame = parse_frame(text)
        entry: dict[str, Any] = {"name": f"{frame.function} ({frame.file}:{frame.line})" if frame.file else text}
        if frame.file:
            entry.update(file=frame.file, line=frame.line)
        frames.append(entry)
    return {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": profiles, "activeProfileIndex": 0,
            "name": f"stepscope: rank {profile.rank}", "exporter": "stepscope"}  # fmt: skip


def speedscope_bytes(profile: PythonProfile) -> bytes:
    return json.dumps(speedscope_document(profile), separators=(",", ":")).encode()
