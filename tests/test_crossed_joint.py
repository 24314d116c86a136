"""The linked crossed model (``crossed_joint``): milestone and end-to-end runs of agents x
tasks, the end-to-end rate linked to the pair's milestone competence. Sparse, ragged
designs: one trial per cell, pairs never run, pairs with guided runs alone, an agent
without an end-to-end success."""

import numpy as np
import pandas as pd
import pytest
from scipy import special

import bayes_eval
from bayes_eval import InputError
from bayes_eval.checks.sbc import sbc
from bayes_eval.messages import collected

SMALL = {"draws": 300, "tune": 300, "chains": 2}


def _sparse_table(seed=0):
    """4 agents x 6 tasks, 2 to 4 subtasks, one trial per cell; (a0, t1) and (a3, t4) never
    run; (a1, t2) and (a2, t5) run on milestones alone; a3 never succeeds end to end."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(4):
        for t in range(6):
            if (a, t) in ((0, 1), (3, 4)):
                continue
            for step in range(1, 2 + (t % 3) + 1):
                rows.append((f"a{a}", f"t{t}", "milestone", step, int(rng.random() < 0.5), 1))
            if (a, t) not in ((1, 2), (2, 5)):
                success = 0 if a == 3 else int(rng.random() < 0.3)
                rows.append((f"a{a}", f"t{t}", "end_to_end", np.nan, success, 1))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


def test_every_pair_gets_draws_and_a_pair_never_run_is_its_population():
    """Every (agent, task) of the design has end-to-end draws in [0, 1]; a pair never run
    is marked so. Its rate is ``expit(m + sqrt(link^2 pair_scale^2 + cell_scale^2) z)``
    per posterior draw, ``m = theta_a - b_t + link (phi_a - c_t)``: its mean over the draws
    matches that logistic-normal integral (Gauss-Hermite, per draw) within 4 Monte Carlo
    standard errors."""
    table = _sparse_table()
    with collected():
        posterior = bayes_eval.fit(table, "crossed_joint", seed=3, sampler=SMALL)
    draws = posterior.draws
    p = draws["p_task"]
    assert p.sizes["agent"] == 4 and p.sizes["task"] == 6
    assert np.isfinite(p.values).all() and (p.values >= 0).all() and (p.values <= 1).all()
    summary = posterior.summary().set_index(["agent", "task"])
    assert not summary.loc[("a0", "t1"), "observed"] and not summary.loc[("a3", "t4"), "observed"]
    assert summary.loc[("a1", "t2"), "observed"]  # run on milestones: predicted from them
    link, pair, cell = (draws[n].values.ravel() for n in ("link", "pair_scale", "cell_scale"))
    m = (
        draws["ability"].sel(agent="a0").values.ravel()
        - draws["difficulty"].sel(task="t1").values.ravel()
        + link
        * (
            draws["milestone_ability"].sel(agent="a0").values.ravel()
            - draws["milestone_difficulty"].sel(task="t1").values.ravel()
        )
    )
    x, w = np.polynomial.hermite_e.hermegauss(60)
    spread = np.sqrt(link**2 * pair**2 + cell**2)
    expected = (special.expit(m[:, None] + spread[:, None] * x) @ w / w.sum()).mean()
    got = p.sel(agent="a0", task="t1").values.ravel()
    assert abs(got.mean() - expected) < 4 * got.std() / np.sqrt(got.size)


def test_a_table_without_milestone_rows_is_refused_naming_the_model_to_use():
    table = _sparse_table()
    table = table[table["method"] == "end_to_end"]
    with pytest.raises(InputError, match="no milestone rows.*with crossed$"):
        bayes_eval.fit(table, "crossed_joint", sampler=SMALL)


def test_sbc_of_the_linked_model_on_a_sparse_design():
    """SBC on the sparse, ragged design of one trial per cell: every scalar of both sides,
    the slope ``link`` among them, and the end-to-end rate of every pair."""
    result = sbc(_sparse_table(1), "crossed_joint", simulations=24, draws=99, bins=4, seed=2)
    assert result.passed(), result.p_values.sort_values().head()
    assert {"link", "pair_scale", "milestone_mean", "cell_scale"} <= set(result.p_values.index)
