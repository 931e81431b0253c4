"""The bootstrap engine: every resample as multinomial weights over one sort (Müller et al., §3.7).

A bootstrap resample draws N item indices with replacement; item ``i`` then appears
``w_i`` times, ``w ~ Multinomial(N, 1/N)``, and every metric of the evaluation is a
function of the items with those multiplicities. Sorting the N items once by score and
accumulating weights replaces materialising, sorting and scoring B resampled copies:

- ECE and MCE: weighted sums per bin (the bins of :mod:`credo.evaluate.binning`);
- Brier: a weighted mean of ``(s − y)²``;
- AUROC: the weighted Mann-Whitney statistic over the tie groups of the scores, a tie
  counting one half, as scikit-learn's trapezoidal ``roc_auc_score`` does;
- AUPRC-P / AUPRC-N: weighted cumulative true and false positives over the distinct
  thresholds, ``Σ_k (R_k − R_{k−1}) P_k`` as scikit-learn's ``average_precision_score``
  (ties share one threshold);
- AUARC and PRR: weighted cumulative counts and quality over the tie groups, with the
  harmonic sums that average ``Q_k / k`` inside a tie group in closed form.

Why a second implementation of these formulas: the plain functions of
:mod:`credo.evaluate.metrics` stay the reference (scikit-learn's where it has them), and
they are what :func:`credo.evaluate.bootstrap.bootstrap_ci` uses for any other metric.
But per-generation evaluation reaches 10^5 rows (200 items × 30 samples × methods), and
1000 resamples of the plain functions on 100,000 rows took 13.5 s for ECE and 19 s for
AUROC alone, per method (6–36 s CPU per metric measured here, ~160 s for all eight). On
the same data this engine evaluates all eight metrics of one method in ~3.3 s on two
shared vCPUs (``benchmarks/bootstrap_weighted.py``; ``docs/benchmarks.md``).
``tests/test_bootstrap.py`` shows it equal, to 1e-12 and on the same resample indices,
to the plain functions evaluated on every resample (ties, one class, equal scores).

The resample indices are numpy's ``default_rng(seed).integers(0, N, (B, N))``, the draw
of :func:`scipy.stats.bootstrap` with ``random_state=default_rng(seed)``, generated in
batches (the stream is the same) so that memory stays at a few (batch, N) matrices.

**Clusters.** Rows that are not independent (the generations of one question, the claims
of one answer) are resampled together: with ``clusters`` (one cluster id per row) a
resample draws C of the C clusters with replacement, ``default_rng(seed).integers(0, C,
(B, C))``, and every row of a cluster drawn ``k`` times gets weight ``k`` (the cluster
bootstrap; Davison & Hinkley 1997 §3.8, Field & Welsh 2007). The metrics are the same
functions of the weights.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from scipy import sparse

from credo.evaluate import registry
from credo.evaluate.binning import bin_index, number_of_bins
from credo.evaluate.metrics import prr_ratio

__all__ = [
    "FAST_METRICS",
    "LABEL_METRICS",
    "WeightedSample",
    "resample_indices",
    "weighted_bootstrap",
]

ArrayLike = Sequence[float] | np.ndarray

#: Metrics of the weighted engine: those registered with ``weighted=True``
#: (:mod:`credo.evaluate.registry`), in the registry's order; each has a
#: method of :class:`_Stats` of its name. A live view of the registry.
FAST_METRICS = registry.names(weighted=True)
#: Those read against the 0/1 labels; the others against the quality (p̄ or correctness).
LABEL_METRICS = registry.names(weighted=True, target="label")

_BATCH_ELEMENTS = 1 << 21
"""Resample rows per batch = this / N (at least 1): ~16 MB per (batch, N) float matrix."""
THREADS = 2
"""Worker threads of :func:`weighted_bootstrap` on jobs of more than one batch."""


def resample_indices(
    n: int, n_resamples: int, seed: int = 0, *, row_size: int | None = None
) -> Iterator[np.ndarray]:
    """The bootstrap's (batch, n) index matrices, ``n_resamples`` rows in all.

    Row ``b`` is row ``b`` of ``default_rng(seed).integers(0, n, (n_resamples, n))``,
    the indices :func:`scipy.stats.bootstrap` draws; drawn a batch at a time (numpy's
    stream does not depend on how the draw is split). ``row_size``: the length of the
    weight rows a batch becomes (the rows of a cluster resample, more than its ``n``
    clusters; default ``n``), which sizes the batches.
    """
    rng = np.random.default_rng(seed)
    batch = max(1, _BATCH_ELEMENTS // max(n, row_size or 0, 1))
    for start in range(0, n_resamples, batch):
        yield rng.integers(0, n, (min(batch, n_resamples - start), n))


def weighted_bootstrap(
    sample: WeightedSample, metrics: Sequence[str], n_resamples: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """The ``n_resamples`` values of each of ``metrics`` on the resamples of
    :func:`resample_indices` (NaN where a metric is undefined on a resample).

    Batches are drawn in order in this thread and evaluated by up to :data:`THREADS`
    worker threads (numpy releases the GIL in its array loops); each batch's values are
    independent of the others', so the result does not depend on the threads.
    """
    parts: dict[str, list[np.ndarray]] = {m: [] for m in metrics}

    def collect(values: dict[str, np.ndarray]) -> None:
        for m in metrics:
            parts[m].append(values[m])

    batches = resample_indices(sample.n_units, n_resamples, seed, row_size=sample.n)
    if THREADS < 2 or sample.n * n_resamples < _BATCH_ELEMENTS:
        for idx in batches:
            collect(sample.evaluate(sample.weights(idx), metrics))
    else:
        with ThreadPoolExecutor(THREADS) as pool:
            pending: deque[Future[dict[str, np.ndarray]]] = deque()
            for idx in batches:  # at most THREADS + 1 batches of indices in memory
                pending.append(pool.submit(_evaluate_indices, sample, idx, metrics))
                if len(pending) > THREADS:
                    collect(pending.popleft().result())
            while pending:
                collect(pending.popleft().result())
    return {m: np.concatenate(v) if v else np.zeros(0) for m, v in parts.items()}


def _evaluate_indices(
    sample: WeightedSample, idx: np.ndarray, metrics: Sequence[str]
) -> dict[str, np.ndarray]:
    return sample.evaluate(sample.weights(idx), metrics)


class WeightedSample:
    """N scored items sorted once, evaluated under any number of weight vectors.

    Parameters
    ----------
    scores : float in [0, 1], shape (N,)
    quality : float in [0, 1], shape (N,)
        Target of ECE and MCE and quality of AUARC and PRR (p̄, or 0/1 correctness).
    labels : 0/1, shape (N,), optional
        Labels of Brier, AUROC and AUPRC; required for those metrics.
    n_bins, levels
        The ECE/MCE bins (:func:`credo.evaluate.binning.bin_index`).
    clusters : shape (N,), optional
        The cluster of each row (any integer ids): :meth:`weights` then reads cluster
        draws, and every row of a drawn cluster is weighted by its draws (module
        docstring). ``n_units`` is the number of clusters (N without them).

    Inputs are not checked beyond their shapes: callers validate at their door.
    """

    def __init__(
        self,
        scores: ArrayLike,
        quality: ArrayLike,
        labels: ArrayLike | None = None,
        *,
        n_bins: int = 10,
        levels: ArrayLike | None = None,
        clusters: ArrayLike | None = None,
    ) -> None:
        s = np.asarray(scores, dtype=float)
        q = np.asarray(quality, dtype=float)
        if s.ndim != 1 or s.shape != q.shape:
            raise ValueError(
                f"scores and quality must be 1-d of equal length, got {s.shape}, {q.shape}"
            )
        self.n = s.size
        order = np.argsort(-s, kind="stable")  # descending score: the one sort
        self.rank = np.empty(self.n, dtype=np.intp)
        self.rank[order] = np.arange(self.n)
        self.cluster: np.ndarray | None = None  # each sorted row's cluster, 0..C-1
        self.n_units = self.n
        if clusters is not None:
            ids = np.asarray(clusters)
            if ids.shape != s.shape:
                raise ValueError(f"clusters must have the shape of scores, got {ids.shape}")
            _, inverse = np.unique(ids, return_inverse=True)
            self.cluster = inverse.reshape(-1)[order]
            self.n_units = int(inverse.max()) + 1 if inverse.size else 0
        s_sorted = s[order]
        self.starts = _group_starts(s_sorted)
        self.singletons = self.starts.size == self.n  # no tied scores
        self.score = s_sorted[self.starts]  # distinct scores, descending
        self.item_score = s_sorted
        self.quality = q[order]
        self.labels: np.ndarray | None = None
        if labels is not None:
            y = np.asarray(labels, dtype=float)
            if y.shape != s.shape:
                raise ValueError(f"labels must have the shape of scores, got {y.shape}")
            self.labels = y[order]
        self.quality_is_labels = self.labels is not None and np.array_equal(
            self.labels, self.quality
        )
        # AUPRC-N ranks by 1 − s: groups of equal 1 − s, ascending s (unions of s-groups).
        self.neg_starts = _group_starts(1.0 - self.score[::-1])
        # the most rows a resample can hold: N, or with clusters C times the largest
        most = self.n if self.cluster is None else self.n_units * int(
            np.bincount(self.cluster).max(initial=0))
        self.harmonic = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, most + 1))))
        self._linear_columns(n_bins, levels)

    def _linear_columns(self, n_bins: int, levels: ArrayLike | None) -> None:
        """The (N, k) matrix M whose product ``w @ M`` gives every statistic linear in the
        weights: per bin the gap Σ w (q − s) and the count Σ w, Σ w (s − y)², Σ w q, and
        the count per distinct quality value (the oracle of PRR)."""
        n_b = number_of_bins(n_bins, levels)
        bins = bin_index(self.item_score, n_bins, levels)
        self.quality_values, q_group = np.unique(-self.quality, return_inverse=True)
        self.quality_values = -self.quality_values  # descending
        n_q = self.quality_values.size
        dense_q = n_q <= 64
        cols = 2 * n_b + 2 + (n_q if dense_q else 0)
        m = np.zeros((self.n, cols))
        rows = np.arange(self.n)
        m[rows, bins] = self.quality - self.item_score
        m[rows, n_b + bins] = 1.0
        if self.labels is not None:
            m[:, 2 * n_b] = (self.item_score - self.labels) ** 2
        m[:, 2 * n_b + 1] = self.quality
        if dense_q:
            m[rows, 2 * n_b + 2 + q_group] = 1.0
            self.by_quality = None
        else:
            self.by_quality = sparse.csc_matrix(
                (np.ones(self.n), (rows, q_group)), shape=(self.n, n_q)
            )
        self.linear = m
        self.n_bins = n_b

    def weights(self, idx: np.ndarray) -> np.ndarray:
        """The (b, N) multiplicities, in sorted order, of the (b, N) resample indices; with
        clusters, of the (b, C) cluster draws (each row weighted by its cluster's)."""
        idx = np.atleast_2d(idx)
        b = idx.shape[0]
        if self.cluster is not None:
            c = self.n_units
            flat = idx + (np.arange(b) * c)[:, None]
            counts = np.bincount(flat.ravel(), minlength=b * c).reshape(b, c)
            return counts[:, self.cluster]
        flat = self.rank[idx]
        flat += (np.arange(b) * self.n)[:, None]
        return np.bincount(flat.ravel(), minlength=b * self.n).reshape(b, self.n)

    def evaluate(self, w: np.ndarray, metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """Each of ``metrics`` under every row of the (b, N) sorted-order integer weights.

        A row of weights is a resample with item ``i`` (in sorted order) repeated
        ``w[i]`` times; a metric is NaN on a row where it is undefined (one class for
        AUROC, no positive / negative for AUPRC-P / AUPRC-N, constant quality for PRR).
        """
        unknown = set(metrics) - set(FAST_METRICS)
        if unknown:
            raise ValueError(f"no weighted form of {sorted(unknown)}; known: {FAST_METRICS}")
        need = sorted(m for m in metrics if m in LABEL_METRICS)
        if need and self.labels is None:
            raise ValueError(f"{need} need labels")
        stats = _Stats(self, np.atleast_2d(w))
        return {m: getattr(stats, m)() for m in metrics}


class _Stats:
    """The metrics of one batch of weights, from sums computed once and shared.

    Per tie group g of the scores, in descending order: ``count`` c_g = Σ w,
    ``pos`` = Σ w·y, ``qual`` = Σ w·q, and their running totals; statistics linear in
    the weights come from one product with :attr:`WeightedSample.linear`.
    """

    def __init__(self, sample: WeightedSample, w: np.ndarray) -> None:
        self.sample = sample
        self.w_int = np.asarray(w, dtype=np.int64)
        self.w = self.w_int.astype(float)
        self._cache: dict[str, np.ndarray] = {}

    def _get(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = getattr(self, f"_compute_{name}")()
        return self._cache[name]

    # ----------------------------------------------------------- shared quantities

    @property
    def total(self) -> np.ndarray:
        """Σ w per row (N for a resample): the sum of the bin counts."""
        k = self.sample.n_bins
        return self._get("linear")[:, k : 2 * k].sum(axis=1)

    def _compute_linear(self) -> np.ndarray:
        return self.w @ self.sample.linear

    def _compute_count(self) -> np.ndarray:
        return _group_sum(self.w, self.sample.starts)

    def _compute_pos(self) -> np.ndarray:
        assert self.sample.labels is not None
        return _group_sum(self.w * self.sample.labels, self.sample.starts)

    def _compute_qual(self) -> np.ndarray:
        if self.sample.quality_is_labels:
            return self._get("pos")
        return _group_sum(self.w * self.sample.quality, self.sample.starts)

    def _compute_cum_count(self) -> np.ndarray:
        return self._get("cum_count_int").astype(float)

    def _compute_cum_count_int(self) -> np.ndarray:
        return np.cumsum(_group_sum(self.w_int, self.sample.starts), axis=1)

    def _compute_cum_pos(self) -> np.ndarray:
        return np.cumsum(self._get("pos"), axis=1)

    def _compute_cum_neg(self) -> np.ndarray:
        return self._get("cum_count") - self._get("cum_pos")

    def _compute_cum_qual(self) -> np.ndarray:
        if self.sample.quality_is_labels:
            return self._get("cum_pos")
        return np.cumsum(self._get("qual"), axis=1)

    # ---------------------------------------------------------------- the metrics

    def ece(self) -> np.ndarray:
        gap = self._get("linear")[:, : self.sample.n_bins]
        return np.abs(gap).sum(axis=1) / self.total

    def mce(self) -> np.ndarray:
        k = self.sample.n_bins
        lin = self._get("linear")
        gap, count = lin[:, :k], lin[:, k : 2 * k]
        with np.errstate(invalid="ignore", divide="ignore"):
            per_bin = np.where(count > 0, np.abs(gap) / count, -np.inf)
        return per_bin.max(axis=1)

    def brier(self) -> np.ndarray:
        return self._get("linear")[:, 2 * self.sample.n_bins] / self.total

    def auroc(self) -> np.ndarray:
        """Weighted Mann-Whitney: Σ_g pos_g (negatives scored lower + ½ negatives tied)."""
        pos = self._get("pos")
        n_pos = self._get("cum_pos")[:, -1]
        n_neg = self._get("cum_neg")[:, -1]
        # Σ pos_g (n_neg − cum_neg_g + ½ neg_g); with no tied scores pos_g·neg_g = 0
        wins = n_pos * n_neg - _rowdot(pos, self._get("cum_neg"))
        if not self.sample.singletons:
            wins += 0.5 * _rowdot(pos, self._get("count") - pos)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where((n_pos > 0) & (n_neg > 0), wins / (n_pos * n_neg), np.nan)

    def auprc_pos(self) -> np.ndarray:
        """``Σ_g pos_g · TP_g / (TP_g + FP_g) / P`` over thresholds, highest score first."""
        tp = self._get("cum_pos")
        precision = np.maximum(self._get("cum_count"), 1.0)  # 0 only before the first item
        np.divide(tp, precision, out=precision)
        n_pos = tp[:, -1]
        with np.errstate(invalid="ignore", divide="ignore"):
            ap = _rowdot(self._get("pos"), precision) / n_pos
            return np.where(n_pos > 0, np.minimum(ap, 1.0), np.nan)  # at most 1 (metrics)

    def auprc_neg(self) -> np.ndarray:
        """AUPRC-P of ``1 − s`` against ``1 − y``: thresholds from the lowest score up.

        In descending order, the negatives and items scored at most ``s_g`` are the
        totals minus the running sums before g.
        """
        count = self._get("count")
        neg = count - self._get("pos")
        n_neg = self.total - self._get("cum_pos")[:, -1]
        if self.sample.neg_starts.size < count.shape[1]:  # 1 − s merges some scores
            neg = np.add.reduceat(neg[:, ::-1], self.sample.neg_starts, axis=1)
            count = np.add.reduceat(count[:, ::-1], self.sample.neg_starts, axis=1)
            tn, seen = np.cumsum(neg, axis=1), np.cumsum(count, axis=1)
        else:
            tn = _before(n_neg, self._get("cum_neg"))
            seen = _before(self.total, self._get("cum_count"))
        np.maximum(seen, 1.0, out=seen)  # 0 only past the last item
        np.divide(tn, seen, out=tn)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n_neg > 0, np.minimum(_rowdot(neg, tn) / n_neg, 1.0), np.nan)

    def auarc(self) -> np.ndarray:
        if "auarc" not in self._cache:
            s = self.sample
            if s.singletons:  # a group's mean quality is its item's
                mean = s.quality
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = np.where(
                        self._get("count") > 0, self._get("qual") / self._get("count"), 0.0
                    )
            area = _rejection_area(
                self._get("cum_count_int"), self._get("cum_qual"), mean, s.harmonic,
                self._get("cum_count"),
            ) + self._get("linear")[:, 2 * s.n_bins + 1]
            self._cache["auarc"] = area / self.total
        return self._cache["auarc"]

    def prr(self) -> np.ndarray:
        s = self.sample
        model = self.auarc()
        lin = self._get("linear")
        if s.by_quality is None:
            count = lin[:, 2 * s.n_bins + 2 :]
        else:
            count = np.asarray(self.w @ s.by_quality)
        count_int = np.rint(count).astype(np.int64)
        quality_total = lin[:, 2 * s.n_bins + 1]
        oracle = (
            _rejection_area(
                np.cumsum(count_int, axis=1), np.cumsum(count * s.quality_values, axis=1),
                s.quality_values, s.harmonic,
            )
            + quality_total
        ) / self.total
        random = quality_total / self.total
        constant = (count_int > 0).sum(axis=1) <= 1
        return np.where(constant, np.nan, prr_ratio(model, oracle, random))


def _rejection_area(
    cum_count: np.ndarray,
    cum_quality: np.ndarray,
    mean: np.ndarray,
    harmonic: np.ndarray,
    cum_count_float: np.ndarray | None = None,
) -> np.ndarray:
    """``Σ_{k=1..N} Q_k / k − Σ q`` over groups in descending score order.

    Inside group g (positions C_{g−1}+1 .. C_g, mean quality m_g) the running total is
    ``Q_k = QC_g − (C_g − k) m_g``, so the group adds
    ``(QC_g − C_g m_g)(H(C_g) − H(C_{g−1})) + q_g`` with H the harmonic numbers; the
    caller adds ``Σ_g q_g``. ``cum_count`` holds integers (exact indices into
    ``harmonic``); ``cum_count_float`` the same as floats, when the caller has them.
    """
    h_end = harmonic[cum_count]
    steps = np.empty_like(h_end)
    steps[:, 0] = h_end[:, 0]
    np.subtract(h_end[:, 1:], h_end[:, :-1], out=steps[:, 1:])
    if cum_count_float is None:
        cum_count_float = cum_count.astype(float)
    rest = cum_count_float * mean
    np.subtract(cum_quality, rest, out=rest)
    return _rowdot(rest, steps)


def _before(total: np.ndarray, running: np.ndarray) -> np.ndarray:
    """``total − running sum before position g``, per row: what remains from g on."""
    out = np.empty_like(running)
    out[:, 0] = total
    np.subtract(total[:, None], running[:, :-1], out=out[:, 1:])
    return out


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a * b).sum(axis=1)`` without the temporary."""
    return np.einsum("ij,ij->i", a, b)


def _group_starts(sorted_values: np.ndarray) -> np.ndarray:
    """The first position of every run of equal values."""
    if sorted_values.size == 0:
        return np.zeros(0, dtype=np.intp)
    return np.flatnonzero(np.concatenate(([True], sorted_values[1:] != sorted_values[:-1])))


def _group_sum(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return x if starts.size == x.shape[1] else np.add.reduceat(x, starts, axis=1)
