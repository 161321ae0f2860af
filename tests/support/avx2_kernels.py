"""What the float32 AVX2 kernels' tests share: the skip where they cannot run (the library
itself is built once per session: ``tests/engine/conftest.py``'s ``gemv_f32``)."""

from __future__ import annotations

import pytest

from engine.embedded.gemv_f32 import unsupported_reason

REASON = unsupported_reason()
needs_avx2 = pytest.mark.skipif(REASON is not None, reason=f"AVX2 kernels cannot run: {REASON}")
