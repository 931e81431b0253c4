"""Tasks (design.md): items and gold answers, loaders, answer extraction, graders.

Importing the package registers every built-in task loader and grader, so
:func:`load_task` and :func:`credo.tasks.graders.get_grader` know them all.
"""

from credo.tasks import builtin as _builtin  # noqa: F401  (gsm8k, mmlu, truthfulqa_mc1)
from credo.tasks import factual as _factual  # noqa: F401  (freshqa, simpleqa)
from credo.tasks import humaneval as _humaneval  # noqa: F401  (humaneval)
from credo.tasks import lm_eval as _lm_eval  # noqa: F401  (lm-eval:<task>, triviaqa, nq_open)
from credo.tasks import longform as _longform  # noqa: F401  (factscore)
from credo.tasks import mcqa as _mcqa  # noqa: F401  (arc, openbookqa, strategyqa, bbh, csqa)
from credo.tasks import named as _named  # noqa: F401  (svamp, popqa)
from credo.tasks import science as _science  # noqa: F401  (sciq, scibench)
from credo.tasks.builtin import list_tasks, load_task

__all__ = ["list_tasks", "load_task"]
