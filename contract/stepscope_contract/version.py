"""The project's version, as pyproject.toml declares it (tests/contract/test_version.py holds the two and the
installed distribution's metadata equal). Reports, node summaries, outcomes and the sidecar's status carry it: a
constant, since asking the installed metadata costs a command 20-30 ms (importlib.metadata imported, every
site-packages entry listed)."""

VERSION = "0.1.0"

__all__ = ["VERSION"]
