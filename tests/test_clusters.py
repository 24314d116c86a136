"""Clustered runs: counts kept per cluster, refused by models that would treat them as
independent, and modelled by ``end_to_end_pooled`` and ``hierarchical`` as a
Beta-Binomial per cluster. The MCMC checks rest on an identity (one run per cluster is
the unclustered model exactly) and on a closed form (a cluster's replicates are
Beta-Binomial)."""

import arviz_stats
import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval import InputError, load_evidence, load_posterior
from bayes_eval.counts.clusters import (
    cluster_terms,
    draw_log_rates,
    log_marginal,
    log_marginal_each,
)
from bayes_eval.results.predictive import _clustered, predictive_checks
from bayes_eval.specs import load_spec

SMALL = {"draws": 1000, "tune": 500, "chains": 2}


def _runs(rng, tasks, clusters, runs, phi, mean=0.3, milestones=0):
    rows = []
    for t in range(tasks):
        for step in range(1, milestones + 1) if milestones else [None]:
            p = rng.beta(mean * 4, (1 - mean) * 4)
            for c in range(clusters):
                q = rng.beta(p * phi, (1 - p) * phi) if phi else p
                for success in rng.random(runs) < q:
                    method = "milestone" if step else "end_to_end"
                    rows.append((f"t{t}", method, step, int(success), f"c{c}"))
    return pd.DataFrame(rows, columns=["task", "method", "step", "success", "cluster"])


def test_counts_are_kept_per_cluster_and_the_hash_sees_them():
    table = pd.DataFrame(
        {
            "task": ["t", "t", "t", "t"],
            "method": "end_to_end",
            "successes": [2, 0, 1, 1],
            "trials": [2, 2, 2, 2],
            "cluster": ["a", "b", "c", "d"],
        }
    )
    evidence = load_evidence(table)
    assert tuple(evidence.table.loc[0, ["successes", "trials"]]) == (4, 8)
    assert list(evidence.clusters["successes"]) == [2, 0, 1, 1]
    # the same totals split otherwise are other evidence
    other = load_evidence(table.assign(successes=[1, 1, 1, 1]))
    assert other.table.equals(evidence.table) and other.hash != evidence.hash
    # the same cluster named twice in count rows is a duplicate, as any cell is
    with pytest.raises(InputError, match="row 3: duplicates row 2"):
        load_evidence(table.assign(cluster=["a", "a", "c", "d"]))
    with pytest.raises(InputError, match="row 4, column cluster: cluster is empty"):
        load_evidence(table.assign(cluster=["a", "b", "", "d"]))
    golden = pd.DataFrame(
        {"task": ["t"], "method": ["golden_solution"], "step": [1], "logprob": [-1.0]}
    )
    with pytest.raises(InputError, match="column cluster: does not apply to method golden"):
        load_evidence(golden.assign(cluster="a"))


@pytest.mark.parametrize("model", ["end_to_end", "phuong_chain", "joint"])
def test_models_that_assume_independent_runs_refuse_clusters(model):
    frame = _runs(np.random.default_rng(0), 2, 2, 2, phi=1.0)
    with pytest.raises(InputError, match=f"model {model} .* treats every run as an indep"):
        bayes_eval.fit(load_evidence(frame.drop(columns="step")), model)


def test_a_pooled_spec_without_a_cluster_prior_is_refused(tmp_path):
    text = load_spec("end_to_end_pooled").text
    start = text.index("[priors.cluster_concentration]")
    spec = tmp_path / "plain.toml"
    spec.write_text(text[:start] + text[text.index("[sampler]") :])
    frame = _runs(np.random.default_rng(0), 2, 2, 2, phi=1.0).drop(columns="step")
    with pytest.raises(InputError, match=r"needs a prior \[priors.cluster_concentration\]"):
        bayes_eval.fit(frame, str(spec))


def _bounds(posterior):
    summary = posterior.summary()
    return summary["upper"].to_numpy(), summary["upper_mcse"].to_numpy()


@pytest.mark.parametrize(
    "model, milestones, clusters",
    [
        ("end_to_end_pooled", 0, 4),
        # 2.5 minutes; the default run checks the clustered likelihood on end_to_end_pooled
        # and each rate's cluster terms against quadrature (below)
        pytest.param("hierarchical", 2, 10, marks=pytest.mark.slow),
    ],
)
def test_one_run_per_cluster_is_the_unclustered_model(model, milestones, clusters):
    """``BetaBinomial(1, p phi, (1 - p) phi)`` is ``Bernoulli(p)`` whatever ``phi``: with one
    run per cluster both fits have the same posterior of every ``P``. Sparse and ragged:
    a zero-success task, one with a single run (three for the milestones)."""
    frame = _runs(np.random.default_rng(3), 8, clusters, 1, phi=None, milestones=milestones)
    frame.loc[frame["task"] == "t0", "success"] = 0
    kept = ["c0"] if not milestones else ["c0", "c1", "c2"]
    frame = frame[~((frame["task"] == "t5") & ~frame["cluster"].isin(kept))]
    if not milestones:
        frame = frame.drop(columns="step")
    sampler = SMALL if not milestones else {**SMALL, "chains": 4}
    clustered = bayes_eval.fit(load_evidence(frame), model, sampler=sampler, seed=5)
    plain = bayes_eval.fit(load_evidence(frame.drop(columns="cluster")), model, sampler=sampler)
    assert "runs in" in clustered.summary()["provenance"].iloc[0]
    # its log-likelihood is of each cell's clusters' counts: with one run each, the plain
    # Beta-Binomial of the cell's total without its binomial coefficient C(N, K)
    tree = clustered.tree
    log_lik = tree["log_likelihood"]["successes"]
    draws = tree["posterior"].to_dataset()
    expected = plain.log_likelihood_at(draws)["successes"].sel(cell=log_lik["cell"])
    k, n = tree["observed_data"]["successes"], tree["constant_data"]["trials"]
    choose = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    # two routes to one number: relative 1e-9, and absolute rounding where a log
    # probability is near 0 (about 5e-6 on one cell, where 1e-14 is 2e-9 of it)
    expected = expected - choose.sel(cell=log_lik["cell"])
    np.testing.assert_allclose(log_lik, expected, rtol=1e-9, atol=1e-12)
    assert np.isfinite(arviz_stats.loo(tree).elpd)
    # a fit of the clusters' counts is not ranked beside one of the cells' totals
    with pytest.raises(InputError, match=r"model clustered \(.*\) scores each cluster's"):
        bayes_eval.compare({"clustered": clustered, "plain": plain})
    assert clustered.diagnostics.ok and plain.diagnostics.ok
    (upper_c, mcse_c), (upper_p, mcse_p) = _bounds(clustered), _bounds(plain)
    assert np.all(np.abs(upper_c - upper_p) <= 4 * np.hypot(mcse_c, mcse_p))


def test_correlated_runs_widen_the_bounds_and_survive_a_round_trip(tmp_path):
    """Clusters that repeat one outcome say little more than one run each: against the runs
    counted as independent trials, the bounds widen, the zero-success task's most."""
    rows = []
    for t, successes in enumerate([0, 1, 1, 2]):  # clusters of 5 runs, all alike
        for c in range(4):
            rows += [(f"t{t}", "end_to_end", int(c < successes), f"c{c}")] * 5
    frame = pd.DataFrame(rows, columns=["task", "method", "success", "cluster"])
    clustered = bayes_eval.fit(frame, "end_to_end_pooled", sampler=SMALL, seed=2)
    plain = bayes_eval.fit(frame.drop(columns="cluster"), "end_to_end_pooled", sampler=SMALL)
    (upper_c, mcse_c), (upper_p, mcse_p) = _bounds(clustered), _bounds(plain)
    assert np.sum(upper_c - upper_p) > 3 * np.sqrt(np.sum(mcse_c**2 + mcse_p**2))
    assert upper_c[0] > 2 * upper_p[0]  # 0 of 20 runs, but only 4 clusters: far less sure
    # the posterior predictive replicates the clusters: the naive fit flags the
    # over-dispersion that the cluster-aware fit explains
    assert not predictive_checks(clustered)["flagged"].any()
    path = clustered.to_netcdf(tmp_path / "posterior.nc")
    loaded = load_posterior(path)
    assert loaded.evidence.clusters.equals(clustered.evidence.clusters)
    assert loaded.evidence.hash == clustered.evidence.hash


def test_clustered_replicates_are_beta_binomial():
    """One cluster of ``n`` runs replicates as ``BetaBinomial(n, p phi, (1 - p) phi)``."""
    rng = np.random.default_rng(0)
    p, phi, n = np.full(200_000, 0.3), np.full(200_000, 2.0), np.array([6])
    replicated = _clustered(n, p, phi, rng)
    expected = stats.betabinom.pmf(np.arange(7), 6, 0.6, 1.4)
    observed = np.bincount(replicated, minlength=7) / replicated.size
    # 200,000 draws: the standard error of each frequency is at most 0.0012
    assert np.abs(observed - expected).max() < 0.005


CLUSTERS = [  # (successes, trials) per cluster of one rate: ragged, all-fail, all-pass
    [(0, 1)],
    [(2, 5), (0, 3), (4, 4)],
    [(0, 6), (0, 2)],
    [(7, 7), (1, 1), (3, 9)],
]


def _quadrature(a, b, phi, clusters, moment=0):
    """``int p^moment Beta(p | a, b) prod_c BetaBinomial(k_c | n_c, p phi, (1 - p) phi) dp``
    by adaptive quadrature, with scipy's densities."""

    def integrand(p):
        like = np.prod([stats.betabinom.pmf(k, n, p * phi, (1 - p) * phi) for k, n in clusters])
        return p**moment * stats.beta.pdf(p, a, b) * like

    return integrate.quad(integrand, 0, 1, epsabs=0, epsrel=1e-11, limit=400)[0]


@pytest.mark.parametrize("a, b, phi", [(0.7, 2.5, 3.0), (4.0, 0.3, 0.4), (1.5, 1.5, 60.0)])
def test_marginal_matches_quadrature(a, b, phi):
    rate = np.concatenate([[r] * len(c) for r, c in enumerate(CLUSTERS)])
    k, n = (np.array([x[i] for c in CLUSTERS for x in c]) for i in (0, 1))
    terms = cluster_terms(rate, k, n, len(CLUSTERS))
    for r, clusters in enumerate(CLUSTERS):
        mine = rate == r
        one = cluster_terms(np.zeros(mine.sum(), dtype=int), k[mine], n[mine], 1)
        args = (np.log([a]), np.log([b]), np.log([phi]), one)
        exact = log_marginal(np, special.gammaln, special.logsumexp, *args)
        coefficients = sum(np.log(special.comb(n_c, k_c)) for k_c, n_c in clusters)
        assert exact + coefficients == pytest.approx(np.log(_quadrature(a, b, phi, clusters)),
                                                     abs=1e-8)  # fmt: skip
    # all rates at once: the sum of their logs
    shapes = (np.log(np.full(4, a)), np.log(np.full(4, b)), np.log(np.full(4, phi)))
    total = log_marginal(np, special.gammaln, special.logsumexp, *shapes, terms)
    each = sum(
        log_marginal(
            np,
            special.gammaln,
            special.logsumexp,
            *(s[:1] for s in shapes),
            cluster_terms(np.zeros(len(c), dtype=int), *np.array(c).T, 1),
        )  # fmt: skip
        for c in CLUSTERS
    )
    assert total == pytest.approx(each, rel=1e-12)


def test_each_rates_log_probability_matches_quadrature():
    """``log_marginal_each``, per draw and rate (each with its own shapes and ``phi``): the
    log probability of the rate's clusters' counts, binomial coefficients included, as
    adaptive quadrature gives it; and its sum over rates is ``log_marginal`` plus them."""
    rate = np.concatenate([[r] * len(c) for r, c in enumerate(CLUSTERS)])
    k, n = (np.array([x[i] for c in CLUSTERS for x in c]) for i in (0, 1))
    terms = cluster_terms(rate, k, n, len(CLUSTERS))
    draw = [(0.7, 2.5, 3.0), (4.0, 0.3, 0.4), (1.5, 1.5, 60.0), (2.0, 5.0, 1.0)]
    shapes = np.array([draw, draw[2:] + draw[:2]])  # (a, b, phi) per draw and rate
    log_shapes = np.log(shapes)  # (draws, rates, 3)
    each = log_marginal_each(*np.moveaxis(log_shapes, -1, 0), terms)
    assert each.shape == (2, len(CLUSTERS))
    for d in range(2):
        for r, clusters in enumerate(CLUSTERS):
            a, b, phi = shapes[d, r]
            assert each[d, r] == pytest.approx(np.log(_quadrature(a, b, phi, clusters)), abs=1e-8)
        total = log_marginal(np, special.gammaln, special.logsumexp, *log_shapes[d].T, terms)
        coefficients = np.log(special.comb(n, k)).sum()
        assert each[d].sum() == pytest.approx(total + coefficients, rel=1e-12)


def test_exact_draws_have_the_posterior_mean_of_quadrature():
    a, b, phi = 0.8, 1.6, 2.0
    clusters = CLUSTERS[1]
    terms = cluster_terms(np.zeros(3, dtype=int), *np.array(clusters).T, 1)
    draws = 200_000
    log_p = draw_log_rates(
        np.full((draws, 1), a), np.full((draws, 1), b), np.full((draws, 1), phi), terms,
        np.random.default_rng(1),
    )  # fmt: skip
    p = np.exp(log_p[:, 0])
    mean = _quadrature(a, b, phi, clusters, 1) / _quadrature(a, b, phi, clusters)
    second = _quadrature(a, b, phi, clusters, 2) / _quadrature(a, b, phi, clusters)
    se = np.sqrt((second - mean**2) / draws)
    assert abs(p.mean() - mean) < 4 * se
    assert p.var() == pytest.approx(second - mean**2, rel=0.02)


def test_too_many_terms_are_refused_in_one_line():
    with pytest.raises(InputError, match=r"above the 2,000,000 it allows"):
        cluster_terms(np.zeros(2, dtype=int), np.array([1500, 500]), np.array([3000, 3000]), 1)


@pytest.mark.slow  # two pooled fits
def test_a_refit_with_the_same_totals_split_otherwise_is_not_served_from_the_cache():
    """The marginal's terms hold the clusters' counts as constants: two tables with the same
    totals per task, split otherwise among the clusters, are two models."""
    alike = [(f"t{t}", "end_to_end", c, 1 if c == "a" else 0) for t in range(3) for c in "abcd"]
    alike = pd.DataFrame(alike * 3, columns=["task", "method", "cluster", "success"])
    first = alike.groupby(["task", "cluster"]).cumcount() == 0
    spread = alike.assign(success=(first & (alike["cluster"] != "a")).astype(int))
    assert (
        load_evidence(alike).table["successes"].tolist()
        == load_evidence(spread).table["successes"].tolist()
    )
    cached = bayes_eval.fit(alike, "end_to_end_pooled", sampler=SMALL, seed=4)
    refit = bayes_eval.fit(spread, "end_to_end_pooled", sampler=SMALL, seed=4)
    # three successes in one cluster of three runs say less than three in three clusters
    assert refit.summary()["upper"].max() < cached.summary()["upper"].min()


# a crossed fit; clustered crossed runs keep their exact check (tests/test_crossed.py)
@pytest.mark.slow
def test_a_crossed_fit_of_clustered_runs_is_scored_and_checked_like_any_other():
    """Ragged clustered runs of 3 agents x 5 tasks (a pair never run, a task never
    solved, clusters of 1 to 3 runs): the crossed fit (one ``kappa_cluster`` for every
    agent) builds its predictive and log-likelihood groups; a cell's value at a fitted
    draw is its clusters' Beta-Binomials with the departure integrated out by scipy's
    quadrature; PSIS-LOO runs on the tree, and the predictive check replicates every
    cell's clusters."""
    rng = np.random.default_rng(1)
    rows = []
    for a in range(3):
        for t in range(5):
            if (a, t) == (1, 3):
                continue
            p = 0.0 if t == 4 else special.expit(a - 1 - 0.8 * (t - 2))
            for c in range(int(rng.integers(1, 4))):
                q = rng.beta(3 * p + 1e-3, 3 * (1 - p) + 1e-3)
                for _ in range(int(rng.integers(1, 4))):
                    rows.append((f"a{a}", f"t{t}", "end_to_end", int(rng.random() < q), f"c{c}"))
    frame = pd.DataFrame(rows, columns=["agent", "task", "method", "success", "cluster"])
    sampler = {"draws": 200, "tune": 300, "chains": 2}
    crossed = bayes_eval.fit(frame, "crossed", sampler=sampler, seed=1)
    tree = crossed.tree
    log_lik = tree["log_likelihood"]["successes"]
    assert log_lik.sizes["cell"] == 14
    assert tree["posterior"]["kappa_cluster"].dims == ("chain", "draw")
    draws, cell = tree["posterior"], 5
    agent, task = str(log_lik["agent"].values[cell]), str(log_lik["task"].values[cell])
    mine = frame[(frame["agent"] == agent) & (frame["task"] == task)]
    counts = [(g["success"].sum(), len(g)) for _, g in mine.groupby("cluster")]
    at = {"chain": 1, "draw": 50}
    eta = float(draws["ability"].sel(agent=agent, **at) - draws["difficulty"].sel(task=task, **at))
    scale, phi = (float(draws[name].sel(**at)) for name in ("cell_scale", "kappa_cluster"))

    def integrand(e):
        p = special.expit(eta + scale * e)
        like = np.prod([stats.betabinom.pmf(k, n, p * phi, (1 - p) * phi) for k, n in counts])
        return like * stats.norm.pdf(e)

    expected = np.log(integrate.quad(integrand, -12, 12, epsabs=0, epsrel=1e-11, limit=400)[0])
    assert float(log_lik.sel(**at)[cell]) == pytest.approx(expected, rel=1e-8)
    assert np.isfinite(arviz_stats.loo(tree).elpd)
    assert len(predictive_checks(crossed)) == 14
