"""Runs the emulator's Pods and Jobs as local processes, from their manifests."""

from stepscope_local.runner.controller import Runner

__all__ = ["Runner"]
