"""``credo serve`` under 64 concurrent clients, against the model called directly; with a
fifth of the model's calls hanging; requests per second on one core; memory with 1,000
questions in flight.

The model is the loopback fake server of the tests (``tests/fault_server.py``:
deterministic OpenAI-compatible answers after ``--latency`` seconds per call, as a model
server would take; faults injected on demand), in a process of its own, as are the
gateway and the clients (this one), so that none of them takes another's core time under
one interpreter lock. A certificate of the adaptive decision procedure is made first (a
labelled ``credo run`` of ``--calibration`` questions against it, then ``credo certify
--adaptive decision``), then ``credo serve`` runs in its own process with it.

``overhead`` (the default; one row per ``--latency``)
    per repeat, ``--clients`` official ``openai.AsyncOpenAI`` clients ask one new
    question each, all at once (``gateway``: its wall time to the last reply, each
    request's latency, the gateway process's CPU time); then the very requests the
    gateway sent the model for those questions (the fake server records every body) are
    sent straight to it by the same client, each question's calls in order (a round
    needs the one before it), the questions concurrently, at the same upstream
    concurrency (``direct``): what the application would spend calling the model with
    the same samples and no gateway. Overhead = gateway wall / direct wall − 1, the
    median over repeats.
``hang``
    the same clients twice: once with a fault-free model, once with a fifth of its calls
    hanging (the fake server answers them after 30 s) and the gateway's ``--timeout``:
    the p95 latency of the questions that were answered, against the fault-free p95.
``rps``
    the gateway pinned to one core (the clients and the model on the other), the model
    answering at once: ``--clients`` clients ask ``--questions`` new questions in all,
    each client one after the other: questions per second, and the gateway's CPU per
    question.
``memory``
    ``--in-flight`` questions at once against a model that takes 30 s per call: the
    gateway's resident memory idle and with all of them in flight (from /proc).

Usage::

    PYTHONPATH=src python benchmarks/serve_throughput.py --latency 0.1 0.3 1 2
    PYTHONPATH=src python benchmarks/serve_throughput.py hang --timeout 3
    PYTHONPATH=src python benchmarks/serve_throughput.py rps --questions 640
    PYTHONPATH=src python benchmarks/serve_throughput.py memory --in-flight 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parents[1]

ANSWERS = ("Answer: 18", "Answer: 18", "Answer: 18", "Answer: 17")

FAKE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from fault_server import FaultServer
cpus = json.loads(sys.argv[6])
if cpus:
    os.sched_setaffinity(0, cpus)
server = FaultServer(json.loads(sys.argv[4]) or None, answers=tuple(json.loads(sys.argv[2])),
                     latency=float(sys.argv[3]), slow_seconds=float(sys.argv[5]), fault_seed=1)
print(server.url, flush=True)
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "bodies":  # the bodies received since the count given, to a file
        start, path = arg.split(" ", 1)
        with open(path, "w") as f:
            json.dump(server.bodies[int(start):], f)
    if command == "faults":  # inject these faults from now on
        server.fault_rates = json.loads(arg)
    print(len(server.bodies), flush=True)
    if command == "quit":
        break
server.close()
"""


class FakeModel:
    """The tests' fake server in a child process; it tells how many bodies it received,
    and writes those received since a count to a file."""

    def __init__(self, latency: float, faults: dict[str, float] | None = None,
                 slow_seconds: float = 30.0, cpus: list[int] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, str(ROOT / "tests"), json.dumps(ANSWERS),
             str(latency), json.dumps(faults or {}), str(slow_seconds),
             json.dumps(cpus or [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def _ask(self, line: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def count(self) -> int:
        return self._ask("count")

    def bodies(self, start: int, path: Path) -> list[dict[str, Any]]:
        self._ask(f"bodies {start} {path}")
        return json.loads(path.read_text())

    def close(self) -> None:
        self._ask("quit")
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def calibrate(tmp: Path, url: str, items: int, n: int, concurrency: int) -> Path:
    """A labelled run against the fake server and its adaptive certificate; the
    calibration run's config (the gateway starts from it) has the model's
    ``max_concurrency`` at ``concurrency``."""
    from credo import RunConfig, run
    from credo.api import certify_adaptive

    tmp.mkdir(parents=True, exist_ok=True)
    data = tmp / "calib.jsonl"
    data.write_text("".join(json.dumps({"question": f"Ann has {k} pears?", "answer": "18"})
                            + "\n" for k in range(items)))
    config = RunConfig(
        task_file={"path": data, "format": "number"}, model="openai:toy", n=n, limit=None,
        methods=["self_consistency"], bootstrap=0, out=tmp / "calib", cache=tmp / "c.sqlite",
        model_options={"base_url": url, "max_concurrency": concurrency})
    run(config, show_progress=False)
    cert = tmp / "cert.json"
    made = certify_adaptive(tmp / "calib", "self_consistency", alpha=0.2, out=cert)
    assert made.certificate.certificate.threshold is not None, made.certificate.certificate
    return cert


class Gateway:
    """``credo serve`` in a child process (pinned to ``cpus`` when given), its URL read
    from its listening line."""

    def __init__(self, cert: Path, log: Path, clients: int, extra: list[str] | None = None,
                 cpus: list[int] | None = None) -> None:
        code = "import sys; from credo.cli import main; sys.exit(main())"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "serve", "--certificate", str(cert), "--port", "0",
             "--log", str(log), "--max-concurrent", str(clients), *(extra or [])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        self.url = ""
        deadline = time.monotonic() + 300
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].split(" ", 1)[0]
                break
        if not self.url:
            raise SystemExit(f"credo serve did not start: {self.proc.stderr.read()}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def _stat(self) -> list[str]:
        return Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()

    def cpu(self) -> float:
        """CPU seconds the gateway process has used (user + system, from /proc)."""
        fields = self._stat()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """The gateway's resident memory now, in MiB (from /proc)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def pending(self) -> int:
        """Questions the gateway holds now (its /health)."""
        return int(httpx.get(self.url.removesuffix("/v1") + "/health", timeout=30)
                   .json()["pending"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _client(url: str, timeout: float = 600) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=timeout,
                              http_client=httpx.AsyncClient(limits=httpx.Limits(
                                  max_connections=2000, max_keepalive_connections=2000),
                                  timeout=timeout))


async def ask_gateway(url: str, questions: list[str]) -> tuple[float, list[tuple[float, Any]]]:
    """Every question at once: the wall time, and per question its latency and reply (or
    the error it raised)."""
    client = _client(url)

    async def one(q: str) -> tuple[float, Any]:
        t0 = time.perf_counter()
        try:
            reply: Any = await client.chat.completions.create(
                model="openai:toy", messages=[{"role": "user", "content": q}])
        except openai.APIError as e:
            reply = e
        return time.perf_counter() - t0, reply

    async with client:
        t0 = time.perf_counter()
        done = await asyncio.gather(*(one(q) for q in questions))
        return time.perf_counter() - t0, done


async def ask_direct(url: str, calls: list[list[dict[str, Any]]]) -> float:
    client = _client(url)

    async def rounds(bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            await client.chat.completions.create(**body)

    async with client:
        t0 = time.perf_counter()
        await asyncio.gather(*(rounds(b) for b in calls))
        return time.perf_counter() - t0


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _header(args: argparse.Namespace, what: str) -> None:
    print(f"python {platform.python_version()}, {os.cpu_count()} cores; {what}")


def overhead(args: argparse.Namespace, tmp: Path) -> None:
    """The ``overhead`` scenario (module docstring), one row per latency."""
    print("| model call | requests/s | latency p50 / p95 | samples / question | gateway wall "
          "| direct | overhead (median; per repeat) | gateway CPU / question |")
    print("|---|---|---|---|---|---|---|---|")
    for latency in args.latency:
        server = FakeModel(latency)
        cert = calibrate(tmp / f"o{latency}", server.url, args.calibration, args.n,
                         args.clients)
        gateway = Gateway(cert, tmp / f"o{latency}" / "decisions.jsonl", args.clients)
        rows = []
        try:
            asyncio.run(ask_gateway(gateway.url, ["Warm up: how many?"]))
            for r in range(args.repeats):
                questions = [f"Bob has {latency}-{r}-{i} pears?" for i in range(args.clients)]
                start, cpu0 = server.count(), gateway.cpu()
                wall, done = asyncio.run(ask_gateway(gateway.url, questions))
                cpu = gateway.cpu() - cpu0
                sent: dict[str, list[dict[str, Any]]] = defaultdict(list)
                for body in server.bodies(start, tmp / "bodies.json"):
                    sent[json.dumps(body["messages"])].append(body)
                direct = asyncio.run(ask_direct(server.url, list(sent.values())))
                rows.append({"wall": wall, "direct": direct, "cpu": cpu,
                             "latencies": [s for s, _ in done],
                             "samples": statistics.mean(x.credo["samples"] for _, x in done)})
        finally:
            gateway.close()
            server.close()
        lat = [x for row in rows for x in row["latencies"]]
        over = [row["wall"] / row["direct"] - 1 for row in rows]
        med = statistics.median
        print(f"| {latency:g} s | {med(args.clients / r['wall'] for r in rows):.1f} | "
              f"{_p(lat, 0.5):.2f} / {_p(lat, 0.95):.2f} s | "
              f"{statistics.mean(r['samples'] for r in rows):.1f} | "
              f"{med(r['wall'] for r in rows):.2f} s | {med(r['direct'] for r in rows):.2f} s | "
              f"**{med(over):+.0%}** ({', '.join(f'{o:+.0%}' for o in over)}) | "
              f"{med(r['cpu'] for r in rows) / args.clients * 1e3:.1f} ms |", flush=True)


def hang(args: argparse.Namespace, tmp: Path) -> None:
    """The ``hang`` scenario (module docstring)."""
    latency = args.latency[0]
    server = FakeModel(latency, slow_seconds=30)
    cert = calibrate(tmp, server.url, args.calibration, args.n, 4 * args.clients)
    gateway = Gateway(cert, tmp / "decisions.jsonl", args.clients,
                      ["--timeout", str(args.timeout)])
    try:
        asyncio.run(ask_gateway(gateway.url, ["Warm up: how many?"]))
        runs = {}
        for label, faults in (("fault-free", {}), ("20% of calls hang", {"slow": 0.2})):
            server._ask(f"faults {json.dumps(faults)}")
            answered, failed = [], 0
            walls = []
            for r in range(args.repeats):
                questions = [f"Cy has {label[:4]}-{r}-{i} plums?" for i in range(args.clients)]
                wall, done = asyncio.run(ask_gateway(gateway.url, questions))
                walls.append(wall)
                answered += [s for s, x in done if not isinstance(x, Exception)]
                failed += sum(isinstance(x, Exception) for _, x in done)
            runs[label] = (answered, failed, walls)
    finally:
        gateway.close()
        server.close()
    _header(args, f"{args.clients} clients at once, fake model {latency:g} s per call, "
            f"--timeout {args.timeout:g}, {args.repeats} repeats")
    base = _p(runs["fault-free"][0], 0.95)
    for label, (answered, failed, walls) in runs.items():
        p95 = _p(answered, 0.95)
        print(f"{label:18} answered {len(answered)}, 504 {failed}; latency of the answered "
              f"p50 {_p(answered, 0.5):.2f} s, p95 {p95:.2f} s ({p95 / base:.2f}x the "
              f"fault-free p95); wall {statistics.median(walls):.2f} s")


def rps(args: argparse.Namespace, tmp: Path) -> None:
    """The ``rps`` scenario (module docstring)."""
    server = FakeModel(0.0, cpus=[1])
    cert = calibrate(tmp, server.url, args.calibration, args.n, args.clients)
    gateway = Gateway(cert, tmp / "decisions.jsonl", args.clients, cpus=[0])
    os.sched_setaffinity(0, [1])
    per_client = max(1, args.questions // args.clients)
    try:
        asyncio.run(ask_gateway(gateway.url, ["Warm up: how many?"]))

        async def run_all() -> float:
            client = _client(gateway.url)

            async def one(c: int) -> None:
                for k in range(per_client):
                    await client.chat.completions.create(
                        model="openai:toy",
                        messages=[{"role": "user", "content": f"Di has {c}-{k} figs?"}])

            async with client:
                t0 = time.perf_counter()
                await asyncio.gather(*(one(c) for c in range(args.clients)))
                return time.perf_counter() - t0

        cpu0 = gateway.cpu()
        wall = asyncio.run(run_all())
        cpu = gateway.cpu() - cpu0
    finally:
        gateway.close()
        server.close()
    total = per_client * args.clients
    _header(args, f"gateway pinned to one core, clients and model on the other; "
            f"{args.clients} clients x {per_client} questions, model answering at once")
    print(f"questions/s {total / wall:.1f} (wall {wall:.1f} s for {total}); gateway CPU "
          f"{cpu / total * 1e3:.1f} ms a question ({cpu / wall:.0%} of its core)")


def memory(args: argparse.Namespace, tmp: Path) -> None:
    """The ``memory`` scenario (module docstring)."""
    n = args.in_flight
    server = FakeModel(30.0)
    cert = calibrate(tmp, server.url, args.calibration, args.n, n)
    gateway = Gateway(cert, tmp / "decisions.jsonl", n, ["--queue", "0", "--timeout", "60"])
    try:
        asyncio.run(ask_gateway(gateway.url, ["Warm up: how many?"]))
        idle = gateway.rss_mb()
        result: dict[str, Any] = {}
        asker = threading.Thread(target=lambda: result.update(done=asyncio.run(ask_gateway(
            gateway.url, [f"Ed has {i} nuts?" for i in range(n)]))))
        asker.start()
        deadline, peak, held = time.monotonic() + 25, idle, 0
        while time.monotonic() < deadline:
            held = max(held, gateway.pending())
            peak = max(peak, gateway.rss_mb())
            if held >= n:
                time.sleep(1.0)
                peak = max(peak, gateway.rss_mb())
                break
            time.sleep(0.25)
    finally:
        gateway.close()
        asker.join(120)
        server.close()
    _header(args, f"{n} questions in flight at once, fake model 30 s per call")
    print(f"gateway RSS idle {idle:.0f} MiB; with {held} questions in flight {peak:.0f} MiB "
          f"(+{peak - idle:.0f} MiB, {(peak - idle) / max(held, 1) * 1024:.0f} KiB a question)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="overhead",
                   choices=["overhead", "hang", "rps", "memory"])
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--latency", type=float, nargs="+", default=[0.3],
                   help="seconds the fake model takes per call (default 0.3)")
    p.add_argument("--n", type=int, default=8, help="the recipe's samples (default 8)")
    p.add_argument("--calibration", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=3.0, help="hang: the gateway's --timeout")
    p.add_argument("--questions", type=int, default=640, help="rps: questions in all")
    p.add_argument("--in-flight", type=int, default=1000, help="memory: questions at once")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        if args.scenario == "overhead":
            _header(args, f"{args.clients} clients at once, n = {args.n}, adaptive decision "
                    f"rule, {args.repeats} repeats")
        {"overhead": overhead, "hang": hang, "rps": rps, "memory": memory}[args.scenario](
            args, Path(tmp_name))


if __name__ == "__main__":
    main()
