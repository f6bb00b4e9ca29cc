"""The hook writes source paths relative to site-packages, the standard library or the job's own folders: a recorded
stack names no machine's layout, and the analyzer still tells library frames from the training code's."""

from __future__ import annotations

import re
import threading

import pytest

from stepscope_hook._paths import portable_lines, portable_path
from stepscope_hook._stacks import format_all_stacks

pytestmark = pytest.mark.unit

ROOTS = ["/pods/default/train-0/volumes/script", "/pods/default/train-0/volumes/stepscope-hook"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/opt/x/.venv/lib/python3.12/site-packages/torch/_tensor.py", "site-packages/torch/_tensor.py"),
        ("/usr/lib/python3/dist-packages/numpy/core.py", "dist-packages/numpy/core.py"),
        ("/usr/lib/python3.12/threading.py", "lib/python3.12/threading.py"),
        ("/pods/default/train-0/volumes/script/train.py", "train.py"),
        ("/pods/default/train-0/volumes/stepscope-hook/stepscope_hook/_telemetry.py", "stepscope_hook/_telemetry.py"),
        ("/srv/elsewhere/pkg/mod.py", "pkg/mod.py"),
        ("train.py", "train.py"),
        ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>"),
        ("<string>", "<string>"),
    ],
)
def test_a_path_is_written_without_the_machine_layout(path: str, expected: str) -> None:
    assert portable_path(path, ROOTS, "/usr/lib/python3.12") == expected


def test_traceback_lines_are_rewritten_and_nothing_else() -> None:
    text = 'Thread 1 (MainThread):\n  File "/usr/lib/python3.12/threading.py", line 9, in run\n    x = "/keep/this"\n'
    out = portable_lines(text, ROOTS, "/usr/lib/python3.12")
    assert out == 'Thread 1 (MainThread):\n  File "lib/python3.12/threading.py", line 9, in run\n    x = "/keep/this"\n'


def test_this_processs_stacks_name_no_absolute_source_file() -> None:
    """The test process's own stacks: pytest and pluggy in site-packages, the stdlib, this file under the working
    directory; none is written with its absolute path, and this test's frame is found by its relative path."""
    out: list[str] = []
    writer = threading.Thread(target=lambda: out.append(format_all_stacks(1.0)))  # the writer leaves itself out
    writer.start()
    writer.join()
    text = out[0]
    assert re.findall(r'File "(/[^"]+)"', text) == []
    assert 'File "tests/sidecar/hook/test_paths.py"' in text
    assert 'File "site-packages/_pytest/' in text or 'File "site-packages/pluggy/' in text
