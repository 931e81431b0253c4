"""Shared test helpers: a deterministic bag-of-words embedder (no model download), the
context sentences a scripted perturbation writer returns, the toy task and the scripted
model that answers it (one definition, used by every test file that runs the toy task;
issue 31), and a small GSM8K-style task file whose every answer is 18."""

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from credo.devtools.toy_server import CONTEXTS as TOY_CONTEXTS

# Property-based tests (issue 21): CI and `make test` draw a fixed, derandomised set of
# examples (the same every run, a few seconds a suite); `HYPOTHESIS_PROFILE=long` searches
# ten times wider with fresh randomness, for local runs: `HYPOTHESIS_PROFILE=long pytest -q`.
settings.register_profile(
    "ci", max_examples=60, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long", max_examples=600, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Topic-neutral context sentences (the toy model's): scripted models return them as
# perturbations, and a scripted answerer recognises a perturbed prompt by finding one of
# them in it.
CONTEXTS = list(TOY_CONTEXTS)


class BagOfWordsEmbedder:
    """L2-normalised hashed bag of words: equal word sets give cosine 1."""

    name = "bow"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


@pytest.fixture
def bow_embedder():
    return BagOfWordsEmbedder()


def context_writer(messages, seed):
    """A scripted perturbation writer: one of :data:`CONTEXTS`, chosen by the seed."""
    return CONTEXTS[seed % len(CONTEXTS)]


TOY_ITEMS = {
    "easy": ("Tom has two apples and gets three more. How many apples?", "5"),
    "solid": ("Sam has four pens and buys two more. How many pens?", "6"),
    "coin": ("A coin question with answers three or four.", "3"),
    "fragile": ("Seven or eight, depending on the context?", "7"),
    "helped": ("Nine, unless a context nudges it to ten?", "10"),
    "wrong": ("A question the model always gets wrong.", "10"),
    "stuck": ("A question with a stable wrong answer.", "12"),
}
"""The toy task's items (id -> question, gold), each with a fixed behaviour of
:func:`toy_respond`: easy (always right), solid (right 4 times in 5), coin (right half
the time), fragile (right, wrong under any prefix), helped (wrong, right under a
prefix), wrong (unparsable a third of the time, else wrong), stuck (one wrong answer)."""


def toy_task(*ids: str):
    """The toy task (number answers, "arithmetic reasoning") with the items ``ids`` of
    :data:`TOY_ITEMS`, in that order; all of them when none are named."""
    from credo.tasks.base import AnswerFormat, Item, Task

    chosen = ids or tuple(TOY_ITEMS)
    return Task("toy", tuple(Item(i, *TOY_ITEMS[i]) for i in chosen), AnswerFormat.NUMBER,
                domain="arithmetic reasoning")


def toy_respond(messages, seed, *, spread_wrong: bool = True):
    """The scripted model of the toy task: a writer prompt gets a context sentence of
    :data:`CONTEXTS`; a question gets the answer its item's behaviour says
    (:data:`TOY_ITEMS`), a perturbed prompt being one that holds a context sentence.
    ``spread_wrong``: the wrong item's parsable answers vary with the seed (11 to 14),
    else they are all 11."""
    from credo.perturb.context import PROMPTS

    if messages[0].content in PROMPTS.values():
        return CONTEXTS[seed % len(CONTEXTS)]
    user = messages[-1].content
    perturbed = any(c.rstrip(".") in user for c in CONTEXTS)
    if "Tom" in user:
        return "Answer: 5"
    if "Sam" in user:
        return "Answer: 6" if seed % 5 else "Answer: 7"
    if "coin" in user:
        return f"Answer: {3 + seed % 2}"
    if "Seven" in user:
        return "The answer is \\boxed{8}" if perturbed else "Answer: 7"
    if "Nine" in user:
        return "Answer: 10" if perturbed else "Answer: 9"
    if "stable wrong" in user:
        return "Answer: 11"
    if seed % 3 == 0:
        return "I am not sure."
    return f"Answer: {11 + seed % 4}" if spread_wrong else "Answer: 11"


def sums_task_file(tmp: Path, items: int, stem: str = "sums") -> Path:
    """``items`` GSM8K-layout rows ("Sam has k apples and gets 18 - k more", gold 18)
    written to ``tmp/<stem>.jsonl``; use as ``file:gsm8k:<path>``."""
    path = tmp / f"{stem}.jsonl"
    path.write_text("".join(
        json.dumps({"question": f"Sam has {k} apples and gets {18 - k} more. How many?",
                    "answer": "... #### 18"}) + "\n" for k in range(items)))
    return path


@pytest.fixture(autouse=True)
def _library_log_streams_follow_the_test():
    """huggingface_hub and datasets give their library logger a StreamHandler bound to the
    sys.stderr of the moment they first log, which is some earlier test's captured stream,
    closed since: a later record would fail with "I/O operation on closed file" and spill a
    traceback into the output under test. Each test rebinds those handlers to its own
    stderr."""
    import logging
    import sys

    for name in ("huggingface_hub", "datasets", "transformers", "sentence_transformers"):
        for handler in logging.getLogger(name).handlers:
            if type(handler) is logging.StreamHandler:
                handler.stream = sys.stderr  # not setStream: it flushes the closed one
    yield


# ------------------------------------------------------------------ the gateway's tests


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """A scripted calibration run and its certificates
    (:func:`serve_helpers.calibrate_scripted`), once per test module that uses it."""
    from serve_helpers import calibrate_scripted

    return calibrate_scripted(tmp_path_factory.mktemp("scripted"))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A fault server for the whole module and a calibration run against it
    (:func:`serve_helpers.calibrate_served`)."""
    from fault_server import FaultServer
    from serve_helpers import SERVED_ANSWERS, calibrate_served

    with FaultServer(answers=SERVED_ANSWERS) as server:
        yield server, calibrate_served(tmp_path_factory.mktemp("served"), server.url)

