"""The model-choice study's tables and its tally (``studies/model_choice.py``)."""

import numpy as np
import pandas as pd
import pytest
from scipy import special


def _rates(study, family):
    """A table of ``family`` with 20,000 trials per cell (its observed rates are the true
    ones), and its milestone and end-to-end rates by pair."""
    table = study.simulate_table(family, 3, 20, 20_000, np.random.default_rng(1))
    rows_per_pair = {1} if family == "crossed" else {3, 4, 5}  # 2-4 milestones + 1
    assert set(table.groupby(["agent", "task"]).size()) <= rows_per_pair
    rate = table["successes"] / table["trials"]
    pairs = [table["agent"], table["task"]]
    milestones = rate[table["method"] == "milestone"].groupby(pairs)
    end_to_end = rate[table["method"] == "end_to_end"].groupby(pairs).sum()
    return milestones, end_to_end


@pytest.mark.parametrize("family", ["no_bypass", "bypass"])
def test_the_milestone_families_draw_the_story_they_name(load_study, family):
    """The share of what the milestone product ``Q`` leaves that the end-to-end rate ``P``
    takes, ``(P - Q) / (1 - Q)``, is the bypass, whose mean is 1/4 (Beta(1, 3); sd 0.19,
    so 0.025 over 60 pairs), and 0 without one."""
    milestones, end_to_end = _rates(load_study("model_choice"), family)
    q = np.exp(np.log(milestones.obj).groupby(milestones.keys).sum()).loc[end_to_end.index]
    seen = q.to_numpy() < 0.99  # where the product leaves room for a bypass to be seen
    q, p = q.to_numpy()[seen], end_to_end.to_numpy()[seen]
    taken = (p - q) / (1 - q)
    expected = 0.25 if family == "bypass" else 0.0
    assert abs(taken.mean() - expected) < 4 * 0.025


@pytest.mark.parametrize("family", ["crossed", "guided"])
def test_the_crossed_families_are_additive_on_the_logit_scale(load_study, family):
    """``logit P = theta_a - b_t + 0.5 e``: once its agent and task means are taken out,
    what is left is ``0.5 e`` so centred, whose sum of squares over its (3 - 1)(20 - 1) =
    38 degrees of freedom estimates 0.5^2 (the sd of such an estimate of 0.5 is
    0.5 / sqrt(76) = 0.057). The crossed story has no milestone; in the guided one a
    milestone's logit is ``theta_a - b_t + u``, ``u ~ N(1, 1)``: its pair's mean
    milestone logit exceeds ``logit P`` by ``mean(u) - 0.5 e``, 1 on average (sd at most
    ``sqrt(1/2 + 1/4)`` per pair, 0.11 over 60 pairs), so the milestones do not multiply to
    ``P``."""
    milestones, end_to_end = _rates(load_study("model_choice"), family)
    logit = special.logit(end_to_end).unstack()
    centred = logit.sub(logit.mean(axis=1), axis=0).sub(logit.mean(axis=0), axis=1)
    centred += logit.to_numpy().mean()
    assert abs(np.sqrt((centred.to_numpy() ** 2).sum() / 38) - 0.5) < 4 * 0.057
    if family == "crossed":
        assert milestones.obj.empty
        return
    ahead = special.logit(milestones.obj).groupby(milestones.keys).mean() - special.logit(
        end_to_end
    )
    assert abs(ahead.mean() - 1.0) < 4 * 0.11


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
