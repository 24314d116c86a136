"""The coverage study of the bounds (studies/bound_coverage.py) on small tables."""

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats


@pytest.fixture
def study(load_study):
    return load_study("bound_coverage")


def test_the_families_have_the_tails_they_promise(study):
    """Large draws of each family against its definition: the logit-normal departure has
    sd 1 about the additive mean, the Beta truth has the additive mean, a third of the
    zero-inflated cells are unsolvable and the rest are logit-normal."""
    rng = np.random.default_rng(0)
    rates, ability, difficulty, surprising = study.truth("logit_normal", 10, 4000, rng)
    assert not surprising.any()
    additive = ability[:, None] - difficulty[None, :]
    assert np.allclose(ability, np.linspace(-7, 1, 10))
    departure = special.logit(rates) - additive
    assert abs(departure.std() - 1.0) < 0.02 and abs(departure.mean()) < 0.02
    assert abs(difficulty.std() - 1.5) < 0.05

    rates, ability, difficulty, _ = study.truth("beta", 10, 4000, rng)
    mean = special.expit(ability[:, None] - difficulty[None, :])
    relative = (rates - mean).mean(axis=1) / mean.mean(axis=1)
    assert np.all(np.abs(relative) < 0.15)
    # a weak agent's rates: a spike near zero with a tail (Beta shapes m k and (1 - m) k)
    weakest = rates[0] / mean[0]
    assert np.median(weakest) < 0.01 and np.quantile(weakest, 0.99) > 3

    rates, _, _, _ = study.truth("zero_inflated", 10, 4000, rng)
    assert abs((rates == 0).mean() - 1 / 3) < 0.01

    # 3% of the cells 3 log-odds higher, the rest logit-normal
    rates, ability, difficulty, surprising = study.truth("surprising", 10, 4000, rng)
    departure = special.logit(rates) - (ability[:, None] - difficulty[None, :])
    assert abs(surprising.mean() - 0.03) < 0.003
    assert abs(departure[surprising].mean() - 3.0) < 0.1
    assert abs(departure[~surprising].std() - 1.0) < 0.02

    with pytest.raises(ValueError, match="unknown family"):
        study.truth("gamma", 2, 2, rng)


def test_a_table_carries_its_truth_and_its_milestones_multiply_to_it(study):
    table = study.simulate_table("logit_normal", 4, 6, 5, np.random.default_rng(1))
    evidence, truth = table["evidence"], table["truth"]
    assert len(truth) == 24 and truth["weakest"].sum() == study.WEAKEST * 6
    e2e = evidence[evidence["method"] == "end_to_end"]
    merged = truth.merge(e2e, on=["agent", "task"], suffixes=("", "_row"))
    assert (merged["successes"] == merged["successes_row"]).all()
    assert (merged["trials"] == 5).all()
    milestones = evidence[evidence["method"] == "milestone"]
    assert milestones.groupby(["agent", "task"]).size().eq(study.MILESTONES).all()
    # the milestones' true rates are given, one per milestone row, and multiply to the truth
    steps = table["milestone_truth"]
    assert len(steps) == len(milestones)
    assert (
        steps[["agent", "task", "step"]].values == milestones[["agent", "task", "step"]].values
    ).all()
    product = steps.groupby(["agent", "task"], sort=False)["truth"].prod().values
    np.testing.assert_allclose(product, truth["truth"].values, rtol=1e-12)
    # milestone counts follow rates that multiply to the truth: over many replicates the
    # product of the milestones' empirical rates is unbiased for P (independent milestones)
    many = [
        study.simulate_table("logit_normal", 2, 3, 2000, np.random.default_rng(s)) for s in range(3)
    ]
    for table in many:
        steps = table["evidence"].query("method == 'milestone'")
        product = steps.assign(rate=steps["successes"] / steps["trials"])
        product = product.groupby(["agent", "task"])["rate"].prod().reset_index()
        both = table["truth"].merge(product, on=["agent", "task"])
        assert np.allclose(both["rate"], both["truth"], atol=0.03)
    for model in ("end_to_end", "crossed"):
        assert set(study.evidence_for(model, evidence)["method"]) == {"end_to_end"}
    assert set(study.evidence_for("ecr_pooled", evidence)["method"]) == {"expert_completion"}


def test_the_exact_bounds_are_counted_against_the_truth(study):
    """The exact model's bound is Beta(1 + k, 1 + n - k)'s quantile; a miss is a truth
    above it; the summary counts the zero-success cells and the weakest agents apart."""
    table = study.simulate_table("zero_inflated", 5, 8, 4, np.random.default_rng(2))
    cells = study.one_fit("end_to_end", table, seed=1, level=0.975)
    assert len(cells) == 40 and cells["passed"].all()
    expected = stats.beta.ppf(0.975, 1 + cells["successes"], 1 + 4 - cells["successes"])
    np.testing.assert_allclose(cells["upper"], expected, rtol=1e-10)
    assert (cells["missed"] == (cells["truth"] > cells["upper"])).all()
    summary = study.summarise(cells.assign(family="zero_inflated", table=0))
    row = summary.iloc[0]
    zero = cells[cells["successes"] == 0]
    assert row["zero_cells"] == len(zero)
    assert row["zero_missed"] == pytest.approx(zero["missed"].mean())
    assert row["weakest_zero_cells"] == len(zero[zero["weakest"]])
    assert row["below_1e7"] == 0 and row["extrapolated"] == 0
    assert row["refitted"] == 0  # an exact fit is one attempt


def test_the_worst_table_is_reported_beside_the_pooled_share(study):
    """Two tables of one family: the pooled share is of every zero-success cell, the worst
    is the larger of the two tables' own shares."""
    table = study.simulate_table("zero_inflated", 5, 8, 4, np.random.default_rng(2))
    first = study.one_fit("end_to_end", table, seed=1, level=0.975).assign(table=0)
    second = first.assign(table=1, missed=first["successes"] == 0)  # every zero cell missed
    row = study.summarise(pd.concat([first, second]).assign(family="zero_inflated")).iloc[0]
    zero = first[first["successes"] == 0]
    assert row["zero_missed"] == pytest.approx((zero["missed"].mean() + 1) / 2)
    assert row["zero_missed_worst"] == 1.0
    assert row["weakest_zero_missed_worst"] == 1.0


def test_the_families_shape_can_be_changed(study):
    """--unsolvable sets the share of cells never solvable, --concentration the Beta's k
    (the spread of a cell's rate about its additive mean shrinks as k grows)."""
    rates, *_ = study.truth("zero_inflated", 10, 4000, np.random.default_rng(4), unsolvable=0.5)
    assert abs((rates == 0).mean() - 0.5) < 0.01
    for k in (1.0, 30.0):
        rates, ability, difficulty, _ = study.truth(
            "beta", 10, 4000, np.random.default_rng(5), concentration=k
        )
        m = special.expit(ability[:, None] - difficulty[None, :])
        # Beta(m k, (1 - m) k) has variance m (1 - m) / (k + 1)
        ratio = ((rates - m) ** 2).mean() / (m * (1 - m) / (k + 1)).mean()
        assert abs(ratio - 1) < 0.05


def test_where_decisions_are_made_each_verdict_is_counted_by_what_carries_it(study):
    """The decisions table of the exact model's fit of a surprising table (every verdict
    carried by the pair's own runs, 80 runs per pair so that some are below 0.05): the
    surprising cells' misses with and without a success, the below-threshold verdicts by
    basis and the surprising ones among them, counted by hand from the cells."""
    rng = np.random.default_rng(6)
    table = study.simulate_table("surprising", 10, 40, 80, rng, surprise_share=0.2)
    cells = study.one_fit("end_to_end", table, seed=1, level=0.975, threshold=0.05)
    row = study.decisions(cells.assign(family="surprising", table=0)).iloc[0]
    surprising = cells[cells["surprising"]]
    seen = surprising["successes"] > 0
    assert row["surprising"] == len(surprising) > 0
    assert row["seen"] == seen.sum()
    assert row["seen_missed"] == pytest.approx(surprising.loc[seen, "missed"].mean())
    deciding = seen & (surprising["truth"] < 0.5)
    assert deciding.sum() > 0
    assert row["seen_deciding_missed"] == pytest.approx(surprising.loc[deciding, "missed"].mean())
    below = cells[cells["verdict"] == "below threshold"]
    expected = stats.beta.ppf(0.975, 1 + cells["successes"], 81 - cells["successes"]) < 0.05
    assert len(below) == expected.sum() > 0 and (below["basis"] == "own").all()
    assert row["below_own"] == len(below) and row["below_pooled"] == 0
    assert row["below_own_missed"] == pytest.approx(below["missed"].mean())
    assert row["surprising_below"] == len(below[below["surprising"]])
    assert row["disagree"] == 0


def test_the_oracle_bound_is_the_true_laws_posterior_quantile(study):
    """The oracle's bound of a cell: the 0.975 quantile of its departure's posterior under
    the true law (0.97 N(0, 1) + 0.03 N(3, 1)) given its runs, from its true additive
    logit; checked against scipy's quadrature of that posterior and a root finder, on
    cells with 0, 1 and 8 successes of 8."""
    from scipy import integrate, optimize

    table = study.simulate_table("surprising", 4, 6, 8, np.random.default_rng(3))
    bounds = study.oracle_bounds(table, 0.975)
    cells = table["truth"]

    def density(e, eta, k):
        law = 0.97 * stats.norm.pdf(e) + 0.03 * stats.norm.pdf(e, 3.0)
        return law * stats.binom.pmf(k, 8, special.expit(eta + e))

    for at in [cells["successes"].idxmin(), cells["successes"].idxmax(), 7, 15]:
        eta, k = cells.at[at, "additive"], cells.at[at, "successes"]
        whole = integrate.quad(density, -20, 25, args=(eta, k), limit=400)[0]

        def below(x, eta=eta, k=k, whole=whole):
            return integrate.quad(density, -20, x, args=(eta, k), limit=400)[0] / whole - 0.975

        expected = special.expit(eta + optimize.brentq(below, -20, 25, xtol=1e-10))
        assert bounds[at] == pytest.approx(expected, rel=0.006)  # a grid step: 0.005 log-odds
    with pytest.raises(ValueError, match="the oracle knows the logit families' laws"):
        study.oracle_bounds(study.simulate_table("beta", 2, 2, 2, np.random.default_rng(0)), 0.975)


def test_a_small_study_of_the_crossed_model(study):
    """A real crossed fit of a sparse table outside its family (zero-inflated): its
    diagnostics pass, every cell has a bound, none astronomically small."""
    results = study.study(["zero_inflated"], ["crossed"], 1, agents=4, tasks=10, runs=3, seed=5)
    summary = study.summarise(results).iloc[0]
    assert summary["passed"] == 1.0
    assert results["upper"].notna().all() and len(results) == 40
    assert summary["below_1e7"] == 0
    zero = results[results["successes"] == 0]
    # the floor: 0 successes in the 39 runs sharing the pair's agent (30) or task (12, less
    # its own 3), under the uniform prior: 1 - 0.025^(1 / 40)
    floor = 1 - 0.025 ** (1 / 40)
    assert (zero["extrapolated"] == (zero["upper"] < floor)).all()
    assert pd.api.types.is_bool_dtype(results["missed"])


def test_a_cell_without_a_bound_is_counted_apart(study):
    """phuong2024's Haldane prior leaves a pair with a milestone of no success without a
    posterior: such a cell has no bound, is neither missed nor held, and is counted apart;
    the shares are of the cells with a bound."""
    table = study.simulate_table("logit_normal", 4, 6, 4, np.random.default_rng(3))
    cells = study.one_fit("phuong2024", table, seed=1, level=0.975)
    steps = table["evidence"].query("method == 'milestone'")
    unbounded = steps.groupby(["agent", "task"])["successes"].min().eq(0).rename("expected")
    cells = cells.merge(unbounded.reset_index(), on=["agent", "task"])
    assert 0 < cells["expected"].sum() < len(cells)
    assert (cells["upper"].isna() == cells["expected"]).all()
    assert (cells["missed"].isna() == cells["expected"]).all()
    row = study.summarise(cells.assign(family="logit_normal", table=0)).iloc[0]
    bounded = cells[~cells["expected"]]
    assert row["no_bound"] == cells["expected"].sum()
    assert row["missed"] == pytest.approx((bounded["truth"] > bounded["upper"]).mean())
