"""Where a step's attention runs: the native kernels' interfaces (``PrefillKernel``,
``DecodeKernel``) and the route that sends each prefill segment to a kernel or to PyTorch's
SDPA (``PrefillRoute``). ``attention.py`` plans and runs steps on them; ``calibrate.py``
chooses the route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

# prefill segments up to this many tokens use matmul attention (e.g. a 50-token question after a
# cached 1,500-token prefix: ~2x faster than CPU SDPA in bfloat16); longer ones use SDPA
SHORT_SEGMENT = 128


# where a prefill segment attends with the native kernels loaded: their AVX-512 kernel, their
# AMX kernel (``NativeKernels.amx_prefill_supports``), or PyTorch's SDPA
PREFILL_PATHS = ("native", "amx", "sdpa")


@dataclass(frozen=True)
class PrefillRoute:
    """Where prefill segments attend when the native kernels are loaded (``PREFILL_PATHS``),
    separately for long segments and short ones (``<= SHORT_SEGMENT``). The AVX-512 kernel was
    written for a CPU without AMX (Zen 4), where it beats SDPA; on a CPU with AMX tiles SDPA
    runs 2-3x faster than it, and the AMX kernel faster still. ``calibrate.py`` times them
    when the engine loads."""

    long: str = "native"
    short: str = "native"

    def __post_init__(self) -> None:
        if self.long not in PREFILL_PATHS or self.short not in PREFILL_PATHS:
            raise ValueError(f"prefill route: each path must be one of {PREFILL_PATHS}")

    def path(self, count: int) -> str:
        return self.short if count <= SHORT_SEGMENT else self.long

    def summary(self) -> str:
        """Where prefill attends, in words, e.g. "prefill attention on amx"."""
        if self.long == self.short:
            return f"prefill attention on {self.long}"
        return f"long prefill segments on {self.long}, short on {self.short}"


NATIVE_PREFILL = PrefillRoute()


class PrefillKernel(Protocol):
    """Native prefill attention (``NativeKernels``, or ``attention_f32.NativePrefillF32``)."""

    name: str

    def prefill(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        out: torch.Tensor,
        start: int,
        scale: float,
        amx: bool = False,
    ) -> None: ...


class DecodeKernel(Protocol):
    """Native decode attention (``NativeKernels``, or ``attention_f32.NativeDecodeF32``)."""

    def decode(
        self,
        query: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        lengths: torch.Tensor,
        shared: int,
        out: torch.Tensor,
        scale: float,
        slots: torch.Tensor | None = None,
    ) -> None: ...
