"""The application layer and the one home of certificate policy.

``credo.app`` holds one module per command family, mirroring ``credo.cli``; ``credo.api``
only re-exports it; every command module of the command line calls its ``credo.app``
module; one module (``credo.pipeline.certificate``) parses certificate files, telling
their kinds apart, validating them and filling in what they decide; certificate files
keep their bytes (the procedure is ``Certificate.procedure``, written ``method`` as
before) and old ones still read."""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest

import credo
import credo.api
from credo.errors import UserError
from credo.evaluate.certify import Certificate
from credo.evaluate.claims import ClaimCertificate
from credo.pipeline.certificate import (
    ADAPTIVE,
    CLAIM,
    RUN_KIND,
    TASK_FIELDS,
    RunCertificate,
    certificate_kind,
    read_certificate,
    read_claim_certificate,
    read_run_certificate,
    write_certificate,
)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "credo"
APP = SRC / "app"
CLI = SRC / "cli"

CERTIFICATE_KEYS = ["threshold", "coverage", "alpha", "delta", "n", "method", "n_accepted",
                    "risk", "p_value", "n_needed", "message"]
"""A certificate file's ``certificate`` section, key by key, as credo has always written it."""


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imported_modules(path: Path) -> set[str]:
    """Every ``credo`` module ``path`` imports (``from credo.x import y``: ``credo.x``)."""
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == "credo" or m.startswith("credo.")}


# --------------------------------------------------------------------------- the layer


def test_api_is_a_face_without_logic():
    """``credo/api.py`` defines no function or class: it imports and re-exports."""
    tree = _tree(SRC / "api.py")
    defined = [n.name for n in ast.walk(tree)
               if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    assert defined == []
    statements = {type(n).__name__ for n in tree.body}
    assert statements <= {"Expr", "ImportFrom", "Assign"}, statements


def test_every_api_name_lives_in_the_application_layer():
    for name in credo.api.__all__:
        value = getattr(credo.api, name)
        module = getattr(value, "__module__", None)
        if callable(value):
            assert module is not None and module.startswith("credo.app."), (name, module)
    for name in ("run", "score", "study"):  # credo's own names reach the same functions
        assert getattr(credo, name) is getattr(credo.api, name)
    # the names the documentation teaches
    for name in ("score", "certify_run", "certify_run_claims", "certify_adaptive", "study",
                 "simulate_adaptive", "dry_run", "run_strength"):
        assert callable(getattr(credo.api, name)), name


@pytest.mark.parametrize("gone", ["commands", "experiments", "entry"])
def test_the_old_application_files_are_gone(gone):
    assert not (SRC / f"{gone}.py").exists()
    for path in SRC.rglob("*.py"):
        assert f"credo.{gone}" not in _imported_modules(path), path


def _app_modules() -> list[str]:
    return sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")


SHARED = {"common", "logs"}
"""Application modules that are no command family: what the commands share, and the
command line's log filter."""


def test_the_application_layer_mirrors_the_command_line():
    """Every command family of ``credo.app`` has its ``credo.cli`` module of the same name,
    and that module calls it."""
    families = [m for m in _app_modules() if m not in SHARED]
    assert {"run", "score", "certify", "claims", "study", "adaptive", "perturb", "strength",
            "probe", "report", "catalogue"} <= set(families)
    for family in families:
        cli = CLI / f"{family}.py"
        assert cli.is_file(), f"credo.app.{family} has no command module credo.cli.{family}"
        assert f"credo.app.{family}" in _imported_modules(cli), cli


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_the_command_line_reaches_its_logic_through_the_application_layer(path):
    """No command module imports the API's face or a former application file: what a
    command runs it imports from ``credo.app``."""
    imported = _imported_modules(path)
    assert not imported & {"credo.api", "credo.commands", "credo.experiments", "credo.entry"}


def test_each_command_s_logic_lives_in_one_application_module():
    """No public function or class is defined in two application modules."""
    where: dict[str, str] = {}
    for module in _app_modules():
        for node in _tree(APP / f"{module}.py").body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                assert node.name not in where, (node.name, where.get(node.name), module)
                where[node.name] = module


# --------------------------------------------------------------------------- certificates


def _parses_certificate_json(path: Path) -> list[str]:
    """The functions of ``path`` that parse JSON (``json.loads``, ``json.load``,
    ``.from_json``) and speak of a certificate."""
    found = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        text = ast.unparse(node)
        calls = {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        parses = {"json.loads", "json.load"} & calls or any(
            c.endswith(".from_json") for c in calls)
        if parses and "certificate" in text.lower():
            found.append(node.name)
    return found


def test_one_module_parses_certificate_files():
    parsing = {}
    for path in SRC.rglob("*.py"):
        names = _parses_certificate_json(path)
        if names:
            parsing[str(path.relative_to(SRC))] = names
    # the certificate classes' own from_json (a text a caller hands in) are no file reading
    assert parsing.pop("evaluate/certify.py", []) in ([], ["from_json"])
    assert parsing.pop("evaluate/claims.py", []) in ([], ["from_json"])
    assert set(parsing) == {"pipeline/certificate.py"}, parsing


def test_no_module_calls_a_certificate_class_s_from_json():
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "Certificate.from_json(" not in text, path


def _run_certificate(**certificate) -> dict:
    """A run certificate file's content as an older credo wrote it (the paraphraser under
    its former name)."""
    return {
        "certificate": {"threshold": 0.5, "coverage": 0.5, "alpha": 0.1, "delta": 0.1,
                        "n": 40, "method": "ltt", "n_accepted": 20, "risk": 0.05,
                        "p_value": 0.01, "n_needed": None, "message": "ltt: answer ..."}
        | certificate,
        "settings": {"command": "credo run", "model": "m",
                     "task": {f: "x" for f in TASK_FIELDS},
                     "method": "self_consistency",
                     "baselines": {"paraphrase_generator": "p"}},
        "source": "runs/calib",
    }


def test_an_old_run_certificate_reads(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_run_certificate(), indent=1) + "\n")
    cert = read_run_certificate(path)
    assert isinstance(cert, RunCertificate)
    assert cert.certificate.procedure == "ltt" and cert.method == "self_consistency"
    assert cert.settings["baselines"]["paraphraser"] == "p"
    assert RunCertificate.read(path) == cert == read_certificate(path)


def test_a_certificate_file_keeps_its_bytes(tmp_path):
    """Read and written again, a certificate file is the same bytes: the procedure is
    written under the key ``method``, in its place."""
    data = _run_certificate()
    data["settings"]["baselines"] = {"paraphraser": "p"}
    original = json.dumps(data, indent=1) + "\n"
    path = tmp_path / "cert.json"
    path.write_text(original)
    again = write_certificate(tmp_path / "again.json", read_run_certificate(path).to_json())
    assert again.read_text() == original
    assert list(read_run_certificate(path).certificate.to_dict()) == CERTIFICATE_KEYS


def test_certificate_method_is_a_deprecated_alias_of_procedure():
    cert = Certificate(0.5, 0.5, 0.1, 0.1, 40, "sgr")
    with pytest.warns(DeprecationWarning, match="procedure"):
        assert cert.method == "sgr"
    assert cert.procedure == "sgr"
    assert cert.to_dict()["method"] == "sgr" and "procedure" not in cert.to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Certificate.from_dict(cert.to_dict()) == cert  # no warning on the way
        assert Certificate.from_dict({**cert.to_dict(), "method": "crc"}).procedure == "crc"


@pytest.mark.parametrize("threshold", [1.5, -0.2])
def test_a_threshold_outside_the_method_s_scores_is_refused(tmp_path, threshold):
    path = tmp_path / "cert.json"
    path.write_text(json.dumps(_run_certificate(threshold=threshold)))
    with pytest.raises(UserError, match="outside the scores") as e:
        read_run_certificate(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def _claim_certificate() -> dict:
    return ClaimCertificate(0.4, 0.1, 1.0, None, 30, "conformal", method="frequency").to_dict()


def test_the_kinds_of_certificate_file():
    run = _run_certificate()
    adaptive = _run_certificate()
    adaptive["settings"]["adaptive"] = {"rule": "decision", "round": 2, "min": 2,
                                        "confidence": 0.95, "scores": ["self_consistency"]}
    assert certificate_kind(run) == RUN_KIND
    assert certificate_kind(adaptive) == ADAPTIVE
    assert certificate_kind(_claim_certificate()) == CLAIM
    for other in ({}, [], {"certificate": 1, "settings": {}}, "text"):
        assert certificate_kind(other) is None


def test_each_reader_takes_its_kind_and_refuses_another(tmp_path):
    claim = tmp_path / "claims.json"
    claim.write_text(json.dumps(_claim_certificate(), indent=2) + "\n")
    assert isinstance(read_certificate(claim), ClaimCertificate)
    assert read_claim_certificate(claim) == read_certificate(claim)
    with pytest.raises(UserError, match="claim certificate") as e:
        read_run_certificate(claim)  # credo serve, credo score --certificate
    assert "\n" not in str(e.value)
    run = tmp_path / "run.json"
    run.write_text(json.dumps(_run_certificate()))
    with pytest.raises(UserError, match="not a claim certificate"):
        read_claim_certificate(run)  # credo filter-claims
    with pytest.raises(UserError, match="no such certificate file"):
        read_claim_certificate(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UserError, match="not a credo certificate"):
        read_certificate(bad)
    assert read_certificate(None) is None and read_run_certificate(None) is None
