"""SQLite generation cache: one row per (request key, sample index).

The request key hashes everything that changes a sample's output: the backend's model
identity (weights hash included), the rendered messages, the sampling parameters and the
run seed. The sample index is the second half of the primary key, so asking for n = 20
after n = 10 generates samples 10..19 only (inspect_ai's bug #2580, one cached sample for
30 requested, is what this rules out). Sample ``i`` is drawn with seed
``sample_seed(key, i) = base(key) + i``; backends honour that contract (see
``credo.models.base``), so a resumed run reproduces an uninterrupted one.

Every completed request is committed at once, so an interrupted run loses at most the
requests in flight and never writes a sample twice (``INSERT OR IGNORE`` on the key).

Threads. One store may be used from several threads (the gateway decides each question in
a thread of its own): its one connection is used under a lock, one statement or
transaction at a time, so a block is written whole or not at all whichever thread writes
it, and a kill leaves no half-written block (SQLite's write-ahead log).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from credo.errors import UserError
from credo.jsonio import check_file_writable
from credo.types import Generation, GenerationRequest, TokenLogprob

_SEED_SPACE = 2**31 - 2**20  # leaves room for 2**20 sample indices below 2**31

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    request TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS samples (
    key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    text TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    completion_tokens INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    logprobs TEXT,
    seconds REAL NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (key, idx)
);
CREATE TABLE IF NOT EXISTS unverified_empty (
    key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    PRIMARY KEY (key, idx)
);
"""


def request_key(identity: str, request: GenerationRequest, run_seed: int) -> str:
    """SHA-256 of the canonical JSON of (model identity, request minus seed and n, run seed).

    ``seed`` and ``n`` are left out because they select samples, they do not define the
    distribution: sample ``i`` of the key is always drawn with ``sample_seed(key, i)``.
    """
    payload = {
        "identity": identity,
        "request": request.model_dump(mode="json", exclude={"seed", "n"}),
        "run_seed": run_seed,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def sample_seed(key: str, index: int) -> int:
    """Seed of sample ``index`` of request ``key``: ``base(key) + index``."""
    if index < 0 or index >= 2**20:
        raise ValueError(f"sample index out of range: {index}")
    return int(key[:15], 16) % _SEED_SPACE + index


class GenerationStore:
    """The SQLite cache of sampled generations, safe to share across threads (module
    docstring).

    The file is created by the first write, not when the store is made: a run
    that stops at its preflight (no server, a bad option) or a dry run leaves no empty
    cache behind. An existing file is opened at once, so one that is not a credo cache is
    refused before any model call; reads of a file not created yet find nothing.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        _refuse_other_files(self.path)
        if self.path.exists():
            self._connection = self._connect()
        elif str(self.path) != ":memory:":  # made by the first write: its folder must take
            check_file_writable(self.path, "the cache (--cache)")  # it

    def _connect(self) -> sqlite3.Connection:
        """Open (creating it and its folder if missing) the database, with its tables; a
        file that is SQLite but not a credo cache is refused."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise UserError(f"{self.path}: cannot open the cache there (--cache): {e}") from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.commit()
            missing = _missing_columns(db)
        except sqlite3.DatabaseError as e:
            db.close()
            raise UserError(
                f"{self.path}: not a credo cache (an SQLite file) or not writable (--cache): {e}"
            ) from None
        if missing:
            db.close()
            raise UserError(
                f"{self.path}: an SQLite file but not a credo cache (--cache): its tables lack "
                f"{', '.join(missing)}"
            )
        return db

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection, opened (the file created) on first use."""
        with self._lock:
            if self._connection is None:
                self._connection = self._connect()
            return self._connection

    def _reader(self) -> sqlite3.Connection | None:
        """The connection for a read: None while no cache file exists (nothing cached)."""
        with self._lock:
            if self._connection is None and not self.path.exists():
                return None
            return self._db

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Hold the store's lock, and turn an SQLite error met in a query (pages of the
        file damaged after it opened: "database disk image is malformed") into a
        :class:`UserError` naming the cache; the transaction of a write is rolled back by
        ``with self._db``."""
        with self._lock:
            try:
                yield
            except sqlite3.DatabaseError as e:
                raise UserError(f"{self.path}: the cache cannot be read or written (--cache): "
                                f"{e}") from None

    def close(self) -> None:
        """Close the database connection (if one was opened)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> GenerationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cached_indices(self, key: str) -> set[int]:
        """Sample indices already stored for ``key``."""
        db = self._reader()
        if db is None:
            return set()
        with self._reading():
            rows = db.execute("SELECT idx FROM samples WHERE key = ?", (key,)).fetchall()
        return {r[0] for r in rows}

    def get(self, key: str, indices: Iterable[int]) -> list[Generation]:
        """The stored generations of ``key`` at ``indices``, in that order.

        Raises KeyError naming the first missing index.
        """
        wanted = list(indices)
        db = self._reader()
        if db is None:
            rows = []
        else:
            with self._reading():
                rows = db.execute(
                    "SELECT idx, text, finish_reason, completion_tokens, prompt_tokens, logprobs,"
                    " seconds FROM samples WHERE key = ?",
                    (key,),
                ).fetchall()
        by_idx = {r[0]: r for r in rows}
        out = []
        for i in wanted:
            if i not in by_idx:
                raise KeyError(f"sample {i} of request {key[:12]} is not cached")
            _, text, finish, ctoks, ptoks, lp, secs = by_idx[i]
            try:
                logprobs = _decode_logprobs(lp)
            except (ValueError, TypeError, RecursionError) as e:
                raise UserError(f"{self.path}: sample {i} of request {key[:12]} has damaged "
                                f"logprobs (--cache): {e}") from None
            out.append(Generation(text, finish, ctoks, ptoks, logprobs, secs))
        return out

    def put(
        self,
        key: str,
        identity: str,
        request: GenerationRequest,
        first_index: int,
        generations: list[Generation],
    ) -> int:
        """Store ``generations`` as samples ``first_index, first_index + 1, ...`` of ``key``.

        Commits before returning. Returns the number of rows actually written (rows that
        already exist are left untouched).
        """
        return self.put_many([(key, identity, request, first_index, generations)])

    def put_many(
        self, blocks: Sequence[tuple[str, str, GenerationRequest, int, list[Generation]]]
    ) -> int:
        """Store several blocks ``(key, identity, request, first_index, generations)`` in
        one transaction (the Ray executor commits the blocks of one returned call
        together); as :meth:`put` for each, committed before returning. Returns the
        number of sample rows actually written."""
        now = time.time()
        with self._reading(), self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO requests (key, identity, request, created) VALUES (?,?,?,?)",
                [(key, identity, request.model_dump_json(exclude={"seed", "n"}), now)
                 for key, identity, request, _, _ in blocks],
            )
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO samples (key, idx, seed, text, finish_reason,"
                " completion_tokens, prompt_tokens, logprobs, seconds, created)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        key,
                        first + j,
                        sample_seed(key, first + j),
                        g.text,
                        g.finish_reason,
                        g.completion_tokens,
                        g.prompt_tokens,
                        _encode_logprobs(g.logprobs),
                        g.seconds,
                        now,
                    )
                    for key, _, _, first, generations in blocks
                    for j, g in enumerate(generations)
                ],
            )
            return self._db.total_changes - before

    def mark_unverified_empty(self, key: str, indices: Iterable[int]) -> None:
        """Mark samples ``indices`` of ``key`` as empty replies of a backend that does not
        reproduce seeds, empty on every retry too: maybe a glitch, maybe the sample. Committed
        before returning."""
        with self._reading(), self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO unverified_empty (key, idx) VALUES (?, ?)",
                [(key, i) for i in indices],
            )

    def unverified_empty(self, key: str) -> set[int]:
        """The sample indices of ``key`` marked by :meth:`mark_unverified_empty`."""
        db = self._reader()
        if db is None:
            return set()
        with self._reading():
            return {r[0] for r in db.execute("SELECT idx FROM unverified_empty WHERE key = ?",
                                             (key,))}

    def count_samples(self) -> int:
        """Total number of stored samples."""
        db = self._reader()
        if db is None:
            return 0
        with self._reading():
            return int(db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def stats(self) -> dict[str, int]:
        """Numbers of requests, samples and generated tokens in the cache."""
        db = self._reader()
        if db is None:
            return {"requests": 0, "samples": 0, "completion_tokens": 0}
        with self._reading():
            req = db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
            n, toks = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(completion_tokens), 0) FROM samples"
            ).fetchone()
        return {"requests": int(req), "samples": int(n), "completion_tokens": int(toks)}


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _refuse_other_files(path: Path) -> None:
    """A :class:`UserError` for an existing, non-empty file that is not SQLite: SQLite
    itself takes a one-byte file for an empty database and writes over it, so
    the header is checked before connecting. A missing or empty file becomes a new cache."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except (FileNotFoundError, IsADirectoryError):
        return  # a new cache; or a folder, which sqlite3.connect refuses below
    except OSError as e:
        raise UserError(f"{path}: cannot open the cache there (--cache): {e.strerror or e}"
                        ) from None
    if head and head != _SQLITE_MAGIC:
        raise UserError(f"{path}: not a credo cache (not an SQLite file) (--cache)")


_COLUMNS = {
    "requests": ("key", "identity", "request", "created"),
    "samples": ("key", "idx", "seed", "text", "finish_reason", "completion_tokens",
                "prompt_tokens", "logprobs", "seconds", "created"),
}


def _missing_columns(db: sqlite3.Connection) -> list[str]:
    """``table.column`` for every column of :data:`_SCHEMA` a table of ``db`` lacks (an
    SQLite file written by something else, whose same-named tables CREATE TABLE IF NOT
    EXISTS keeps)."""
    missing = []
    for table, columns in _COLUMNS.items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        missing += [f"{table}.{c}" for c in columns if c not in have]
    return missing


def _encode_logprobs(lp: tuple[TokenLogprob, ...] | None) -> str | None:
    if lp is None:
        return None
    return json.dumps([[t.token, t.logprob, [list(a) for a in t.top]] for t in lp])


def _decode_logprobs(blob: str | None) -> tuple[TokenLogprob, ...] | None:
    if blob is None:
        return None
    return tuple(
        TokenLogprob(tok, lp, tuple((a, b) for a, b in top)) for tok, lp, top in json.loads(blob)
    )
