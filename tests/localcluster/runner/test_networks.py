"""Each running local cluster claims a loopback /16 of its own for pod IPs (runner.networks): a claim held here or
in another process is never handed out again until it is released, a released one can be claimed again, and a
network the caller names is used as given. The tests keep their claims in a folder of their own: exhausting the
machine's would stop the clusters of tests running beside them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stepscope_local.runner.networks import claim_network

pytestmark = pytest.mark.unit


def test_claims_held_at_once_are_distinct_and_a_released_one_is_free_again(tmp_path: Path) -> None:
    claims = [claim_network(claims=tmp_path) for _ in range(20)]
    try:
        networks = [c.network for c in claims]
        assert len(set(networks)) == 20
        assert all(n.startswith("127.") and n.endswith(".0.0/16") for n in networks)
    finally:
        for c in claims:
            c.release()
    again = [claim_network(claims=tmp_path) for _ in range(254)]  # every network, the released ones among them
    try:
        assert set(networks) <= {c.network for c in again}
        with pytest.raises(RuntimeError, match="every loopback /16 is claimed"):
            claim_network(claims=tmp_path)
    finally:
        for c in again:
            c.release()


def test_another_process_s_claim_is_not_handed_out(tmp_path: Path) -> None:
    holder = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from stepscope_local.runner.networks import claim_network
        claims = [claim_network(claims=Path({str(tmp_path)!r})) for _ in range(253)]
        print(" ".join(c.network for c in claims), flush=True)
        sys.stdin.read()  # hold them until told
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        held = set(proc.stdout.readline().split())
        assert len(held) == 253
        mine = claim_network(claims=tmp_path)  # the one network the other process left
        try:
            assert mine.network not in held
        finally:
            mine.release()
    finally:
        proc.communicate("", timeout=30)


def test_a_named_network_is_used_as_given() -> None:
    claim = claim_network("127.0.0.0/16")
    assert claim.network == "127.0.0.0/16"
    claim.release()
