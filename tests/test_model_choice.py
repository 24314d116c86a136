"""The model-choice study's tables and its tally (``studies/model_choice.py``)."""

import numpy as np
import pandas as pd
import pytest


@pytest.mark.parametrize("family", ["no_bypass", "bypass", "crossed"])
def test_each_family_draws_the_story_it_names(load_study, family):
    """With 20,000 trials per cell the observed rates are the true ones: the share of
    what the milestone product ``Q`` leaves that the end-to-end rate ``P`` takes,
    ``(P - Q) / (1 - Q)``, is the bypass, whose mean is 1/4 (Beta(1, 3); sd 0.19, so
    0.025 over 60 pairs), and 0 without one (the crossed family's milestones split
    ``P``)."""
    study = load_study("model_choice")
    table = study.simulate_table(family, 3, 20, 20_000, np.random.default_rng(1))
    rate = table["successes"] / table["trials"]
    pairs = [table["agent"], table["task"]]
    product = np.exp(np.log(rate[table["method"] == "milestone"]).groupby(pairs).sum())
    end_to_end = rate[table["method"] == "end_to_end"].groupby(pairs).sum()
    q = product.loc[end_to_end.index].to_numpy()
    seen = q < 0.99  # where the product leaves room for a bypass to be seen
    taken = ((end_to_end.to_numpy() - q) / (1 - q))[seen]
    expected = 0.25 if family == "bypass" else 0.0
    assert abs(taken.mean() - expected) < 4 * 0.025
    assert set(table.groupby(["agent", "task"]).size()) <= {3, 4, 5}  # 2-4 milestones + 1


def test_the_tally_counts_the_truth_first_and_within_noise(load_study):
    study = load_study("model_choice")
    rows = pd.DataFrame(
        [
            ("bypass", 0, "joint", "joint", 0.0, 0.0, True),
            ("bypass", 0, "joint", "crossed", -5.0, 1.0, False),
            ("bypass", 1, "joint", "crossed", 0.0, 0.0, True),
            ("bypass", 1, "joint", "joint", -1.0, 1.0, False),  # within 2 se
            ("bypass", 2, "joint", "hierarchical", 0.0, 0.0, True),
            ("bypass", 2, "joint", "joint", -3.0, 1.0, False),  # beyond
        ],
        columns=["family", "table", "truth", "model", "elpd_diff", "dse", "picked"],
    )
    tally = study.summarise(rows).loc["bypass"]
    assert (tally["tables"], tally["truth_first"], tally["truth_within_noise"]) == (3, 1, 2)
