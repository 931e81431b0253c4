"""The one binning rule of calibration (000 App. E.2; 002 App. A.11.3)."""

from __future__ import annotations

import numpy as np
import pytest

from credo.evaluate.binning import bin_centres, bin_index, number_of_bins
from credo.evaluate.bootstrap import calibration_curve
from credo.report.figures import bin_assignment


def test_equal_width_bins_put_one_in_the_last_bin():
    s = np.array([0.0, 0.05, 0.1, 0.15, 0.55, 0.99, 1.0])
    assert bin_index(s, 10).tolist() == [0, 0, 1, 1, 5, 9, 9]
    assert bin_index(s, 1).tolist() == [0] * 7
    assert bin_index(s, 3).tolist() == [0, 0, 0, 0, 1, 2, 2]


def test_levels_take_the_nearest_level_and_the_first_of_two_equally_near():
    lv = [0.0, 0.5, 1.0]
    assert bin_index([0.0, 0.2, 0.25, 0.3, 0.74, 0.8, 1.0], levels=lv).tolist() == [
        0, 0, 0, 1, 1, 2, 2
    ]


@pytest.mark.parametrize("levels", [None, np.linspace(0, 1, 6)])
def test_a_matrix_of_resamples_bins_like_each_of_its_rows(levels):
    s = np.random.default_rng(0).uniform(0, 1, (7, 30))
    rows = bin_index(s, 10, levels)
    assert rows.shape == s.shape
    for r in range(7):
        assert rows[r].tolist() == bin_index(s[r], 10, levels).tolist()


def test_number_of_bins_and_centres_and_bad_arguments():
    assert number_of_bins(4) == 4
    assert number_of_bins(4, [0.0, 1.0]) == 2
    assert bin_centres(4).tolist() == [0.125, 0.375, 0.625, 0.875]
    assert bin_centres(levels=[0.0, 0.5]).tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match="n_bins must be >= 1"):
        bin_index([0.5], 0)
    with pytest.raises(ValueError, match="levels must be a non-empty 1-d"):
        bin_index([0.5], levels=[])


def test_calibration_curve_and_figures_use_the_rule():
    s = np.array([0.0, 0.1, 0.5, 1.0, 1.0])
    _, _, counts = calibration_curve(s, np.ones_like(s), n_bins=4)
    assert counts.tolist() == np.bincount(bin_index(s, 4), minlength=4).tolist()
    bins, centres, widths = bin_assignment(s, 4)
    assert bins.tolist() == bin_index(s, 4).tolist()
    assert centres.tolist() == bin_centres(4).tolist() and widths.tolist() == [0.25] * 4
