"""Pooled PyMC models: real sampling on simulated data with known truth (small, for CI)."""

import io
from fractions import Fraction
from math import comb, prod

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import stats

import bayes_eval
from bayes_eval import load_posterior
from bayes_eval.checks.assumption import milestone_assumption
from bayes_eval.checks.fitted import check_fit
from bayes_eval.constants import DEFAULT_LEVEL, RHAT_MAX
from bayes_eval.inference.retry import fit_attempts
from bayes_eval.messages import collected
from bayes_eval.outputs.report import build_report
from bayes_eval.outputs.verdicts import UNRELIABLE
from bayes_eval.results.predictive import predictive_checks

# The shipped specs' own settings (4 chains x 2000 draws) for the recovery tests, whose
# criteria (R-hat <= 1.01, no divergences) are the issue's; fewer only where noted.
SMALL = {"draws": 500, "tune": 500, "chains": 2}


def simulate_milestones(rng, n_tasks, with_e2e=0.0, bypass_mean=0.0, rare=0.0):
    """Tasks with 2-8 milestones, 10-100 trials each; optional end-to-end runs with bypass.

    A share ``rare`` of tasks has one milestone with true rate 0.005, so that zero-success
    cells arise from the truth itself.
    """
    rows, truth = [], {}
    mu_agent, kappa_agent, kappa = 0.6, 8.0, 30.0
    for t in range(n_tasks):
        task = f"t{t:02d}"
        mu_task = rng.beta(mu_agent * kappa_agent, (1 - mu_agent) * kappa_agent)
        m = int(rng.integers(2, 9))
        rates = rng.beta(mu_task * kappa, (1 - mu_task) * kappa, m)
        if rng.random() < rare:
            rates[-1] = 0.005
        q = float(np.prod(rates))
        bypass = float(rng.beta(bypass_mean * 20, (1 - bypass_mean) * 20)) if bypass_mean else 0
        truth[task] = q + (1 - q) * bypass
        for step, p in enumerate(rates, start=1):
            n = int(rng.integers(10, 101))
            rows.append(
                dict(
                    task=task,
                    method="milestone",
                    step=step,
                    successes=int(rng.binomial(n, p)),
                    trials=n,
                )
            )
        if rng.random() < with_e2e:
            rows.append(
                dict(
                    task=task,
                    method="end_to_end",
                    successes=int(rng.binomial(60, truth[task])),
                    trials=60,
                )
            )
    return pd.DataFrame(rows), pd.Series(truth)


def assert_nominal_coverage(upper, truth):
    """At most as many misses of the 97.5% bound as Binomial(n, 0.025) gives 99% of the time.

    The nominal share, up to binomial noise: with 40 tasks a perfectly calibrated bound
    misses 4 or more in only 1% of data sets.
    """
    misses = int((np.asarray(upper) < np.asarray(truth)).sum())
    allowed = stats.binom.ppf(0.99, len(upper), 1 - DEFAULT_LEVEL)
    assert misses <= allowed, f"{misses} of {len(upper)} bounds below truth ({allowed:g} allowed)"


def one_task_layout(k=(), n=(), e2e=(0, 0)):
    """The layout of one agent's one task: milestone cells ``k`` of ``n`` and end-to-end
    counts ``e2e`` (``(k, n)``; n = 0 for none)."""
    from bayes_eval.counts.layout import Layout

    cells = len(k)
    return Layout(
        agents=["a"],
        tasks=["t"],
        pairs=[("a", "t")],
        pair_agent=np.array([0]),
        cell_pair=np.zeros(cells, int),
        cell_run=np.zeros(cells, int),
        cell_factor=np.arange(1, cells + 1),
        k=np.array(k, int),
        n=np.array(n, int),
        e2e_k=np.array([e2e[0]]),
        e2e_n=np.array([e2e[1]]),
        runs=[[""]],
    )


def check_sampling(posterior):
    table = posterior.diagnostics.table
    assert table["r_hat"].max() <= RHAT_MAX
    assert posterior.diagnostics.divergences == 0


def test_end_to_end_pooled_recovers_truth_and_covers():
    rng = np.random.default_rng(1)
    truth = rng.beta(0.15 * 20, 0.85 * 20, 40)
    frame = pd.DataFrame(
        dict(
            task=[f"t{i}" for i in range(40)],
            method="end_to_end",
            successes=rng.binomial(30, truth),
            trials=30,
        )
    )
    posterior = bayes_eval.fit(frame, "end_to_end_pooled", seed=3)
    check_sampling(posterior)
    summary = posterior.summary()
    assert_nominal_coverage(summary["upper"], truth)
    mu = posterior.tree["posterior"]["mu"].values.ravel()
    assert abs(mu.mean() - 0.15) < 3 * mu.std() + 0.01
    assert summary["upper_mcse"].notna().all() and summary["cp_upper"].notna().all()


def test_hierarchical_zero_success_milestones_get_finite_bounds():
    rng = np.random.default_rng(2)
    frame, truth = simulate_milestones(rng, 25, rare=0.3)
    assert (frame["successes"] == 0).sum() >= 3  # milestones with no success at all
    posterior = bayes_eval.fit(frame, "hierarchical", seed=4)
    check_sampling(posterior)
    summary = posterior.summary().set_index("task")
    assert (summary["upper"] > 0).all() and np.isfinite(summary["upper"]).all()
    assert_nominal_coverage(summary["upper"], truth.loc[summary.index])
    rates = posterior.tree["posterior"]["p_milestone"]
    assert rates.dims == ("chain", "draw", "milestone_cell")
    assert rates.sizes["milestone_cell"] == (frame["method"] == "milestone").sum()


@pytest.mark.parametrize(
    "e2e, kappa, centred, mixed_centred",
    [((20, 40), 10, True, True), ((12, 24), 10, False, True), ((12, 24), 30, False, False)],
)
def test_joint_counts_end_to_end_trials_towards_centring_sampled_rates(
    e2e, kappa, centred, mixed_centred
):
    """A sampled milestone rate (a task with more than ``MARGINAL_END_TO_END`` end-to-end
    trials) is informed by its own trials and by its task's end-to-end trials (through
    the product): at a prior median concentration of 10, 2 + 40 trials reach the margin
    of 3 (kappa + 1) = 33; 2 + 24 do not. A rate with successes and failures of its own
    (1 of 2) is centred from kappa + 1 trials: 26 reach 11 but not 31. The all-success
    and all-failure cells are sampled on their tail scales whatever the form."""
    import dataclasses

    from bayes_eval.counts.layout import MARGINAL_END_TO_END, choose_form
    from bayes_eval.specs import Prior

    assert e2e[1] > MARGINAL_END_TO_END
    spec = bayes_eval.load_spec("joint")
    prior = Prior("LogNormal", {"mu": np.log(kappa), "sigma": 1.5}, "test")
    spec = dataclasses.replace(spec, priors={**spec.priors, "milestone_concentration": prior})
    layout = one_task_layout(k=[1, 2, 0], n=[2, 2, 2], e2e=e2e)
    form = choose_form(layout, spec)
    assert form.cells.tolist() == [mixed_centred, centred, centred]
    assert form.tails.tolist() == [0, 1, -1]
    assert form.flipped().tails.tolist() == [0, 1, -1]
    flipped = not mixed_centred  # all non-centred where any rate is centred, else all centred
    assert form.flipped().cells.tolist() == [flipped] * 3


@pytest.mark.slow  # a fit of its own; the non-centred task means keep their SBC (tests/test_sbc.py)
def test_unlike_milestones_get_noncentred_task_means_without_a_refit():
    """Milestone rates independent within a task leave the task means to the population
    (centred, a funnel: E-BFMI 0.17 in benchmarks/task_means.py). Three milestones carry
    less than three times the prior's information about a mean, so the form is chosen
    non-centred before the fit, which passes at the first attempt."""
    rng = np.random.default_rng(4)
    rates = rng.uniform(size=(40, 3))
    frame = pd.DataFrame(
        [
            dict(task=f"t{t:02d}", method="milestone", step=m + 1, successes=k, trials=100)
            for t in range(40)
            for m, k in enumerate(rng.binomial(100, rates[t]))
        ]
    )
    posterior = bayes_eval.fit(frame, "hierarchical", seed=2)
    provenance = str(posterior.summary()["provenance"].iloc[0])
    assert "task means non-centred; seed 2" in provenance
    assert "kept attempt" not in provenance and fit_attempts(provenance) == 1
    assert posterior.diagnostics.ok, posterior.diagnostics.messages
    assert_nominal_coverage(posterior.summary()["upper"], rates.prod(axis=1))


@pytest.mark.slow  # a coverage study
def test_joint_covers_bypass_paths_where_the_milestone_method_misses():
    rng = np.random.default_rng(5)
    frame, truth = simulate_milestones(rng, 24, with_e2e=0.5, bypass_mean=0.15)
    posterior = bayes_eval.fit(frame, "joint", seed=6)
    check_sampling(posterior)
    joint = posterior.summary().set_index("task")["upper"]
    milestones = frame[frame["method"] == "milestone"]
    phuong = bayes_eval.fit(milestones, "mats2024").summary().set_index("task")["upper"]
    only_milestones = sorted(
        set(truth.index) - set(frame.loc[frame.method == "end_to_end", "task"])
    )
    assert_nominal_coverage(joint, truth.loc[joint.index])
    assert_nominal_coverage(joint.loc[only_milestones], truth.loc[only_milestones])
    assert (joint >= truth.loc[joint.index]).mean() >= 0.9  # the 9 in 10
    assert (phuong >= truth.loc[phuong.index]).mean() < 0.5
    # The milestone-assumption check is the joint model's own subject: reported as
    # evidence about the paths, never as a doubt on the joint estimates.
    check = milestone_assumption(posterior.evidence, fitted=posterior)
    assert check["contradicted"].sum() >= 3  # the bypass is real and the check sees it
    assert not check["doubtful"].any()
    bypassed = check[check["contradicted"]]
    assert bypassed["message"].str.contains("attributes the difference to other paths").all()
    assert not check["message"].str.contains("WARNING|use end-to-end data").any()
    assert (check["bypass"] > 0).all()
    report = build_report(posterior, 0.5, checks=check_fit(posterior))
    ppc = predictive_checks(posterior)
    flagged = ppc[ppc["flagged"] & (ppc["evidence"] == "end_to_end")]
    unreliable = report.table.loc[report.table["verdict"] == UNRELIABLE, "task"]
    assert set(unreliable) == set(flagged["task"])  # only its own predictive check marks
    assert len(unreliable) < len(bypassed)


def test_pymc_engine_and_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    truth = rng.beta(2, 8, 12)
    frame = pd.DataFrame(
        dict(
            task=[f"t{i}" for i in range(12)],
            method="end_to_end",
            successes=rng.binomial(20, truth),
            trials=20,
        )
    )
    posterior = bayes_eval.fit(
        frame, "end_to_end_pooled", sampler={**SMALL, "engine": "pymc"}, seed=8
    )
    check_sampling(posterior)
    assert "pymc (cpu) 2 chains x 500 draws" in posterior.summary()["provenance"].iloc[0]
    loaded = load_posterior(posterior.to_netcdf(tmp_path / "posterior.nc"))
    assert loaded.is_mcmc
    pd.testing.assert_frame_equal(loaded.summary(threshold=0.2), posterior.summary(threshold=0.2))
    xr.testing.assert_identical(loaded.tree, posterior.tree)
    assert {"posterior", "sample_stats", "posterior_predictive"} <= set(loaded.tree.children)
    assert loaded.diagnostics.table.equals(posterior.diagnostics.table)


def test_a_fit_short_only_of_draws_is_refitted_with_more_before_it_fails():
    """60 draws per chain are too few (R-hat and ESS short on kappa and mu, no divergence):
    refitted with twice the draws, in the other form, then with twice the most draws
    tried, 480 (8 times 60, the refit budget), which passes; the provenance names every
    attempt and keeps the one that passed."""
    from bayes_eval.inference.retry import fit_attempts

    frame = pd.DataFrame(
        dict(task=["a", "b", "c"], method="end_to_end", successes=[0, 1, 5], trials=[10, 10, 10])
    )
    with collected():
        posterior = bayes_eval.fit(
            frame, "end_to_end_pooled", sampler={"draws": 60, "tune": 100, "chains": 2}, seed=1
        )
    assert posterior.diagnostics.ok
    provenance = posterior.summary()["provenance"].iloc[0]
    assert fit_attempts(provenance) == 4
    assert "kept attempt 4 of 4 (it passed)" in provenance
    assert "attempt 4 nutpie (cpu) 2 chains x 480 draws" in provenance
    assert posterior.draws.sizes["draw"] == 480


def test_starved_sampler_is_flagged_unreliable():
    frame = pd.DataFrame(
        dict(task=["a", "b", "c"], method="end_to_end", successes=[0, 1, 5], trials=[10, 10, 10])
    )
    posterior = bayes_eval.fit(
        frame, "end_to_end_pooled", sampler={"draws": 30, "tune": 20, "chains": 2}, seed=1
    )
    diagnostics = posterior.diagnostics
    assert not diagnostics.ok
    assert any("ESS below 400" in m and "increase --draws" in m for m in diagnostics.messages)
    summary = posterior.summary()
    assert not summary["diagnostics_ok"].any()
    assert summary["provenance"].str.contains("UNRELIABLE").all()
    assert not diagnostics.cell_ok("nobody", "nothing")  # unchecked is not passed


def test_tasks_without_milestones_are_left_out_by_name():
    """8 tasks, 2 with end-to-end rows only: hierarchical and joint fit the other 6 (their
    fits passing the diagnostics: joint's real-MCMC check in the default run) and name
    both tasks left out; with no usable task, an error names them all."""
    rng = np.random.default_rng(9)
    frame, _ = simulate_milestones(rng, 6)
    only_e2e = pd.DataFrame(
        [dict(task=t, method="end_to_end", successes=3, trials=20) for t in ("x1", "x2")]
    )
    for model in ("hierarchical", "joint"):
        with collected() as notes:
            posterior = bayes_eval.fit(pd.concat([frame, only_e2e]), model, sampler=SMALL)
        summary = posterior.summary()
        assert sorted(summary["task"]) == sorted(frame["task"].unique())
        assert summary["floor_upper"].isna().all() and summary["extrapolated"].isna().all()
        assert posterior.diagnostics.ok, posterior.diagnostics.messages
        left_out = [note for note in notes if "task(s) the model cannot use" in note]
        assert left_out == [
            f"left out 2 task(s) the model cannot use (no milestone rows, which model {model} "
            "needs): task 'x1' (agent 'agent'), task 'x2' (agent 'agent')"
        ]
        with pytest.raises(bayes_eval.InputError, match="DataFrame: no task is usable: task 'x1'"):
            bayes_eval.fit(only_e2e, model, sampler=SMALL)


def test_bypass_marginal_and_exact_redraw_match_quadrature():
    """The joint model's marginalised bypass: likelihood and posterior draws of lambda."""
    from scipy import integrate, stats

    from bayes_eval.pooled.paths import bypass_terms
    from bayes_eval.pooled.rates import _bypass

    q, a, b, k, n = 0.05, 1.5, 6.0, 9, 40
    exact = bypass_terms(
        np,
        np.log([[q]]),
        np.log([[1 - q]]),
        np.array([[a]]),
        np.array([[b]]),
        k=np.array([[k]]),
        n=np.array([[n]]),
        failures=np.array([[n - k]]),
        j_max=n,
        logsumexp=True,
    )[0]

    def joint_density(lam):
        return stats.binom.pmf(k, n, q + (1 - q) * lam) * stats.beta.pdf(lam, a, b)

    evidence = integrate.quad(joint_density, 0, 1, epsabs=1e-15, epsrel=1e-13)[0]
    assert exact == pytest.approx(np.log(evidence), rel=1e-10)
    mean = integrate.quad(lambda lam: lam * joint_density(lam), 0, 1, epsabs=1e-15)[0] / evidence
    layout = one_task_layout(e2e=(k, n))
    draws = 200_000
    shape = (1, draws)
    post = {
        "mu_bypass": xr_like(np.full(shape + (1,), a / (a + b))),
        "kappa_bypass": xr_like(np.full(shape + (1,), a + b)),
    }
    log_q = np.full(shape + (1,), np.log(q))
    lam = _bypass(post, layout, np.random.default_rng(0), shape, log_q, {})[..., 0].ravel()
    sd = lam.std()
    assert abs(lam.mean() - mean) < 4 * sd / np.sqrt(draws)


def rising(s, r):
    """The rising factorial ``(s)_r`` in exact rational arithmetic."""
    out = Fraction(1)
    for t in range(r):
        out *= s + t
    return out


def exact_path_likelihood(a, b, alpha, beta, k, n):
    """``P(k | a, b, alpha, beta)`` of the joint model for one task, exactly: ``k`` end-to-end
    successes in ``n``, ``s = Q + (1 - Q) lambda``, ``Q = prod p_m``, ``p_m ~ Beta(a_m,
    b_m)``, ``lambda ~ Beta(alpha, beta)``. Expanded the other way from ``survivor_chain``:
    ``E[Q^u (1 - Q)^v]`` by the alternating binomial sum over ``E[Q^r] = prod E[p_m^r]``,
    whose cancellation rational arithmetic makes harmless."""

    def q_moment(u, v):
        return sum(
            comb(v, i)
            * (-1) ** i
            * prod(rising(am, u + i) / rising(am + bm, u + i) for am, bm in zip(a, b, strict=True))
            for i in range(v + 1)
        )

    def bypass_moment(j, f):
        return rising(alpha, j) * rising(beta, f) / rising(alpha + beta, j + f)

    return comb(n, k) * sum(
        comb(k, j) * q_moment(k - j, n - k + j) * bypass_moment(j, n - k) for j in range(k + 1)
    )


# Rows with 3, 2 and 1 milestones (the tables' order), trials 1 to 5, every success count;
# shapes from a rate near 1 (where 1 - Q cancels) to one near 0.
PATH_ROWS = [
    ([Fraction(3, 2), Fraction(400), Fraction(1, 50)], [Fraction(5, 4), Fraction(1, 10), 3]),
    ([Fraction(7), Fraction(2, 3)], [Fraction(1, 3), Fraction(9, 2)]),
    ([Fraction(900)], [Fraction(1, 20)]),
]


@pytest.mark.parametrize("n", [1, 3, 5, 12])
def test_path_likelihood_matches_exact_rational_arithmetic(n):
    """The joint model's marginal end-to-end likelihood (numpy and PyTensor) against the
    exact value, for every success count and rows of different lengths and trials."""
    import pytensor.tensor as pt

    from bayes_eval.pooled.paths import path_likelihood, survivor_chain

    counts = np.array([len(a) for a, _ in PATH_ROWS])
    width = counts.max()
    trials = np.array([n, max(n - 2, 1), n])

    def padded(which):
        rows = [[float(v) for v in row[which]] for row in PATH_ROWS]
        return np.array([row + [1.0] * (width - len(row)) for row in rows])

    alpha, beta = Fraction(3, 5), Fraction(11, 4)
    alphas, betas = np.full(len(PATH_ROWS), float(alpha)), np.full(len(PATH_ROWS), float(beta))
    for k in range(n + 1):
        ks = np.minimum(k, trials)
        exact = [
            exact_path_likelihood(a, b, alpha, beta, int(kr), int(nr))
            for (a, b), kr, nr in zip(PATH_ROWS, ks, trials, strict=True)
        ]
        expected = np.log([float(p) for p in exact])
        chain = survivor_chain(np, padded(0), padded(1), trials, counts, n)
        ours = path_likelihood(np, chain[-1], alphas, betas, ks, trials, trials - ks)
        assert ours == pytest.approx(expected, rel=1e-11)
        shapes = (pt.as_tensor(padded(0)), pt.as_tensor(padded(1)))
        chain = survivor_chain(pt, *shapes, trials, counts, n)
        ours = path_likelihood(
            pt, chain[-1], pt.as_tensor(alphas), pt.as_tensor(betas), ks, trials, trials - ks
        )
        assert ours.eval() == pytest.approx(expected, rel=1e-11)


def test_marginal_redraw_matches_exact_posterior_means():
    """The joint model's exact redraw of marginalised milestone rates and bypass: their
    means against the exact posterior means, ``E[p_m | k] = a_m / (a_m + b_m) P(k | a_m +
    1) / P(k | a_m)`` (likewise ``lambda``), with the cells' own counts in the shapes."""
    from bayes_eval.pooled.rates import _marginal_draws

    k_cells, n_cells = (2, 1, 0), (3, 1, 2)
    mu, kappa = Fraction(3, 5), Fraction(5)
    a = [mu * kappa + k for k in k_cells]
    b = [(1 - mu) * kappa + n - k for k, n in zip(k_cells, n_cells, strict=True)]
    alpha, beta = Fraction(1, 2), Fraction(3, 2)
    k, n = 2, 4
    layout = one_task_layout(k=k_cells, n=n_cells, e2e=(k, n))
    draws = 400_000
    shape = (1, draws)
    post = {
        "mu_task": xr_like(np.full(shape + (1,), float(mu))),
        "kappa": xr_like(np.full(shape + (1,), float(kappa))),
        "mu_bypass": xr_like(np.full(shape + (1,), float(alpha / (alpha + beta)))),
        "kappa_bypass": xr_like(np.full(shape + (1,), float(alpha + beta))),
    }
    log_p, bypass = _marginal_draws(post, layout, np.random.default_rng(1), shape, {})
    evidence = exact_path_likelihood(a, b, alpha, beta, k, n)
    for m in range(len(a)):
        shifted = [am + (i == m) for i, am in enumerate(a)]
        tilted = exact_path_likelihood(shifted, b, alpha, beta, k, n) / evidence
        mean = a[m] / (a[m] + b[m]) * tilted
        p = np.exp(log_p[..., m]).ravel()
        assert abs(p.mean() - float(mean)) < 4 * p.std() / np.sqrt(draws)
    mean = alpha / (alpha + beta) * exact_path_likelihood(a, b, alpha + 1, beta, k, n) / evidence
    lam = bypass[0].ravel()
    assert abs(lam.mean() - float(mean)) < 4 * lam.std() / np.sqrt(draws)


def xr_like(values):
    """Per-pair draws as a DataArray over ``(chain, draw, pair)``, as the fitters read them."""
    import xarray as xr

    return xr.DataArray(values, dims=("chain", "draw", "pair"))


def test_grouped_beta_binomial_matches_scipy():
    """The collapsed likelihood, normaliser per group, against scipy's pmf per cell."""
    import pymc as pm
    import pytensor.tensor as pt

    from bayes_eval.pooled.models import _beta_binomial

    rng = np.random.default_rng(3)
    alpha, beta = rng.gamma(2.0, 2.0, 4), rng.gamma(2.0, 5.0, 4)
    group = np.array([0, 0, 1, 2, 2, 2, 3, 1])
    n = rng.integers(1, 120, group.size)
    k = np.minimum(n, rng.integers(0, 30, group.size))
    n[4:6] = n[3]  # one group's cells share their trials
    k[:2] = [0, n[1]]  # zero-success and all-success cells
    with pm.Model():  # the design enters as the model's data
        total = _beta_binomial(
            pm, "cell", pt.as_tensor(alpha), pt.as_tensor(beta), group, k=k, failures=n - k, n=n
        )
        ours = total.eval()
    expected = stats.betabinom.logpmf(k, n, alpha[group], beta[group]).sum()
    log_choose = stats.binom.logpmf(k, n, 0.5).sum() - (n * np.log(0.5)).sum()  # log C(n, k)
    assert ours == pytest.approx(expected - log_choose, rel=1e-12)


@pytest.mark.parametrize("a, b", [(0.7, 3.2), (30.0, 5.0), (0.05, 0.05), (0.02, 4.0)])
def test_noncentred_task_means_are_exactly_beta(a, b):
    """The density of z pushed through z -> p gives the Beta distribution (quadrature vs
    scipy): the upper tail through 1 - p, exact where p itself rounds to 1."""
    import pytensor
    import pytensor.tensor as pt
    from scipy import integrate

    from bayes_eval.pooled.models import _noncentred_beta

    z = pt.dscalar("z")
    log_a, log_b = (pt.constant(np.log(v), dtype="float64") for v in (a, b))
    f = pytensor.function([z], list(_noncentred_beta(log_a, log_b, z)))

    def density(x):
        return np.exp(f(x)[2])

    for z0 in (-3.0, -0.5, 0.0, 1.0, 2.5):
        log_p, log_1mp, _ = f(z0)
        below = integrate.quad(density, -np.inf, z0, epsabs=1e-14, epsrel=1e-10)[0]
        above = integrate.quad(density, z0, np.inf, epsabs=1e-14, epsrel=1e-10)[0]
        assert below + above == pytest.approx(1.0, abs=1e-9)
        # the smaller tail, to relative accuracy (the other is 1 minus it)
        if log_p < np.log(0.5):
            assert below == pytest.approx(stats.beta.cdf(np.exp(log_p), a, b), rel=1e-7, abs=1e-12)
        else:
            assert above == pytest.approx(
                stats.beta.cdf(np.exp(log_1mp), b, a), rel=1e-7, abs=1e-12
            )


@pytest.mark.parametrize("a, b", [(0.7, 3.2), (30.0, 5.0), (2.0, 0.05), (12.0, 1e-3), (0.3, 1e-9)])
def test_tail_scale_rates_are_exactly_beta(a, b):
    """The density of w pushed through -log(1 - p) = exp(w) / b gives the Beta
    distribution: the mass above w0 is P(1 - p < exp(-exp(w0) / b)), the Beta(b, a) CDF
    at a point far below the smallest double where b is small (mpmath, 40 digits). At
    w0 = -30 the shapes 0.7, 3.2 and 30, 5 take log p from its series."""
    import mpmath
    import pytensor
    import pytensor.tensor as pt
    from scipy import integrate

    from bayes_eval.pooled.models import _tail_beta

    w = pt.dscalar("w")
    log_a, log_b = (pt.constant(np.log(v), dtype="float64") for v in (a, b))
    f = pytensor.function([w], list(_tail_beta(log_a, log_b, w)))

    def density(x):
        return np.exp(f(x)[2])

    mpmath.mp.dps = 40
    for w0 in (-30.0, -3.0, -0.5, 0.0, 1.0, 2.5):
        log_p, log_1mp, _ = f(w0)
        assert log_1mp == pytest.approx(-np.exp(w0) / b, rel=1e-14)
        assert log_p == pytest.approx(float(mpmath.log(1 - mpmath.exp(float(log_1mp)))), rel=1e-12)
        # split where the mass lies (w in -40..6) so that quad cannot step over it
        below, above = (
            sum(integrate.quad(density, lo, hi, epsabs=1e-14, epsrel=1e-10)[0] for lo, hi in parts)
            for parts in (((-np.inf, -40), (-40, w0)), ((w0, 6), (6, np.inf)))
        )
        assert below + above == pytest.approx(1.0, abs=1e-9)
        x = mpmath.exp(mpmath.mpf(float(log_1mp)))
        exact = float(mpmath.betainc(b, a, 0, x, regularized=True))
        assert above == pytest.approx(exact, rel=1e-7, abs=1e-12)


def test_every_form_of_a_rate_samples_its_beta_prior():
    """NUTS (nutpie) on ``_beta_parts`` alone draws each p from its Beta(a, b) in all four
    forms: centred, non-centred, upper and lower tail scale. Each p's Beta CDF values are
    uniform: the Kolmogorov-Smirnov distance is within its 0.1% critical value for the
    draws' effective sample size."""
    import arviz_stats
    import pymc as pm
    import pytensor.tensor as pt

    from bayes_eval.inference.engines import Engine, sample
    from bayes_eval.pooled.models import _beta_parts
    from bayes_eval.settings import SamplerSettings

    a = np.array([4.0, 0.6, 5.0, 0.3])
    b = np.array([2.0, 3.0, 0.3, 5.0])
    with pm.Model(coords={"rate": range(4)}) as model:
        log_a, log_b = pt.as_tensor(np.log(a)), pt.as_tensor(np.log(b))
        centred = np.array([True, False, True, False])
        _beta_parts(pm, "p", log_a, log_b, centred, "rate", np.array([0, 0, 1, -1], np.int8))
    settings = SamplerSettings("nutpie", draws=1000, tune=500, chains=4, target_accept=0.8)
    p = sample(model, Engine("nutpie", "cpu"), settings, 0, ("beta forms",))["posterior"]["p"]
    assert {v.name for v in model.value_vars} == {"p_logit", "p_z", "p_upper", "p_lower"}
    for i in range(4):
        draws = p.isel(rate=i).values
        ess = float(arviz_stats.ess(draws, method="bulk"))
        statistic = stats.kstest(draws.ravel(), stats.beta(a[i], b[i]).cdf).statistic
        assert statistic < 1.95 / np.sqrt(min(ess, draws.size)), (i, statistic, ess)


def test_redraw_of_an_all_success_cell_when_the_task_mean_is_nearly_one():
    """(1 - mu) kappa + n - k must not round to a Beta shape of 0 when k = n."""
    import warnings

    import xarray as xr

    from bayes_eval.pooled.rates import pooled_rates

    layout = one_task_layout(k=[30], n=[30])
    post = xr.Dataset(
        {
            "mu_task": (("chain", "draw", "pair"), np.full((1, 200, 1), 1 - 2**-52)),
            "kappa": (("chain", "draw", "agent"), np.full((1, 200, 1), 4.7)),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rates = pooled_rates(
            post, layout, bayes_eval.load_spec("hierarchical"), np.random.default_rng(0)
        )
    p = rates["p_task"][1]
    # Beta(34.7, 1e-15): every draw is 1 to rounding
    assert np.all((p > 1 - 1e-9) & (p <= 1))


def test_joint_redraw_when_the_task_mean_is_one_and_the_concentration_small():
    """A task mean of exactly 1 in floating point and kappa 0.24: the failure shape is
    floored at the smallest normal number (a subnormal one made scipy's gammaln inf, and
    the redraw's weights NaN). One guided and one unguided success: every rate and the
    task's P are 1 to rounding, with no warning."""
    import warnings

    import xarray as xr

    from bayes_eval.pooled.rates import pooled_rates

    layout = one_task_layout(k=[1, 1, 1], n=[1, 1, 1], e2e=(1, 1))
    dims = ("chain", "draw", "agent")
    post = xr.Dataset(
        {
            "mu_task": (("chain", "draw", "pair"), np.ones((1, 200, 1))),
            "kappa": (dims, np.full((1, 200, 1), 0.24)),
            "mu_bypass": (dims, np.full((1, 200, 1), 0.3)),
            "kappa_bypass": (dims, np.full((1, 200, 1), 10.0)),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rates = pooled_rates(post, layout, bayes_eval.load_spec("joint"), np.random.default_rng(0))
    assert np.all(rates["p_task"][1] > 1 - 1e-9)


@pytest.mark.parametrize(
    "model, e2e",
    [("end_to_end_pooled", (1, 1)), ("hierarchical", (1, 1)), ("joint", (1, 1))]
    + [("joint", (8, 8)), ("joint", (7, 8))],
)
def test_gradient_stays_finite_as_an_all_success_mean_nears_one(model, e2e):
    """An all-success task whose mean's logit wanders to 30-300: the failure shape
    ``(1 - mu) kappa`` falls far below 1e-16 next to ``n - k = 0``. The log density and
    its gradient, compiled as nutpie compiles them, stay finite. (PyTensor used to rewrite
    ``b + (n - k)`` as ``(b + n) - k``, which rounds to 0: a NaN gradient, which nutpie
    counts as a divergence, at every such step.) With 8 end-to-end trials the joint
    model samples the task's rates on their tail scale, where the product Q rounds to 1:
    ``log(1 - Q)`` comes from the rates' own ``log(1 - p)``, never from ``log(1 - 1)``."""
    import pytensor

    from bayes_eval.counts.layout import build_layout, choose_form
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.fit import usable_rows
    from bayes_eval.registry import model_of

    rows = [dict(task="t0", method="end_to_end", successes=e2e[0], trials=e2e[1])]
    rows.append(dict(task="t1", method="end_to_end", successes=1, trials=1))
    if model != "end_to_end_pooled":
        rows += [
            dict(task=t, method="milestone", step=m, successes=int(t == "t0"), trials=1)
            for t in ("t0", "t1")
            for m in (1, 2)
        ]
    spec = bayes_eval.load_spec(model)
    layout = build_layout(usable_rows(load_evidence(pd.DataFrame(rows)), spec), spec)
    built = model_of(spec).build()(layout, spec, choose_form(layout, spec))
    logp = built.logp()
    inputs = built.value_vars
    function = pytensor.function(inputs, [logp, *pytensor.grad(logp, inputs)], mode="NUMBA")
    mean = next(v for v in inputs if v.name.startswith(("mu_task", "mu_logit")))
    point = built.initial_point()
    # the mean's logit is the variable itself (centred) or about 1.4 times it (z, at the
    # initial point's shapes 5 and 5)
    for value in (30.0, 60.0, 120.0, 200.0):
        point[mean.name] = np.r_[value, np.zeros(point[mean.name].size - 1)]
        out = function(*(point[v.name] for v in inputs))
        assert np.isfinite(out[0])
        assert all(np.all(np.isfinite(g)) for g in out[1:]), (mean.name, value)


def test_log_1m_product_matches_high_precision():
    """log(1 - Q) of each task's product of rates, tasks of 1 to 3 cells, against mpmath:
    to machine precision where Q is far from 1, and where it is within 1e-20 of it (where
    log(1 - exp(log Q)) is -inf)."""
    import mpmath
    import pytensor.tensor as pt

    from bayes_eval.pooled.models import _log_1m_product

    layout = one_task_layout(k=[1] * 6, n=[2] * 6)
    layout.cell_pair = np.array([0, 1, 1, 2, 2, 2])
    log_1mp = np.log([0.3, 0.5, 0.02, 1e-20, 3e-31, 1e-25])
    log_p = np.log1p(-np.exp(log_1mp))
    sampled = np.arange(6)
    ours = _log_1m_product(pt, layout, np.arange(3), sampled, pt.as_tensor(log_p), log_1mp)
    mpmath.mp.dps = 50
    p = [1 - mpmath.exp(mpmath.mpf(float(v))) for v in log_1mp]
    expected = [
        mpmath.log(1 - p[0]),
        mpmath.log(1 - p[1] * p[2]),
        mpmath.log(1 - p[3] * p[4] * p[5]),
    ]
    assert ours.eval() == pytest.approx([float(e) for e in expected], rel=1e-14)


def test_bypass_terms_when_the_milestone_product_underflows():
    """Q = 0: every success came by the bypass, only the j = k term remains (no NaN)."""
    from scipy import special

    from bayes_eval.pooled.paths import bypass_terms

    a, b, k, n = 2.0, 3.0, 4, 10
    with np.errstate(all="ignore"):
        terms = bypass_terms(
            np,
            np.array([[-np.inf]]),
            np.array([[0.0]]),
            np.array([[a]]),
            np.array([[b]]),
            k=np.array([[k]]),
            n=np.array([[n]]),
            failures=np.array([[n - k]]),
            j_max=k,
            logsumexp=False,
        )[0]
    assert np.all(np.isneginf(terms[:k]))
    assert terms[k] == pytest.approx(special.betaln(a + k, b + n - k) - special.betaln(a, b))


def test_a_compiled_model_serves_tables_of_other_sizes_in_new_processes(tmp_path, monkeypatch):
    """The first fit compiles and caches the model (in an empty cache folder); a refit to
    new counts reuses it in the process. A new process fitting a table of the same
    structure but other sizes (more tasks, more agents, other trials) loads it from the
    disk and says so, without PyTensor compiling its graphs again (their structure is
    known), and its draws are the bytes of a cold fit of that table (a new process with
    an empty cache folder); its fit of the first design's new counts draws the bytes of
    the process that compiled it."""
    import hashlib
    import os
    import subprocess
    import sys

    from bayes_eval.inference import engines
    from bayes_eval.inference.native.library import cache_dir
    from bayes_eval.messages import showing_progress

    warm, cold = tmp_path / "warm", tmp_path / "cold"
    monkeypatch.setenv("XDG_CACHE_HOME", str(warm))
    rng = np.random.default_rng(8)

    def frame(agents, tasks, trials):
        return pd.DataFrame(
            [(a, f"t{i}") for a in agents for i in range(tasks)], columns=["agent", "task"]
        ).assign(
            method="end_to_end",
            trials=trials,
            successes=lambda t: rng.binomial(trials, 0.3, len(t)),
        )

    first, second = frame(["a"], 6, 20), frame(["a"], 6, 20)
    other = frame(["a", "b"], 9, 12)
    assert not first["successes"].equals(second["successes"])
    engines._COMPILED.clear()
    said = []
    for table in (first, second):
        stream = io.StringIO()
        with showing_progress(stream):
            fitted = bayes_eval.fit(table, "end_to_end_pooled", seed=1, sampler=SMALL)
        said.append([line for line in stream.getvalue().splitlines() if "compil" in line])
    engines._COMPILED.clear()
    assert said[0][1].startswith(
        "compile: log density and deterministics: cache miss, compiling (C; "
    )
    assert said[0][2].startswith("compile: log density and deterministics: compiled and cached")
    assert said[1] == ["compile: cache hit, the model compiled earlier in this process"]
    assert len(list(cache_dir().glob("*.so"))) == 2  # a library per callback
    paths = []
    for name, table in (("second", second), ("other", other)):
        paths.append(tmp_path / f"{name}.csv")
        table.to_csv(paths[-1], index=False)
    code = (
        "import hashlib, sys, bayes_eval;"
        "from bayes_eval.messages import showing_progress\n"
        "for path in sys.argv[1:]:\n"
        "    with showing_progress(sys.stderr):\n"
        f"        p = bayes_eval.fit(path, 'end_to_end_pooled', seed=1, sampler={SMALL})\n"
        "    print(hashlib.sha256(p.tree['posterior']['p_task'].values.tobytes()).hexdigest())"
    )

    def run(folder, *tables):
        env = {**os.environ, "XDG_CACHE_HOME": str(folder)}
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, tables)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        lines = done.stderr.splitlines()
        states = [line.split(": ")[2] for line in lines if "deterministics:" in line]
        known = [
            line.endswith("a structure compiled before on this machine")
            for line in lines
            if "graphs built" in line
        ]
        return done.stdout.split(), states, known

    (again, sized), states, known = run(warm, *paths)
    assert [state.split(",")[0] for state in states] == ["cache hit"] * 2
    assert known == [True, True]  # PyTensor did not compile the graphs again
    drawn = fitted.tree["posterior"]["p_task"].values
    assert again == hashlib.sha256(drawn.tobytes()).hexdigest()
    (anew,), states, known = run(cold, paths[1])
    assert states[0].startswith("cache miss") and states[-1].startswith("compiled and cached")
    assert known == [False]
    assert sized == anew
