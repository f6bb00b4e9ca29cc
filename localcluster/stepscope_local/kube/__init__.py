"""Kubernetes API emulator: kmock's KubernetesEmulator with the fidelity kopf and kubectl need."""

from stepscope_local.kube.errors import ApiError
from stepscope_local.kube.server import EmulatorServer, write_kubeconfig
from stepscope_local.kube.store import Store

__all__ = ["ApiError", "EmulatorServer", "Store", "write_kubeconfig"]
