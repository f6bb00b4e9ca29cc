"""sitecustomize + import hook, in fresh interpreters: chain-loading, no eager torch import, registration."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

HOOK_SRC = Path(__file__).resolve().parents[3] / "sidecar" / "stepscope_hook"


def test_hook_sources_parse_as_python_3_9_and_import_only_stdlib_and_torch() -> None:
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__", "stepscope_hook"}
    for path in HOOK_SRC.glob("*.py"):
        tree = ast.parse(path.read_text(), feature_version=(3, 9))
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Match), path
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
        source = path.read_text()
        assert "from __future__ import annotations" in source, path.name


def run_python(code: str, pythonpath: list[Path], hook_dir: Path | None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEPSCOPE_", "PYTHONPATH"))}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    if hook_dir is not None:
        env["STEPSCOPE_HOOK_DIR"] = str(hook_dir)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


PROBE = """
import json, os, sys
print(json.dumps({"torch": "torch" in sys.modules, "hook": "stepscope_hook" in sys.modules,
                  "chained": os.environ.get("IMAGE_SITECUSTOMIZE_RAN"),
                  "watchers": [type(f).__name__ for f in sys.meta_path]}))
"""


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    from stepscope_sidecar.install import install

    dest = tmp_path / "hook"
    written = install(dest)
    assert (dest / "sitecustomize.py").is_file() and (dest / "stepscope_hook" / "__init__.py").is_file()
    assert written == [dest / "sitecustomize.py", dest / "stepscope_hook"]
    install(dest)  # idempotent
    return dest


def test_sitecustomize_chain_loads_the_images_own_and_does_not_import_torch(installed: Path, tmp_path: Path) -> None:
    image = tmp_path / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text("import os\nos.environ['IMAGE_SITECUSTOMIZE_RAN'] = 'yes'\n")
    res = run_python(PROBE, [installed, image], tmp_path / "run")
    assert res["chained"] == "yes" and res["hook"] is True and res["torch"] is False
    assert "OptimizerImportWatcher" in res["watchers"]  # type: ignore[operator]


def test_without_a_hook_dir_nothing_is_activated(installed: Path, tmp_path: Path) -> None:
    res = run_python(PROBE, [installed], None)
    assert res["hook"] is False and res["torch"] is False


def test_importing_torch_registers_the_optimizer_hook(installed: Path, tmp_path: Path) -> None:
    code = """
import json, sys, torch
from torch.optim import optimizer
print(json.dumps({"hooks": len(optimizer._global_optimizer_post_hooks),
                  "watchers": [type(f).__name__ for f in sys.meta_path]}))
"""
    res = run_python(code, [installed], tmp_path / "run")
    assert res["hooks"] == 1 and "OptimizerImportWatcher" not in res["watchers"]  # type: ignore[operator]
