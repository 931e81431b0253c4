"""Answer-equivalence kernels k(y, y') with k(y, y) = 1 and 0 <= k <= 1 (Wu et al., App. H)."""

from credo.kernels import embedding as _embedding  # noqa: F401  (registers "embedding")
from credo.kernels import indicator as _indicator  # noqa: F401  (registers "indicator")
from credo.kernels import judge as _judge  # noqa: F401  (registers "judge")
from credo.kernels.registry import KERNELS, Kernel, get_kernel, kernel

__all__ = ["KERNELS", "Kernel", "get_kernel", "kernel"]
