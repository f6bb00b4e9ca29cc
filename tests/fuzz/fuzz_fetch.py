"""Coverage-guided fuzzing (atheris, libFuzzer) of the fetch path (fetch_paths.py): a session's folder from any
storage base, namespace, name and uid, and where any stored key lands below the download folder.

    python tests/fuzz/fuzz_fetch.py [libFuzzer flags] [CORPUS_DIR ...]

`make test` runs it for a few seconds (test_fuzz_fetch.py), `make fuzz` for FUZZ_SECONDS with a corpus in
.fuzz/fetch.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["stepscope_contract", "stepscope_storage"]):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fetch_paths import BASES, check_session

    from stepscope_contract.storage import FetchLayout

ROOT = Path(tempfile.mkdtemp(prefix="fuzz-fetch-")).resolve()
LAYOUTS = tuple(FetchLayout)


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    choice = fdp.ConsumeIntInRange(0, len(BASES))
    base = BASES[choice] if choice < len(BASES) else fdp.ConsumeUnicodeNoSurrogates(40)
    layout = LAYOUTS[fdp.ConsumeIntInRange(0, len(LAYOUTS) - 1)]
    namespace, name, uid = (fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 80)) for _ in range(3))
    keys = [fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 120)) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    check_session(base, namespace, name, uid, keys, layout, ROOT)


def main(argv: list[str]) -> None:
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        Path(dirs[0]).mkdir(parents=True, exist_ok=True)
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
