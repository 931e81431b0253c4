"""The files of a run folder and their fields, declared once.

:data:`RUN_FILES` is what the documentation's run-folder reference is generated from, and
``tests/test_docs_reference.py`` checks it against a real run folder: a scripted run
writes exactly the files marked ``always`` (plus the conditional ones whose condition
it meets), and the rows of its JSON files carry exactly the fields declared here. A file
the writer (:mod:`credo.report.writer`) starts writing, or a field it adds, fails that
test until it is declared, so the reference cannot go stale.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RUN_FILES", "RunFile", "run_file"]


@dataclass(frozen=True)
class RunFile:
    """One file of a run folder: its name, when it is written (``always`` or the
    condition), what it holds, and its fields (name, meaning) for the structured ones:
    the keys of each row of a JSON Lines file, the top-level keys of a JSON file.
    ``optional_fields`` are keys present only in some runs (said in their meaning)."""

    name: str
    what: str
    written_by: str = "credo run, credo score"
    when: str = "always"
    fields: tuple[tuple[str, str], ...] = ()
    optional_fields: frozenset[str] = frozenset()

    @property
    def always(self) -> bool:
        """Whether every finished run folder has it."""
        return self.when == "always"


RUN_FILES: tuple[RunFile, ...] = (
    RunFile(
        "config.yaml",
        "the run's configuration, every field (the cache it used included), credentials "
        "left out: `credo run --config config.yaml` reruns it",
    ),
    RunFile(
        "scores.jsonl",
        "one row per item: its gold answer, correctness and every method's score",
        fields=(
            ("id", "the item's id"),
            ("gold", "the reference answer (null for questions without gold answers)"),
            ("p_bar", "p̄: the share of the original samples that are correct (null when "
                      "correctness is unknown)"),
            ("label", "1 when p̄ ≥ 0.5, else 0: the label the item-level metrics use"),
            ("answer", "the answer credo gives: the modal original answer"),
            ("answer_correct", "whether that answer is correct (what a certificate's "
                               "selective risk counts); null when unknown"),
            ("scores", "method name → score in [0, 1] (null: not available on this item)"),
            ("original_answers", "the extracted answer of every original sample"),
            ("perturbed_answers", "the extracted answer of every perturbed sample"),
        ),
    ),
    RunFile(
        "samples.jsonl",
        "every sample of every sample set, with its extracted answer",
        fields=(
            ("id", "the item's id"),
            ("set", "the sample set: original, perturbed, paraphrased, label, verbalized, ..."),
            ("index", "the sample's index within its set"),
            ("ref", "what a follow-up sample refers to: [i] the original sample a "
                    "verbalized or P(True) question asks about, [option] an APriCoT "
                    "verdict's option, [i, position, rank] an NLI verdict; [] otherwise"),
            ("prefix", "the context prefix of a perturbed sample (null elsewhere)"),
            ("text", "the model's reply"),
            ("answer", "the extracted answer (null: none found)"),
            ("correct", "whether the answer is correct (null when unknown)"),
            ("confidence", "method name → the confidence it gives this sample "
                           "(per-generation methods)"),
            ("scores", "credo score only, where the file gave them: score name → the "
                       "score the file gave this sample (read again as given:NAME)"),
            ("item_scores", "credo score only, on original samples, where the file gave "
                            "them: score name → the score the file gave the item"),
        ),
        optional_fields=frozenset({"scores", "item_scores"}),
    ),
    RunFile(
        "perturbations.jsonl",
        "per item, the context prefixes the diversity filter kept and what it rejected",
        fields=(
            ("id", "the item's id"),
            ("kept", "the kept prefixes, in the order the perturbed samples use them"),
            ("candidates", "candidates the writer (or the corpus) produced"),
            ("rejected_invalid", "candidates rejected by the prefix rules"),
            ("rejected_similar", "candidates rejected by the diversity filter (cosine ≥ k)"),
            ("rejected_by", "rule name → candidates it rejected"),
        ),
    ),
    RunFile(
        "metrics.json",
        "the evaluation: per method and metric, with bootstrap intervals (`<metric>_low`, "
        "`<metric>_high`), per generation, the ledger and the run's counters",
        fields=(
            ("task", "the task's name"),
            ("model", "the model's identity (what the cache keys hold)"),
            ("items", "items scored"),
            ("accuracy", "mean p̄ over the items"),
            ("correctness", "how correctness was decided: the rule, the grader, its model"),
            ("task_identity", "what a certificate made on this run binds: the task family, "
                              "answer format, domain, prompt-template digest, correctness rule"),
            ("methods", "method → metric → value, item level (ECE, MCE, Brier, AUROC, "
                        "AUPRC-P, AUPRC-N, AUARC, PRR, mean score, Pearson, polarisation, ...)"),
            ("responses", "the same per generation (Müller et al.), for per-generation methods"),
            ("unavailable", "method → why it has no score"),
            ("stats", "the run's counters; `stats.ledger`: requests, samples, tokens and "
                      "cost per stage"),
            ("neutrality", "Wu et al. App. A.3's test of the prefixes (when the run "
                           "generated perturbed samples)"),
            ("coverage_at_risk", "method → α → coverage at selective risk α over random "
                                 "calibration/test splits (labelled runs)"),
            ("degenerate", "method → why its scores are degenerate on this run (when any "
                           "is)"),
            ("incomplete", "item id → why it is incomplete (when requests failed or the "
                           "budget was reached)"),
            ("certificate", "the certificate applied (`--certificate`): its id, method, "
                            "threshold, α, δ, procedure, and how many of the items' answers "
                            "it accepted"),
        ),
        optional_fields=frozenset({"neutrality", "coverage_at_risk", "degenerate",
                                   "incomplete", "certificate"}),
    ),
    RunFile(
        "perturbation_similarity.json",
        "the pairwise cosine similarities of each item's kept prefixes (Wu et al. App. "
        "A.2's diversity check), which the report's Diversity section reads",
        when="when the run wrote context prefixes with an embedder",
        fields=(
            ("embedder", "the sentence embedder"),
            ("threshold", "the diversity filter's k"),
            ("items", "items whose prefixes were compared"),
            ("similarities", "every within-item pair's cosine similarity"),
        ),
    ),
    RunFile("report.md", "the tables a reader wants first: metrics, ledger, neutrality"),
    RunFile(
        "run_status.json",
        "written last: a folder without it was interrupted while being written",
        fields=(
            ("status", "complete or incomplete"),
            ("outcome", "complete, incomplete-budget, incomplete-failures, "
                        "neutrality-failed"),
            ("items", "items in the run"),
            ("items_incomplete", "items whose requests did not all complete"),
            ("stopped_by_budget", "true when max_cost_usd stopped the run (only then)"),
            ("written", "when the folder was written (UTC, ISO 8601)"),
            ("files", "every other file of the folder, written before this one: `credo report` "
                      "names any that is missing"),
        ),
        optional_fields=frozenset({"stopped_by_budget"}),
    ),
    RunFile("report.html", "the self-contained HTML report with its figures (no network "
                           "needed); `credo report` rewrites it"),
    RunFile("scores.parquet", "scores.jsonl as a table for pandas or polars"),
    RunFile("samples.parquet", "samples.jsonl as a table for pandas or polars"),
    RunFile(
        "answers.jsonl",
        "which answers to act on: per item the answer, the certified method's score and "
        "whether it is accepted at the certificate's risk",
        when="with a certificate (`credo run --certificate`)",
        fields=(
            ("id", "the item's id"),
            ("question", "the question"),
            ("answer", "the answer credo gives (the modal original answer)"),
            ("score", "the certified method's score"),
            ("accept", "whether score ≥ the certified threshold"),
            ("method", "the certified method"),
            ("alpha", "the certificate's risk level α"),
            ("delta", "the certificate's δ"),
            ("procedure", "the certificate's procedure"),
        ),
    ),
    RunFile(
        "certificate.json",
        "a certified threshold and what must match for `credo run --certificate` to use it",
        written_by="credo certify", when="after `credo certify RUN_DIR` (default --out)",
    ),
    RunFile(
        "topic_check.json",
        "Wu et al. App. A.4: the domain a judge gives each kept prefix",
        written_by="credo perturb topic-check", when="after `credo perturb topic-check`",
    ),
    RunFile(
        "threshold_calibration.json",
        "Wu et al. App. A.2: the diversity threshold k from paraphrase similarities",
        written_by="credo perturb calibrate-threshold",
        when="after `credo perturb calibrate-threshold --run RUN_DIR`",
    ),
    RunFile(
        "adaptive/",
        "what adaptive sampling would have saved: adaptive.md, adaptive.json, adaptive.png",
        written_by="credo adaptive", when="after `credo adaptive RUN_DIR` (default --out)",
    ),
)
"""Every file credo writes into a run folder, in the order a reader meets them."""


def run_file(name: str) -> RunFile:
    """The declaration of the run-folder file ``name``; a KeyError names the known ones."""
    for f in RUN_FILES:
        if f.name == name:
            return f
    raise KeyError(f"{name!r} is not a declared run-folder file: {[f.name for f in RUN_FILES]}")
