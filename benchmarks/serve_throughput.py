"""``credo serve`` under 64 concurrent clients, against the model called directly (issue 32,
item 6b).

The model is the loopback fake server of the tests (``tests/fault_server.py``:
deterministic OpenAI-compatible answers after ``--latency`` seconds per call, as a model
server would take), in a process of its own, as are the gateway and the clients (this
one), so that none of them takes another's core time under one interpreter lock. A
certificate of the adaptive decision procedure
is made first (a labelled ``credo run`` of ``--calibration`` questions against it, then
``credo certify --adaptive decision``), then ``credo serve`` runs in its own process with
that certificate, and per repeat:

``gateway``  ``--clients`` official ``openai.AsyncOpenAI`` clients ask one new question
             each, all at once; per request its latency, and the wall time to the last
             reply; the ``credo`` object says how many samples each drew.
``direct``   the very requests the gateway sent the model for those questions (the fake
             server records every body), sent straight to it by the same client: each
             question's calls in order (a round needs the one before it), the questions
             concurrently: what the application would spend calling the model with the
             same samples and no gateway.
``rounds``   the same requests round by round: every question's first call at once, then
             every second one, ...: the gateway's batched rounds without the gateway, so
             gateway / rounds − 1 is the gateway's own cost (HTTP, cache, scoring), and
             rounds / direct − 1 what sharing rounds costs.

The overhead is gateway wall / direct wall − 1, per repeat; the medians are reported.

Usage::

    PYTHONPATH=src python benchmarks/serve_throughput.py
    PYTHONPATH=src python benchmarks/serve_throughput.py --latency 0.5 --repeats 5
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

import openai

ROOT = Path(__file__).resolve().parents[1]

ANSWERS = ("Answer: 18", "Answer: 18", "Answer: 18", "Answer: 17")

FAKE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from fault_server import FaultServer
server = FaultServer(answers=tuple(json.loads(sys.argv[2])), latency=float(sys.argv[3]))
print(server.url, flush=True)
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "bodies":  # the bodies received since the count given, to a file
        start, path = arg.split(" ", 1)
        with open(path, "w") as f:
            json.dump(server.bodies[int(start):], f)
    print(len(server.bodies), flush=True)
    if command == "quit":
        break
server.close()
"""


class FakeModel:
    """The tests' fake server in a child process; it tells how many bodies it received,
    and writes those received since a count to a file."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE, str(ROOT / "tests"), json.dumps(ANSWERS),
             str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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
        self.proc.wait(60)


def calibrate(tmp: Path, url: str, items: int, n: int, clients: int) -> Path:
    """A labelled run against the fake server and its adaptive certificate."""
    from credo import RunConfig, run
    from credo.api import certify_adaptive

    data = tmp / "calib.jsonl"
    data.write_text("".join(json.dumps({"question": f"Ann has {k} pears?", "answer": "18"})
                            + "\n" for k in range(items)))
    config = RunConfig(
        task_file={"path": data, "format": "number"}, model="openai:toy", n=n, limit=None,
        methods=["self_consistency"], bootstrap=0, out=tmp / "calib", cache=tmp / "c.sqlite",
        model_options={"base_url": url, "max_concurrency": clients})
    run(config, show_progress=False)
    cert = tmp / "cert.json"
    made = certify_adaptive(tmp / "calib", "self_consistency", alpha=0.2, out=cert)
    assert made.certificate.certificate.threshold is not None, made.certificate.certificate
    return cert


class Gateway:
    """``credo serve`` in a child process, its URL read from its listening line."""

    def __init__(self, cert: Path, log: Path, clients: int) -> None:
        code = "import sys; from credo.cli import main; sys.exit(main())"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "serve", "--certificate", str(cert), "--port", "0",
             "--log", str(log), "--max-concurrent", str(clients)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
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

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


async def ask_gateway(url: str, questions: list[str]) -> tuple[float, list[float], list[Any]]:
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)

    async def one(q: str) -> tuple[float, Any]:
        t0 = time.perf_counter()
        reply = await client.chat.completions.create(
            model="openai:toy", messages=[{"role": "user", "content": q}])
        return time.perf_counter() - t0, reply

    async with client:
        t0 = time.perf_counter()
        done = await asyncio.gather(*(one(q) for q in questions))
        wall = time.perf_counter() - t0
    return wall, [d[0] for d in done], [d[1] for d in done]


async def ask_direct(url: str, calls: list[list[dict[str, Any]]]) -> float:
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)

    async def rounds(bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            await client.chat.completions.create(**body)

    async with client:
        t0 = time.perf_counter()
        await asyncio.gather(*(rounds(b) for b in calls))
        return time.perf_counter() - t0


async def ask_rounds(url: str, calls: list[list[dict[str, Any]]]) -> float:
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    async with client:
        t0 = time.perf_counter()
        for r in range(max(len(c) for c in calls)):
            await asyncio.gather(*(client.chat.completions.create(**c[r])
                                   for c in calls if len(c) > r))
        return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--latency", type=float, default=0.3,
                   help="seconds the fake model takes per call (default 0.3)")
    p.add_argument("--n", type=int, default=8, help="the recipe's samples (default 8)")
    p.add_argument("--calibration", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    rows = []
    server = FakeModel(args.latency)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cert = calibrate(tmp, server.url, args.calibration, args.n, args.clients)
        gateway = Gateway(cert, tmp / "decisions.jsonl", args.clients)
        try:
            asyncio.run(ask_gateway(gateway.url, ["Warm up: how many?"]))
            for r in range(args.repeats):
                questions = [f"Bob has {r}-{i} pears?" for i in range(args.clients)]
                start = server.count()
                wall, latencies, replies = asyncio.run(ask_gateway(gateway.url, questions))
                sent: dict[str, list[dict[str, Any]]] = defaultdict(list)
                bodies = server.bodies(start, tmp / "bodies.json")
                for body in bodies:
                    sent[json.dumps(body["messages"])].append(body)
                direct = asyncio.run(ask_direct(server.url, list(sent.values())))
                rounds = asyncio.run(ask_rounds(server.url, list(sent.values())))
                samples = [x.credo["samples"] for x in replies]
                rows.append({"wall": wall, "direct": direct, "rounds": rounds,
                             "latencies": latencies,
                             "samples": statistics.mean(samples), "calls": len(bodies)})
        finally:
            gateway.close()
            server.close()
    lat = sorted(x for row in rows for x in row["latencies"])
    over = [row["wall"] / row["direct"] - 1 for row in rows]
    print(f"python {platform.python_version()}, {os.cpu_count()} cores; {args.clients} "
          f"clients, fake model {args.latency:g} s per call, n = {args.n}, adaptive decision "
          f"rule, {args.repeats} repeats")
    print(f"requests/s        {statistics.median(args.clients / r['wall'] for r in rows):.1f}")
    print(f"latency p50 / p95 {lat[len(lat) // 2]:.3f} s / {lat[int(0.95 * len(lat))]:.3f} s")
    print(f"samples/request   {statistics.mean(r['samples'] for r in rows):.2f} "
          f"(full recipe {args.n})")
    print(f"gateway wall      {statistics.median(r['wall'] for r in rows):.3f} s; direct, same "
          f"{statistics.median(r['calls'] for r in rows):.0f} calls: "
          f"{statistics.median(r['direct'] for r in rows):.3f} s")
    print(f"overhead          {statistics.median(over):+.1%} (per repeat: "
          + ", ".join(f"{o:+.1%}" for o in over) + ")")
    own = [row["wall"] / row["rounds"] - 1 for row in rows]
    print(f"same rounds       {statistics.median(r['rounds'] for r in rows):.3f} s direct; "
          f"the gateway's own cost {statistics.median(own):+.1%} (per repeat: "
          + ", ".join(f"{o:+.1%}" for o in own) + ")")


if __name__ == "__main__":
    main()
