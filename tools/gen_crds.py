"""Write the generated CRDs to each path given (crds/ and the Helm chart): the file's name says which CRD."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from stepscope_contract.constants import CRD_NAME, TRIGGER_CRD_NAME
from stepscope_contract.crd import render_crd_yaml
from stepscope_contract.trigger_crd import render_trigger_crd_yaml

RENDERERS: dict[str, Callable[[], str]] = {
    f"{CRD_NAME}.yaml": render_crd_yaml,
    f"{TRIGGER_CRD_NAME}.yaml": render_trigger_crd_yaml,
}


def main(paths: list[str]) -> int:
    for path in paths:
        target = Path(path)
        render = RENDERERS.get(target.name)
        if render is None:
            print(f"{target}: name it one of {', '.join(sorted(RENDERERS))}", file=sys.stderr)
            return 2
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render())
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
