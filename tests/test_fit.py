"""Each shipped exact model on small tables with hand-worked answers."""

import logging
import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import integrate, optimize, stats

import bayes_eval
from bayes_eval import InputError, load_posterior
from bayes_eval.exact.expert import step_bits, unguided_bits
from bayes_eval.messages import collected


def table(*rows):
    return pd.DataFrame(rows)


def e2e(task, k, n, **extra):
    return dict(task=task, method="end_to_end", successes=k, trials=n, **extra)


def ms(task, step, k, n):
    return dict(task=task, method="milestone", step=step, successes=k, trials=n)


def row_of(summary, task):
    return summary.set_index("task").loc[task]


def test_end_to_end_uniform_prior_and_clopper_pearson():
    summary = bayes_eval.fit(table(e2e("t", 3, 20)), "end_to_end").summary(threshold=0.1)
    r = row_of(summary, "t")
    assert r["mean"] == pytest.approx(4 / 22)
    assert r["upper"] == pytest.approx(stats.beta.ppf(0.975, 4, 18), rel=1e-10)
    assert r["lower"] == pytest.approx(stats.beta.ppf(0.025, 4, 18), rel=1e-10)
    assert r["median"] == pytest.approx(stats.beta.median(4, 18), rel=1e-10)
    assert r["sd"] == pytest.approx(stats.beta.std(4, 18), rel=1e-10)
    assert r["prob_above"] == pytest.approx(stats.beta.sf(0.1, 4, 18), rel=1e-9)
    assert r["cp_upper"] == pytest.approx(stats.beta.ppf(0.975, 4, 17), rel=1e-10)
    assert r["log10_upper"] == pytest.approx(math.log10(r["upper"]))
    assert r["method"] == "end_to_end" and bool(r["diagnostics_ok"])
    assert "Beta(1, 1)" in r["provenance"] and np.isnan(r["upper_mcse"])


def test_level_override_and_zero_successes():
    summary = bayes_eval.fit(table(e2e("t", 0, 10)), "end_to_end", level=0.99).summary()
    r = row_of(summary, "t")
    assert r["level"] == 0.99
    assert r["upper"] == pytest.approx(1 - 0.01 ** (1 / 11))  # uniform prior closed form
    assert r["cp_upper"] == pytest.approx(1 - 0.01 ** (1 / 10))  # Clopper-Pearson
    with pytest.raises(InputError, match="must lie strictly between 0.5 and 1"):
        bayes_eval.fit(table(e2e("t", 0, 10)), "end_to_end", level=1.0)


def test_phuong2024_is_the_product_of_empirical_rates():
    evidence = table(ms("t", 1, 45, 100), ms("t", 2, 20, 100), ms("t", 3, 30, 30))
    r = row_of(bayes_eval.fit(evidence, "phuong2024").summary(), "t")
    assert r["mean"] == pytest.approx(0.45 * 0.20)  # milestone 3 (30/30) is a point mass at 1
    # Beta(45, 55) x Beta(20, 80): the 0.975 quantile of the product by scipy's numerical
    # integration, P(p1 p2 <= u) = int f1(x) F2(u / x) dx, to the claimed 1e-4 in log P
    one, two = stats.beta(45, 55), stats.beta(20, 80)

    def cdf(u):
        return integrate.quad(lambda x: one.pdf(x) * two.cdf(min(u / x, 1.0)), 0, 1, epsabs=1e-13)[
            0
        ]

    reference = optimize.brentq(lambda u: cdf(u) - 0.975, 0.01, 0.5, xtol=1e-14)
    assert abs(math.log(r["upper"]) - math.log(reference)) <= 1e-4


def test_phuong2024_zero_success_milestone_has_no_estimate():
    summary = bayes_eval.fit(table(ms("t", 1, 5, 10), ms("t", 2, 0, 10)), "phuong2024").summary()
    r = row_of(summary, "t")
    assert np.isnan(r["mean"]) and np.isnan(r["upper"])  # never an upper bound of 0
    assert "no estimate: milestone 2 has 0/10 successes" in r["provenance"]


def test_mats2024_uniform_prior_mean():
    r = row_of(
        bayes_eval.fit(table(ms("t", 1, 0, 100), ms("t", 2, 50, 100)), "mats2024").summary(), "t"
    )
    assert r["mean"] == pytest.approx((1 / 102) * (51 / 102))
    assert 0 < r["upper"] < 1


def test_ecr2024_mixture_of_runs():
    steps = [
        dict(task="t", method="expert_completion", run=run, step=s, successes=k, trials=10)
        for run, s, k in [("a", 1, 5), ("a", 2, 10), ("b", 1, 2)]
    ]
    r = row_of(bayes_eval.fit(table(*steps), "ecr2024").summary(), "t")
    a, z = 0.02, 10.04
    expected = 0.5 * ((5 + a) / z * (10 + a) / z) + 0.5 * ((2 + a) / z)
    assert r["mean"] == pytest.approx(expected)
    assert "equal mixture of 2 run(s)" in r["provenance"]


def test_expert_formulas():
    assert step_bits(1) == pytest.approx(1.0)  # log2(1 * 2)
    assert step_bits(3) == pytest.approx(math.log2(12))
    assert unguided_bits(0.3) == 2  # ceil(1.74)
    assert unguided_bits(0.25) == 2 and unguided_bits(1.0) == 0


def test_chain_rungs():
    best = [
        dict(task="m", method="expert_best_of_n", step=s, milestone=2, chosen_index=i)
        for s, i in [(1, 3), (2, 1)]
    ]
    golden = [
        dict(task="g", method="golden_solution", step=s, milestone=1, logprob=lp)
        for s, lp in [(1, -1.0), (2, -0.5)]
    ]
    whole = [dict(task="w", method="expert_best_of_n", step=1, chosen_index=2)]
    evidence = table(
        e2e("e", 2, 10),
        ms("e", 1, 5, 10),  # e2e has successes: e2e rung
        e2e("m", 0, 10),
        ms("m", 1, 45, 100),
        ms("m", 2, 0, 100),
        *best,
        ms("g", 1, 0, 50),
        ms("g", 2, 10, 50),
        *golden,
        *whole,
        e2e("z", 0, 15),  # nothing else: e2e posterior
        ms("n", 1, 0, 20),  # no fallback: no estimate
    )
    with collected() as notes:
        summary = bayes_eval.fit(evidence).summary()
    e = row_of(summary, "e")
    assert e["method"] == "end_to_end" and e["mean"] == pytest.approx(3 / 12)
    assert "rung end_to_end" in e["provenance"]
    m = row_of(summary, "m")
    assert m["method"] == "expert_best_of_n"
    assert m["mean"] == pytest.approx(0.45 * 2 ** -(math.log2(12) + 1))  # point value
    assert np.isnan(m["upper"]) and np.isnan(m["median"])  # not dressed up as a posterior
    assert "m2 expert_best_of_n" in m["provenance"] and "m1 milestone 45/100" in m["provenance"]
    g = row_of(summary, "g")
    assert g["method"] == "golden_solution"
    assert g["mean"] == pytest.approx(math.exp(-1.5) * 0.2)
    assert "lower bound" in g["provenance"]
    w = row_of(summary, "w")
    assert w["mean"] == pytest.approx(2 ** -math.log2(6)) and "(whole task)" in w["provenance"]
    z = row_of(summary, "z")
    assert z["method"] == "end_to_end" and z["upper"] == pytest.approx(1 - 0.025 ** (1 / 16))
    n = row_of(summary, "n")
    assert np.isnan(n["mean"]) and "no expert best-of-N or golden-solution run" in n["provenance"]
    assert any("left out 1 milestone row(s)" in note for note in notes)  # task e's milestone


def test_tasks_a_model_cannot_use_are_left_out_by_name(caplog):
    evidence = table(e2e("a", 1, 5), ms("b", 1, 2, 5), ms("c", 1, 4, 5))
    with collected() as notes:
        summary = bayes_eval.fit(evidence, "end_to_end").summary()
    assert summary["task"].tolist() == ["a"]
    assert notes == [
        "left out 2 milestone row(s) (rows 3, 4): model end_to_end (end_to_end) does not use them",
        "left out 2 task(s) the model cannot use (no end_to_end rows, which model end_to_end "
        "needs): task 'b' (agent 'agent'), task 'c' (agent 'agent')",
    ]
    with caplog.at_level(logging.WARNING, logger="bayes_eval"):
        bayes_eval.fit(evidence, "end_to_end")  # not collected: a warning on the logger
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("bayes_eval", "WARNING", note) for note in notes
    ]


def test_a_table_with_no_usable_task_names_every_task_first_ten_then_a_count():
    evidence = table(*[e2e(f"t{i:02d}", 1, 5) for i in range(12)])
    with pytest.raises(InputError) as caught:
        bayes_eval.fit(evidence, "mats2024")
    message = str(caught.value)
    assert message.startswith("DataFrame: no task is usable: task 't00' (agent 'agent'), ")
    assert "task 't09' (agent 'agent') and 2 more (no milestone rows" in message
    assert "t10" not in message


def test_draws_labelled_seeded_and_centred():
    evidence = table(ms("t", 1, 45, 100), ms("t", 2, 20, 100), e2e("u", 2, 8))
    one = bayes_eval.fit(evidence, "phuong_chain", seed=4)
    p = one.tree["posterior"]
    assert p["p_task"].dims == ("chain", "draw", "agent", "task")
    assert p["p_milestone"].dims == ("chain", "draw", "milestone_cell")
    assert list(p["milestone_cell"].values) == [
        "agent / t / milestone 1",
        "agent / t / milestone 2",
    ]
    same = bayes_eval.fit(evidence, seed=4).tree["posterior"]["p_task"]
    other = bayes_eval.fit(evidence, seed=5).tree["posterior"]["p_task"]
    assert same.equals(p["p_task"]) and not other.equals(p["p_task"])
    draws = p["p_task"].sel(task="t").values.ravel()
    mean = 0.45 * 0.2
    sd = one.summary().set_index("task").loc["t", "sd"]
    assert abs(draws.mean() - mean) < 4 * sd / math.sqrt(draws.size)


def test_netcdf_round_trip_and_tamper_refusal(tmp_path):
    evidence = table(ms("t", 1, 45, 100), ms("t", 2, 20, 100), e2e("u", 2, 8))
    posterior = bayes_eval.fit(evidence, "phuong_chain", seed=3)
    path = posterior.to_netcdf(tmp_path / "posterior.nc")
    loaded = load_posterior(path)
    pd.testing.assert_frame_equal(loaded.summary(threshold=0.05), posterior.summary(threshold=0.05))
    xr.testing.assert_identical(loaded.tree, posterior.tree)  # every group, value and attribute
    assert set(loaded.tree.children) == {
        "posterior",
        "posterior_predictive",
        "observed_data",
        "constant_data",
        "log_likelihood",
        "prior",
        "prior_predictive",
        "log_prior",  # Haldane's milestone prior is not uniform
        "conjugate",
        "evidence",
    }
    assert loaded.spec.text == posterior.spec.text
    assert loaded.evidence.hash == posterior.evidence.hash
    import h5netcdf

    with h5netcdf.File(path, "a") as f:
        f.attrs["evidence_hash"] = "0" * 64
    with pytest.raises(InputError, match="does not match its hash"):
        load_posterior(path)


def test_names_that_look_missing_round_trip(tmp_path):
    rows = [dict(e2e(task, 1, 4), agent=agent) for agent, task in [("nan", "None"), ("NA", "null")]]
    posterior = bayes_eval.fit(table(*rows), "end_to_end")
    loaded = load_posterior(posterior.to_netcdf(tmp_path / "posterior.nc"))
    summary = loaded.summary()
    assert summary["agent"].tolist() == ["nan", "NA"]
    assert summary["task"].tolist() == ["None", "null"]
    pd.testing.assert_frame_equal(summary, posterior.summary())


def test_the_end_to_end_table_builder_is_the_per_pair_builder_stacked():
    """``end_to_end_table`` builds every pair at once; on a sparse, ragged table (one trial
    per cell, zero and all successes, missing cells, milestone rows it leaves out, pairs
    with no end-to-end row) it gives the per-pair builder's estimates, array for array."""
    from bayes_eval.exact.builders import Estimates, end_to_end, end_to_end_table
    from bayes_eval.fit import usable_rows
    from bayes_eval.specs import load_spec

    rng = np.random.default_rng(5)
    rows = []
    for n in range(200):
        agent, task = f"agent-{n % 6}", f"task-{n // 6}"
        if rng.random() < 0.2:  # a missing cell
            continue
        if rng.random() < 0.8:
            trials = int(rng.choice([1, 1, 2, 5]))
            rows.append((agent, task, "end_to_end", -1, int(rng.binomial(trials, 0.2)), trials))
        if rng.random() < 0.3:
            rows.append((agent, task, "milestone", 1, 1, 2))
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    table["step"] = table["step"].astype("Int64").where(table["step"] > 0)
    spec = load_spec("end_to_end")
    pair_rows = usable_rows(table, spec)
    by_pair = Estimates.stack([end_to_end(*pair, pair_rows[pair], spec) for pair in pair_rows])
    at_once = end_to_end_table(pair_rows, spec)
    assert len(pair_rows) > 100 and (at_once.cp[:, 0] == 0).any()
    assert_same_estimates(at_once, by_pair)


def assert_same_estimates(at_once, by_pair):
    for name in ("agent", "task", "method", "provenance", "reason"):
        np.testing.assert_array_equal(getattr(at_once, name), getattr(by_pair, name))
    for name in ("alpha", "beta", "point_log", "cp"):
        np.testing.assert_array_equal(getattr(at_once, name), getattr(by_pair, name))
    assert at_once.used.sort_values().equals(by_pair.used.sort_values())


@pytest.mark.parametrize("model", ["mats2024", "phuong2024"])
def test_the_milestone_table_builder_is_the_per_pair_builder_stacked(model):
    """``milestones_table`` builds every pair at once; on a sparse, ragged table (one to
    five milestones a pair, one trial per cell, zero-success milestones, which have no
    proper posterior under phuong2024's Haldane prior, missing cells, end-to-end rows it
    leaves out) it gives the per-pair builder's estimates, array for array."""
    from bayes_eval.exact.builders import Estimates, milestones, milestones_table
    from bayes_eval.fit import usable_rows
    from bayes_eval.specs import load_spec

    rng = np.random.default_rng(6)
    rows = []
    for n in range(240):
        agent, task = f"agent-{n % 6}", f"task-{n // 6}"
        if rng.random() < 0.2:  # a missing cell
            continue
        for step in range(1, int(rng.integers(1, 6)) + 1):
            trials = int(rng.choice([1, 1, 3, 10]))
            rows.append((agent, task, "milestone", step, int(rng.binomial(trials, 0.6)), trials))
        if rng.random() < 0.3:
            rows.append((agent, task, "end_to_end", -1, 1, 2))
    table = pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])
    table["step"] = table["step"].astype("Int64").where(table["step"] > 0)
    spec = load_spec(model)
    pair_rows = usable_rows(table, spec)
    by_pair = Estimates.stack([milestones(*pair, pair_rows[pair], spec) for pair in pair_rows])
    at_once = milestones_table(pair_rows, spec)
    assert len(pair_rows) > 150
    assert (at_once.reason != "").any() == (model == "phuong2024")
    assert_same_estimates(at_once, by_pair)
