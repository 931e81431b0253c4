"""The documentation site as a reader gets it (issue 30, items 1 and 5).

The site is built with ``mkdocs build --strict`` (``make docs``: a warning fails it),
every internal link and anchor of the built HTML is checked, and headless Chromium opens
the home page, a tutorial, the API page of ``certify`` and the search, served from
127.0.0.1, with no console error and no failed request. Chromium is driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no websocket library),
as the report's browser test runs Debian's chromium (``tests/test_report.py``).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)

pytestmark = pytest.mark.slow  # builds the whole site (about half a minute)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed "
                        "(pip install -e '.[docs]'; make install does)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


# --------------------------------------------------------------------------- links


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if value and ((tag == "a" and name == "href") or (name == "src" and tag in (
                    "img", "script")) or (tag == "link" and name == "href")):
                self.links.append(value)


@functools.cache
def _parsed(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def broken_links(site: Path) -> list[str]:
    """``page: link`` for every relative link whose file or anchor is missing."""
    bad = []
    for page in sorted(site.rglob("*.html")):
        if page.name == "404.html":  # mkdocs writes it with site-absolute links
            continue
        for link in _parsed(page).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                bad.append(f"{page.relative_to(site)}: {link}")
                continue
            if parts.fragment and target.suffix == ".html" and (
                    unquote(parts.fragment) not in _parsed(target).ids):
                bad.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    return bad


def test_no_internal_link_or_anchor_is_broken(site):
    assert (site / "index.html").exists() and (site / "reference" / "cli.html").exists()
    assert broken_links(site) == []


def test_the_api_pages_show_no_raw_sphinx_role(site):
    """The docstrings' Sphinx roles (``:func:`credo.run```) reach the API pages as code
    spans (docs/gen/sphinx_roles.py), not as ``:func:`` before the name (noted in issue
    30's review); and the docstrings are there at all."""
    pages = sorted((site / "reference" / "api").glob("*.html"))
    assert pages
    text = "".join(p.read_text(encoding="utf-8") for p in pages)
    assert "<code>credo.run</code>" in text
    raw = re.findall(r":(?:func|class|meth|attr|mod|data|exc|obj):(?:<code>|`)", text)
    assert raw == []


def test_the_link_check_finds_a_broken_link(site, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(site, copy)
    page = copy / "getting-started.html"
    page.write_text(page.read_text().replace("</article>",
                    '<a href="no-such-page.html">x</a><a href="index.html#no-anchor">y</a>'
                    "</article>", 1))
    _parsed.cache_clear()
    assert sorted(broken_links(copy)) == [
        "getting-started.html: index.html#no-anchor (no such anchor)",
        "getting-started.html: no-such-page.html"]


# --------------------------------------------------------------------------- browser


class Browser:
    """Headless Chromium over the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # the pipe ends become fds 3 and 4 whatever their numbers
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4),  # kept open after preexec_fn
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._id = 0
        self.events: queue.Queue[dict] = queue.Queue()
        self._replies: dict[int, queue.Queue[dict]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.session = self._attach()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_chrome, 65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg and msg["id"] in self._replies:
                    self._replies[msg["id"]].put(msg)
                else:
                    self.events.put(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        with self._lock:
            self._id += 1
            i = self._id
            self._replies[i] = queue.Queue()
        msg = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        reply = self._replies[i].get(timeout=timeout)
        assert "error" not in reply, (method, reply["error"])
        return reply.get("result", {})

    def _attach(self) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        return session

    def evaluate(self, expression: str):
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, self.session)
        assert "exceptionDetails" not in out, out["exceptionDetails"]
        return out["result"].get("value")

    def open(self, url: str, settle: float = 1.5) -> list[str]:
        """Load ``url``; the console errors, exceptions and failed requests it caused."""
        self._drain()
        self.send("Page.navigate", {"url": url}, self.session)
        seen: list[dict] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                seen.append(self.events.get(timeout=1))
            except queue.Empty:
                continue
            if seen[-1].get("method") == "Page.loadEventFired":
                break
        else:
            raise AssertionError(f"{url} did not load in 30 s")
        time.sleep(settle)
        return _errors(seen + self._drain())

    def errors(self) -> list[str]:
        """The errors since the last call."""
        return _errors(self._drain())

    def _drain(self) -> list[dict]:
        out = []
        while not self.events.empty():
            out.append(self.events.get_nowait())
        return out

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self._to_chrome)


def _errors(events: list[dict]) -> list[str]:
    found = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            found.append("exception: " + json.dumps(p["exceptionDetails"])[:500])
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            found.append("console.error: " + json.dumps(p.get("args"))[:500])
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            found.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            found.append(f"request failed: {p.get('errorText')}")
        elif method == "Network.responseReceived" and p["response"]["status"] >= 400:
            found.append(f"HTTP {p['response']['status']}: {p['response']['url']}")
    return found


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(_Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium; .ci/run does); the browser check needs it")
def test_pages_and_search_render_in_headless_chromium_without_errors(served, tmp_path):
    browser = Browser(tmp_path / "profile")
    try:
        pages = {
            "index.html": "C3",
            "tutorials/served-model.html": "credo probe",
            "reference/api/evaluation.html": "credo.certify",
        }
        for page, text in pages.items():
            assert browser.open(f"{served}/{page}") == [], page
            body = browser.evaluate("document.querySelector('article').innerText")
            assert text in body, page
        assert browser.evaluate(
            "!!document.getElementById('credo.evaluate.certify.certify')")
        # the search: type a query, wait for the worker's results
        assert browser.open(f"{served}/index.html") == []
        browser.evaluate("""(() => {
            const input = document.querySelector('input.md-search__input');
            input.focus(); input.value = 'certify';
            for (const t of ['focus', 'input', 'keyup'])
              input.dispatchEvent(new Event(t, {bubbles: true}));
        })()""")
        hits = []
        deadline = time.monotonic() + 20
        while not hits and time.monotonic() < deadline:
            time.sleep(0.25)
            hits = browser.evaluate(
                "[...document.querySelectorAll('.md-search-result__item a')]"
                ".map(a => a.getAttribute('href'))")
        assert hits, "the search gave no result for 'certify'"
        assert any("certif" in h for h in hits), hits
        assert browser.errors() == []
        # the check does see an error
        assert browser.open(f"{served}/no-such-page.html", settle=0.5)
    finally:
        browser.close()


# --------------------------------------------------------------------------- rendering


def test_a_config_description_keeps_its_braces(site):
    """A ``{model, model_options, label}`` mapping in a field's description is shown as
    code, not swallowed by Markdown's attribute lists (StudyConfig.models was cut at
    "a spec or")."""
    html = (site / "reference" / "config.html").read_text(encoding="utf-8")
    assert "a spec or <code>{model, model_options, label}</code>" in html
    assert "{model, base_url, label, prices...}</code>" in html


def test_an_api_entry_shows_the_module_text_it_points_to_and_default_values(site):
    """A docstring that sends the reader to its module ("module docstring", or
    ``:mod:`credo.evaluate.certify```) has that module's text on the same page, and a
    default naming a constant shows its value (``select_fraction: float = 0.3``)."""
    pages = sorted((site / "reference" / "api").glob("*.html"))
    for page in (p for p in pages if p.name != "index.html"):  # the index: summaries only
        text = page.read_text(encoding="utf-8")
        if "module docstring" in text or re.search(r"the module <code>credo\.", text):
            assert "The module credo." in text, page.name
    evaluation = (site / "reference" / "api" / "evaluation.html").read_text(encoding="utf-8")
    for module in ("credo.evaluate.certify", "credo.evaluate.claims"):
        assert f"The module {module}" in evaluation
    signature = re.search(r'select_fraction</span>(?:(?!</code>).){0,300}?'
                          r'<span class="mf">([^<]+)</span>', evaluation, re.S)
    assert signature and signature.group(1) == "0.3", signature
    assert "SELECT_FRACTION</span>" not in evaluation


def test_no_table_has_an_empty_header_row(site):
    """Every table's header names its columns (the home page's table and the method
    cards had empty header rows)."""
    empty = []
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for head in re.findall(r"<thead>(.*?)</thead>", text, re.S):
            cells = re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)
            if cells and not any(re.sub(r"<[^>]+>", "", c).strip() for c in cells):
                empty.append(page.relative_to(site).as_posix())
    assert empty == []


def test_the_reference_sidebar_names_each_page_once():
    """Two entries of the Reference section never share a title (the Python API's
    configuration page and the configuration reference were both "Configuration")."""
    import yaml

    sys.path.insert(0, str(ROOT / "docs" / "gen"))
    import hooks

    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"),
                       Loader=yaml.BaseLoader)
    config["docs_dir"] = str(ROOT / "docs")
    nav = hooks.on_config(config)["nav"]
    (reference,) = [e["Reference"] for e in nav if isinstance(e, dict) and "Reference" in e]

    def titles(entries, inside=""):
        for e in entries:
            for title, value in e.items():
                if isinstance(value, list):
                    yield from titles(value, f"{inside}{title} > ")
                elif title != "Overview":
                    yield title

    found = list(titles(reference))
    assert len(found) == len(set(found)), sorted(t for t in found if found.count(t) > 1)
    assert "Configuration" in found and "Configuration objects" in found


def test_the_home_page_shows_no_poster_sized_image(site):
    """The home page's images are at most 1,000 pixels tall (it showed a 1300 x 4200
    screenshot of a whole report page)."""
    from PIL import Image

    html = (site / "index.html").read_text(encoding="utf-8")
    article = html.split("<article", 1)[1].split("</article>", 1)[0]
    images = re.findall(r'<img[^>]+src="([^"]+)"', article)
    assert images
    for src in images:
        with Image.open(site / src) as im:
            assert im.size[1] <= 1000, (src, im.size)


def test_every_name_a_page_teaches_has_an_api_entry(site):
    """Each credo name the pages' examples import or call, or their prose names in code
    (``credo.api.score``, ``certify_run_claims``, ``certify_adaptive``...), has an entry
    (an anchor) on the Python API pages."""
    sys.path.insert(0, str(ROOT / "docs" / "gen"))
    import reference

    taught = reference.taught_names(ROOT / "docs")
    assert {"credo.api.score", "credo.api.certify_run_claims",
            "credo.api.certify_adaptive"} <= set(taught)
    ids = set()
    for page in (site / "reference" / "api").glob("*.html"):
        ids |= set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))
    entries = {n.name: n.path for n in reference.api_names()}
    missing = [t for t in taught if entries.get(t.removeprefix("credo.")) not in ids]
    assert missing == []


# --------------------------------------------------------------------------- search


def _search(browser: Browser, query: str) -> list[str]:
    """The result links the site's search gives for ``query`` (typed into its box)."""
    typing = """((q) => {
        const input = document.querySelector('input.md-search__input');
        input.focus(); input.value = q;
        for (const t of ['focus', 'input', 'keyup'])
          input.dispatchEvent(new Event(t, {bubbles: true}));
    })"""
    browser.evaluate(f"{typing}({json.dumps(query)})")
    hits: list[str] = []
    deadline = time.monotonic() + 20
    while not hits and time.monotonic() < deadline:
        time.sleep(0.25)
        hits = browser.evaluate(
            "[...document.querySelectorAll('.md-search-result__item > a')]"
            ".map(a => a.getAttribute('href'))")
    return hits


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium); the browser check needs it")
def test_search_works_from_disk_finds_flags_and_ranks_the_reference_first(site, tmp_path):
    """Opened as a file (``site/index.html``, as the README says), the search answers
    (it stayed at "Initializing search"), finds flags on the command-line reference,
    and ranks the pages that teach and define a word above the results that mention it."""
    browser = Browser(tmp_path / "profile")
    try:
        assert browser.open((site / "index.html").as_uri()) == []
        for flag in ("--max-cost-usd", "--base-url"):
            hits = _search(browser, flag)
            assert hits, f"no result for {flag}"
            assert any("reference/cli.html" in h for h in hits[:3]), (flag, hits[:5])
        assert browser.open((site / "index.html").as_uri()) == []
        hits = _search(browser, "certify")
        assert hits and not re.search(r"(^|/)(results|benchmarks)/", hits[0]), hits[:5]
        assert browser.errors() == []
    finally:
        browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium); the browser check needs it")
def test_names_in_reference_tables_stay_on_one_line(served, tmp_path):
    """A name in the first column of the API index or the configuration tables renders
    on one line (``credo.Certi`` / ``ficate`` was broken mid-word)."""
    browser = Browser(tmp_path / "profile")
    try:
        browser.send("Emulation.setDeviceMetricsOverride", {
            "width": 1000, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            browser.session)
        for page in ("reference/api/index.html", "reference/config.html"):
            assert browser.open(f"{served}/{page}") == [], page
            broken = browser.evaluate(
                "[...document.querySelectorAll('article table td:first-child code')]"
                ".filter(c => c.getClientRects().length > 1).map(c => c.textContent)")
            counted = browser.evaluate(
                "document.querySelectorAll('article table td:first-child code').length")
            assert counted > 20 and broken == [], (page, broken[:5])
    finally:
        browser.close()
