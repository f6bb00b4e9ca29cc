"""A hung rank's stacks.txt read back: its threads and frames, where its main thread stands, and the text to show.

The hook writes `Thread <id> (<name>):` sections in traceback format (outermost frame first); older hooks added
stepscope's own watchdog thread and a faulthandler section (innermost first), which are read but not shown. Where
the main thread stands is either inside a collective (torch.distributed's collective functions, or autograd's
backward, where DDP's gradient all-reduce runs) -- named with the training line that issued it -- or somewhere else,
named by the innermost frame of the training code. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_gather",
        "reduce_scatter_tensor",
        "reduce_scatter",
        "all_to_all_single",
        "all_to_all",
        "broadcast_object_list",
        "broadcast",
        "barrier",
        "monitored_barrier",
        "reduce",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
    }
)
BACKWARD_FUNCTIONS = frozenset({"_engine_run_backward", "run_backward"})
DDP_BACKWARD = "backward (DDP gradient all-reduce)"
WATCHDOG_THREAD = "stepscope-watchdog"
_THREAD = re.compile(r"^Thread (?P<ident>\S+) \((?P<name>.*)\):\s*$")
_FAULT_THREAD = re.compile(r"^(?:Current thread|Thread) (?P<ident>0x[0-9a-fA-F]+) \(most recent call first\):")
# `File "...", line 12, in fn` (traceback) or `File "...", line 12 in fn` (faulthandler)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+),? in (?P<fn>\S+)')
# matched against "/" + the path: the hook writes paths relative to site-packages, the stdlib or the job's folders
_LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "/stepscope_hook/", "<frozen ", "<string>")
_OWN = ("/stepscope_hook/", "stepscope_hook/_")
_TORCH_FILES = ("distributed_c10d.py", "c10d_logger.py")
MAX_SHOWN_CHARS = 20_000


@dataclass(frozen=True)
class StackFrame:
    filename: str
    line: int
    function: str
    code: str = ""

    @property
    def text(self) -> str:
        return f"{PurePosixPath(self.filename.replace(chr(92), '/')).name}:{self.line} in {self.function}"

    @property
    def library(self) -> bool:
        return any(marker in "/" + self.filename for marker in _LIBRARY)


@dataclass
class ThreadStack:
    ident: str
    name: str
    frames: list[StackFrame] = field(default_factory=list)  # outermost first
    lines: list[str] = field(default_factory=list)

    @property
    def own(self) -> bool:
        """stepscope's own watchdog thread (by name, or by its frames in older dumps)."""
        return self.name == WATCHDOG_THREAD or any(
            f.function in ("_watch", "_watch_once") and any(m in f.filename for m in _OWN) for f in self.frames
        )


@dataclass(frozen=True)
class Position:
    """Where a rank's main thread stands."""

    collective: str | None  # what it waits in; None: outside any collective
    location: str | None  # the training line that issued the collective, or the frame where it is stuck
    has_stacks: bool


@dataclass
class ParsedStacks:
    header: list[str]
    threads: list[ThreadStack]
    exception: list[str]

    @property
    def main(self) -> ThreadStack | None:
        mine = [t for t in self.threads if not t.own]
        return next((t for t in mine if t.name == "MainThread"), mine[0] if mine else None)


def parse_stacks(text: str) -> ParsedStacks:
    header: list[str] = []
    threads: list[ThreadStack] = []
    exception: list[str] = []
    current: ThreadStack | None = None
    section = "header"
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("--- faulthandler ---") or _FAULT_THREAD.match(line):
            section, current = "faulthandler", None
            continue
        if section == "faulthandler":
            continue  # the same frames again, innermost first: the Python section is the one used
        match = _THREAD.match(line)
        if match:
            current = ThreadStack(match.group("ident"), match.group("name"))
            threads.append(current)
            section = "thread"
            continue
        if line.startswith("Exception that ended the training process"):
            section, current = "exception", None
        if section == "exception":
            exception.append(line)
        elif current is not None:
            _add_line(current, line)
        elif section == "header":
            header.append(line)
    if not threads:
        threads = _faulthandler_threads(text)
    if not threads:  # bare frame lines, no thread header: read them as one thread, in the order given
        bare = ThreadStack("?", "MainThread")
        for line in text.splitlines():
            if _FRAME.match(line):
                _add_line(bare, line.rstrip())
        threads = [bare] if bare.frames else []
    return ParsedStacks(header, threads, exception)


def _add_line(thread: ThreadStack, line: str) -> None:
    thread.lines.append(line)
    frame = _FRAME.match(line)
    if frame:
        thread.frames.append(StackFrame(frame.group("file"), int(frame.group("line")), frame.group("fn")))
    elif thread.frames and line.strip() and line.startswith("    "):
        last = thread.frames[-1]
        thread.frames[-1] = StackFrame(last.filename, last.line, last.function, line.strip())


def _faulthandler_threads(text: str) -> list[ThreadStack]:
    """Only a faulthandler dump (innermost frame first): its threads, frames turned outermost first."""
    threads: list[ThreadStack] = []
    current: ThreadStack | None = None
    for line in text.splitlines():
        match = _FAULT_THREAD.match(line)
        if match:
            current = ThreadStack(match.group("ident"), "Current thread" if line.startswith("Current") else "?")
            threads.append(current)
        elif current is not None and (frame := _FRAME.match(line)):
            current.frames.insert(0, StackFrame(frame.group("file"), int(frame.group("line")), frame.group("fn")))
            current.lines.insert(0, line)
    if threads and all(t.name != "MainThread" for t in threads):
        # faulthandler does not name threads; the main thread is the one whose outermost frame is <module>
        for t in threads:
            if t.frames and t.frames[0].function == "<module>":
                t.name = "MainThread"
                break
    return threads


def _training_frame(frames: list[StackFrame]) -> StackFrame | None:
    """Innermost frame of the training code; else innermost outside torch; else innermost."""
    for frame in reversed(frames):
        if not frame.library:
            return frame
    for frame in reversed(frames):
        if "/torch/" not in "/" + frame.filename and not any(m in frame.filename for m in _OWN):
            return frame
    return frames[-1] if frames else None


def position(stacks: ParsedStacks) -> Position:
    main = stacks.main
    if main is None or not main.frames:
        return Position(None, None, False)
    frames = main.frames
    for i in range(len(frames) - 1, -1, -1):
        frame = frames[i]
        path = "/" + frame.filename.replace("\\", "/")
        in_torch = "/torch/" in path or path.endswith(_TORCH_FILES)
        if frame.function in COLLECTIVES and in_torch:
            issued = _training_frame(frames[:i])
            return Position(frame.function, issued.text if issued else frame.text, True)
        if frame.function in BACKWARD_FUNCTIONS and in_torch:
            issued = _training_frame(frames[:i])
            return Position(DDP_BACKWARD, issued.text if issued else frame.text, True)
    stuck = _training_frame(frames)
    return Position(None, stuck.text if stuck else None, True)


def shown_stacks(stacks: ParsedStacks, raw: str) -> str:
    """The text a person reads: header, the exception (if the process exited), the main thread first, then the
    other threads; stepscope's own thread and faulthandler's repeat left out. Falls back to the raw text."""
    mine = [t for t in stacks.threads if not t.own]
    if not mine:
        return raw[:MAX_SHOWN_CHARS]
    main = stacks.main
    ordered = ([main] if main else []) + [t for t in mine if t is not main]
    parts = [line for line in stacks.header if line.strip()]
    if stacks.exception:
        parts += ["", *stacks.exception]
    for thread in ordered:
        parts += ["", f"Thread {thread.ident} ({thread.name}):", *thread.lines]
    text = "\n".join(parts).strip("\n") + "\n"
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def main_thread_text(stacks: ParsedStacks) -> str:
    """The main thread alone: what the report groups ranks by."""
    main = stacks.main
    return "\n".join(main.lines) if main else ""
