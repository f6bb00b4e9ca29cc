"""HTA's kernel classes, decided on the full kernel name (first match wins)."""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from stepscope_analyzer.analyses.sorted_values import distinct

_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_OTHER = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


class KernelType(IntEnum):
    COMPUTATION = 0
    COMMUNICATION = 1
    MEMORY = 2
    OTHER = 3


def kernel_type(name: str) -> KernelType:
    if _COMM.match(name):
        return KernelType.COMMUNICATION
    if _MEMORY.match(name):
        return KernelType.MEMORY
    if _OTHER.match(name):
        return KernelType.OTHER
    return KernelType.COMPUTATION


def kernel_types_of(names: list[str], name_ids: npt.NDArray[np.int32]) -> npt.NDArray[np.int8]:
    """Kernel type of each row, classifying every distinct name once."""
    used = distinct(name_ids)
    table = np.full(len(names), KernelType.OTHER, dtype=np.int8)
    for nid in used.tolist():
        table[nid] = kernel_type(names[nid])
    return table[name_ids] if name_ids.size else np.empty(0, dtype=np.int8)
