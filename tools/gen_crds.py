"""Write the generated ProfileSession CRD to each path given (crds/ and the Helm chart)."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope_contract.crd import render_crd_yaml


def main(paths: list[str]) -> int:
    text = render_crd_yaml()
    for path in paths:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
