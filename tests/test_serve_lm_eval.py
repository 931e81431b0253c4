"""The gateway serves what was certified on a tool's task: a certificate of ``credo run
--task lm-eval:<task>`` is served through ``credo serve``, each question rendered by the
task's own template (its plain text, or the document as JSON) and read by its filter,
sent with the task's generation settings; a certificate made on a tool's log is refused
in one line naming what the log does not record; so is an lm-eval certificate that does
not record the task's few-shot count and revision. The model is the loopback toy model
and the task a local lm-eval task."""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from credo.cli import main
from credo.devtools.toy_server import ToyModelServer
from credo.integrations import question_score
from serve_helpers import ServeProcess

pytest.importorskip("lm_eval")


class CountingToy(ToyModelServer):
    """The toy model, keeping every chat request body it answered."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        super().__init__()

    def completion(self, body):
        self.bodies.append(dict(body))
        return super().completion(body)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _task(folder: Path) -> None:
    """``toy_sums``: 60 sums of one to three digits (the toy model gets small ones right
    more often), asked as "Question: ...\\nAnswer:", cut at a newline, 8 tokens, the
    first number of the reply compared with exact_match."""
    folder.mkdir()
    r = random.Random(3)
    rows = []
    for _ in range(60):
        d = r.choice([1, 2, 3])
        low = 10 ** (d - 1) if d > 1 else 1
        a, b = r.randrange(low, 10 ** d), r.randrange(low, 10 ** d)
        rows.append({"q": f"What is {a} + {b}?", "a": str(a + b)})
    (folder / "sums.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    (folder / "toy_sums.yaml").write_text(f"""\
task: toy_sums
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder / 'sums.jsonl'}
output_type: generate_until
test_split: test
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
filter_list:
  - name: get-answer
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
""")


@pytest.fixture
def certified(tmp_path):
    """A run of lm-eval:toy_sums on the toy model and its certificate (alpha 0.2)."""
    tasks = tmp_path / "tasks"
    _task(tasks)
    with CountingToy() as toy:
        assert main(["run", "--task", "lm-eval:toy_sums", "--include-path", str(tasks),
                     "--model", "openai:toy", "--base-url", toy.url, "--methods",
                     "self_consistency", "--n", "8", "--limit", "all", "--out",
                     str(tmp_path / "calib"), "--cache", str(tmp_path / "c.sqlite"),
                     "--quiet"]) == 0
        assert main(["certify", str(tmp_path / "calib"), "--method", "self_consistency",
                     "--alpha", "0.2", "--out", str(tmp_path / "cert.json")]) == 0
        yield toy, tmp_path


def _ask(url: str, content: str) -> dict[str, Any]:
    reply = httpx.post(url + "/chat/completions", timeout=120,
                       json={"messages": [{"role": "user", "content": content}]})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_an_lm_eval_certificate_is_served(certified):
    """Done when: a certificate from ``credo run --task lm-eval:X`` is served through
    ``credo serve``: the model gets the question as the task renders it, with the task's
    max_gen_toks and until; the answer is what the task's filter keeps; the score is the
    self-consistency of those answers and the decision the certificate's."""
    toy, tmp = certified
    cert = json.loads((tmp / "cert.json").read_text())
    assert cert["settings"]["lm_eval"]["revision"]  # what a question is rendered with
    threshold = cert["certificate"]["threshold"]
    assert threshold is not None
    gateway = ServeProcess(["--certificate", str(tmp / "cert.json"), "--port", "0",
                            "--base-url", toy.url, "--cache", str(tmp / "c.sqlite")],
                           env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    try:
        assert gateway.url, "".join(gateway.out)
        before = len(toy.bodies)
        asked = {"What is 3 + 4?": "Question: What is 3 + 4?\nAnswer:",
                 json.dumps({"q": "What is 345 + 678?"}): "Question: What is 345 + 678?\nAnswer:"}
        replies = {}
        for content, rendered in asked.items():
            replies[content] = _ask(gateway.url, content)
            sent = [b for b in toy.bodies[before:] if b["messages"][-1]["content"] == rendered]
            assert sent, (rendered, toy.bodies[before:])
            assert {(b["max_tokens"], tuple(b["stop"])) for b in sent} == {(8, ("\n",))}
            before = len(toy.bodies)
    finally:
        code, _, err = gateway.stop(signal.SIGTERM)
    assert code == 0, err
    for reply in replies.values():
        credo = reply["credo"]
        assert credo["samples"] == 8
        text = reply["choices"][0]["message"]["content"]
        assert text.startswith("Answer: ") and credo["answer"] == text.split()[-1]
        assert credo["accept"] == (credo["score"] >= threshold)
    easy = replies["What is 3 + 4?"]["credo"]
    assert easy["answer"] == "7" and easy["accept"]


def test_the_gateway_scores_a_question_as_the_run_scored_its_items(certified):
    """The Guard's decision on a document of the task equals the calibration run's score
    of that item (same rendering, same settings, so the same cached samples and answers)."""
    from credo.serve.guard import Guard

    toy, tmp = certified
    rows = [json.loads(x) for x in (tmp / "calib" / "scores.jsonl").read_text().splitlines()]
    first = rows[0]
    doc = json.loads((tmp / "tasks" / "sums.jsonl").read_text().splitlines()[0])
    with Guard(tmp / "cert.json", overrides={"model_options": {"base_url": toy.url},
                                             "cache": str(tmp / "c.sqlite")}) as guard:
        answer = guard.ask(json.dumps({"q": doc["q"]}))
    assert answer.answer == first["answer"]
    assert answer.score == pytest.approx(first["scores"]["self_consistency"])
    assert answer.score == pytest.approx(question_score("self_consistency",
                                                        first["original_answers"]))


def test_a_question_is_the_document_or_the_text_of_its_one_field(tmp_path):
    """A task whose template reads one field takes a question's plain text as that field;
    one whose template reads two needs the document as JSON, and says which fields."""
    from credo.tasks.lm_eval import LmEvalError, load_lm_eval, question_item

    tasks = tmp_path / "tasks"
    _task(tasks)
    two = (tasks / "toy_sums.yaml").read_text().replace("task: toy_sums", "task: toy_two")
    two = two.replace('doc_to_text: "Question: {{q}}\\nAnswer:"',
                      'doc_to_text: "Question: {{q}} ({{a}} is wrong)\\nAnswer:"')
    (tasks / "toy_two.yaml").write_text(two)
    one = load_lm_eval("lm-eval:toy_sums", include_path=[tasks])
    item = question_item(one, "What is 1 + 1?")
    assert (item.meta["context"], item.question, item.meta["suffix"]) == (
        "", "Question: What is 1 + 1?\nAnswer:", "")
    assert item.gold == "" and "grader" not in item.meta  # unlabelled: nothing to grade
    assert question_item(one, json.dumps({"q": "What is 1 + 1?"})).question == item.question
    both = load_lm_eval("lm-eval:toy_two", include_path=[tasks])
    with pytest.raises(LmEvalError, match="reads the fields a, q; send the question as a "
                                          "JSON object"):
        question_item(both, "What is 1 + 1?")
    doc = question_item(both, json.dumps({"q": "What is 1 + 1?", "a": "3"}))
    assert doc.question == "Question: What is 1 + 1? (3 is wrong)\nAnswer:"


def test_certificates_the_gateway_cannot_serve_are_refused_in_one_line(certified, capsys):
    toy, tmp = certified
    older = json.loads((tmp / "cert.json").read_text())
    del older["settings"]["lm_eval"]
    (tmp / "older.json").write_text(json.dumps(older))
    code = main(["serve", "--certificate", str(tmp / "older.json"), "--port", "0",
                 "--base-url", toy.url])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "older credo" in err and "few-shot count and dataset revision" in err
    # a certificate made on an inspect log: the log does not record how its scorer read
    from credo.evaluate.certify import Certificate
    from credo.pipeline.certificate import RunCertificate

    given = RunCertificate(
        Certificate(0.5, 0.5, 0.1, 0.1, 40, "ltt", n_accepted=20, risk=0.05),
        {"command": "credo score", "model": "given:inspect_ai:m", "method": "self_consistency",
         "task": {"family": "given:inspect_ai:capitals", "format": "short_text", "domain": "",
                  "prompt": "given (the generating tool's own)",
                  "correctness": "inspect_ai scorer match"},
         "n": 5, "m": 0, "kernel": "indicator", "sampling": {"temperature": 1.0}})
    (tmp / "given.json").write_text(json.dumps(given.to_json()))
    code = main(["serve", "--certificate", str(tmp / "given.json"), "--port", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "the prompt template each question was asked with" in err
    assert "how inspect's scorer read each answer" in err
    assert "the sampling settings (max_tokens)" in err
    # one made on lm-eval's samples: serve a certificate of the task run by credo instead
    lm = json.loads((tmp / "given.json").read_text())
    lm["settings"]["task"]["family"] = "given:lm-evaluation-harness:toy_sums"
    lm["settings"]["sampling"] = {"temperature": 1.0, "max_tokens": 8}
    (tmp / "given_lm.json").write_text(json.dumps(lm))
    code = main(["serve", "--certificate", str(tmp / "given_lm.json"), "--port", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "the task's filter credo would read each answer with" in err
    assert "certify a `credo run --task lm-eval:toy_sums` of the same model" in err
    assert "sampling settings" not in err  # the file recorded them
