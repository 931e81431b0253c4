"""A stopping rule from outside credo: stop every stage at ``min`` samples."""

from __future__ import annotations

from credo.plan.adaptive import StoppingRule, stopping_rule


@stopping_rule("at_minimum")
class AtMinimum(StoppingRule):
    """Stops once ``min`` samples are drawn (``settled`` reads a rule only from there)."""

    def holds(self, config, originals, perturbed, size) -> bool:
        return True
