"""Credentials: the variable names in one place, a Secret's keys as secretKeyRef env, secrets never printed."""

from __future__ import annotations

import pytest

from stepscope_storage.credentials import (
    ENV_ACCESS_KEY_ID,
    ENV_SECRET_ACCESS_KEY,
    Credentials,
    secret_env,
)

pytestmark = pytest.mark.unit


def test_keys_from_the_environment_or_the_provider_chain() -> None:
    assert Credentials.from_env({}) is None
    creds = Credentials.from_env({ENV_ACCESS_KEY_ID: "AKIA1234", ENV_SECRET_ACCESS_KEY: "s3cr3t"})
    assert creds == Credentials("AKIA1234", "s3cr3t", None)
    assert "s3cr3t" not in repr(creds) and "AKIA1234" not in repr(creds)


def test_a_secret_becomes_secret_key_ref_env() -> None:
    env = secret_env("team-keys", "id", "secret")
    assert env == [
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {"name": "team-keys", "key": "id"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "team-keys", "key": "secret"}}},
    ]
    optional = secret_env("team-keys", "id", "secret", optional=True)
    assert all(e["valueFrom"]["secretKeyRef"]["optional"] is True for e in optional)
