"""Flags users bring from lm-evaluation-harness and inspect_ai, and credo's spelling of
each: ``credo run --tasks gsm8k`` says, in one line, that credo's flag is ``--task``
instead of argparse's bare "unrecognized arguments".

:data:`FOREIGN_FLAGS` maps each flag (as the other tool spells it) to the tool and what
to type in credo; :func:`foreign_flag_hint` finds the first of them among the arguments
argparse did not recognise. A flag the table does not hold gets argparse's own error.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FOREIGN_FLAGS", "foreign_flag_hint"]

_SAMPLING = ("--max-tokens for the length; temperature, top_p and top_k in the config's "
             "sampling: section (--config)")

FOREIGN_FLAGS: dict[str, tuple[str, str]] = {
    "--tasks": ("lm-eval", "--task (one task a run; `credo study` runs several)"),
    "--include_path": ("lm-eval", "--include-path"),
    "--num_fewshot": ("lm-eval", "--num-fewshot"),
    "--gen_kwargs": ("lm-eval", _SAMPLING),
    "--model_args": ("lm-eval", "--model NAME (openai:<model> for a server) with --base-url; "
                     "other options in the config's model_options: section"),
    "--output_path": ("lm-eval", "--out (the run folder)"),
    "--log_samples": ("lm-eval", "nothing: every run folder holds samples.jsonl"),
    "--batch_size": ("lm-eval", "model_options: {max_concurrency: N} in the config "
                     "(--config); the executor batches the requests itself"),
    "--apply_chat_template": ("lm-eval", "nothing: credo sends chat messages, and the "
                              "server or model applies its template"),
    "--device": ("lm-eval", "model_options: {n_gpu_layers: N} in the config (--config) for "
                 "an embedded model"),
    "--epochs": ("inspect", "--n (samples of each question as asked; --m under context "
                 "prefixes)"),
    "--epochs-reducer": ("inspect", "--methods (the scores computed over the samples)"),
    "--temperature": ("inspect", _SAMPLING),
    "--top-p": ("inspect", _SAMPLING),
    "--max_tokens": ("lm-eval", "--max-tokens"),
    "--log-dir": ("inspect", "--out (the run folder)"),
    "--model-base-url": ("inspect", "--base-url"),
    "--base_url": ("lm-eval", "--base-url"),
    "--max-connections": ("inspect", "model_options: {max_concurrency: N} in the config "
                          "(--config)"),
    "-T": ("inspect", "--task lm-eval:NAME or --task-file (credo's tasks take no "
           "arguments)"),
}
"""A flag of lm-eval or inspect -> (the tool, credo's spelling or what stands for it)."""


def foreign_flag_hint(unrecognised: Sequence[str]) -> str | None:
    """One line naming credo's spelling of the first flag of ``unrecognised`` (the
    arguments argparse did not recognise) that :data:`FOREIGN_FLAGS` knows (``--tasks``
    and ``--tasks=gsm8k`` alike); None when none is known."""
    for arg in unrecognised:
        flag = arg.split("=", 1)[0]
        if flag in FOREIGN_FLAGS:
            tool, ours = FOREIGN_FLAGS[flag]
            return f"{flag} is {tool}'s flag, not credo's; credo's spelling: {ours}"
    return None
