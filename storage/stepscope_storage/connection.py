"""Endpoint settings given on a command line (`stepscope analyze --endpoint ...`, `stepscope fetch ...`): the same
three fields a session's storage spec has."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from stepscope_contract.storage import AddressingStyle


@dataclass(frozen=True)
class Connection:
    endpoint: str | None = None
    region: str | None = None
    addressing_style: AddressingStyle = AddressingStyle.AUTO

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Connection:
        """The settings `add_arguments` declared, as parsed."""
        return cls(args.endpoint, args.region, AddressingStyle(args.addressing_style))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--endpoint`, `--region` and `--addressing-style`, as every command that reads object storage takes them."""
    parser.add_argument("--endpoint", default=None, help="S3-compatible endpoint URL (MinIO, OSS; unset: AWS)")
    parser.add_argument(
        "--region",
        default=None,
        help="object store region (unset: the environment's; oss:// derives its endpoint from it)",
    )
    parser.add_argument(
        "--addressing-style", default="auto", choices=[s.value for s in AddressingStyle], help="S3 addressing style"
    )
