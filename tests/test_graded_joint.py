"""A grader that errs on the joint model's end-to-end runs: the graded count's terms
against the same model's terms at every true count (graph and numpy), the draw-back of
the bypass and the milestone rates against exact posterior means, and a real fit (NUTS)
on a sparse table whose judge is known."""

import itertools
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval.counts.grading import Grading, with_terms
from bayes_eval.counts.layout import choose_form, layout_of
from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import GraderCounts, with_audit
from bayes_eval.fit import usable_rows
from bayes_eval.pooled.models import joint_model
from bayes_eval.specs import load_spec
from tests.test_hierarchical import exact_path_likelihood, one_task_layout, xr_like

# One agent, six tasks of three milestones of 30 runs (scored by a trusted check, blank
# ``grader``). The judge scored t0's one end-to-end run (graded a success), t1's three
# (none) and t2's twenty (none: the model samples t2's milestone rates); a trusted check
# t3's twenty (13) and t4's (1); t5 has no end-to-end runs.
MILESTONES = [(24, 18, 12), (20, 15, 9), (12, 6, 3), (27, 24, 20), (15, 8, 2), (18, 12, 7)]
TABLE = pd.DataFrame(
    [
        ("a", f"t{t}", "milestone", m, k, 30, "")
        for t, cells in enumerate(MILESTONES)
        for m, k in enumerate(cells, start=1)
    ]
    + [
        ("a", "t0", "end_to_end", "", 1, 1, "judge"),
        ("a", "t1", "end_to_end", "", 0, 3, "judge"),
        ("a", "t2", "end_to_end", "", 0, 20, "judge"),
        ("a", "t3", "end_to_end", "", 13, 20, ""),
        ("a", "t4", "end_to_end", "", 1, 20, ""),
    ],
    columns=["agent", "task", "method", "step", "successes", "trials", "grader"],
)
# The judge detects 30 of 40 audited successes and raises 2 false alarms in 200 failures.
AUDIT = pd.DataFrame(
    {"grader": "judge", "truth": [1, 1, 0, 0], "graded": [1, 0, 0, 1], "runs": [30, 10, 198, 2]}
)


def detection(k, n, se, sp):
    """``P(k | t) = sum_j Bin(j; t, se) Bin(k - j; n - t, 1 - sp)``, ``t = 0..n`` (scipy)."""
    return np.array(
        [
            sum(
                stats.binom.pmf(j, t, se) * stats.binom.pmf(k - j, n - t, 1 - sp)
                for j in range(k + 1)
            )
            for t in range(n + 1)
        ]
    )


def layouts():
    spec = load_spec("joint")
    graded = with_audit(bayes_eval.load_evidence(TABLE), AUDIT)
    plain = bayes_eval.load_evidence(TABLE)
    return spec, *(layout_of(e, usable_rows(e, spec), spec) for e in (graded, plain))


def test_the_graded_terms_are_the_models_terms_summed_over_the_true_count():
    """At 4 random points the graded model's end-to-end potentials equal ``log sum_t
    P(t) prod P(k | t)`` over the judge's pairs' true counts ``t`` (a vector: one count a
    pair), ``P(t)`` the model without the audit's potential with those pairs' counts set
    to ``t`` (the trusted pairs' kept) and ``P(k | t)`` scipy's sum of binomials: for the
    pairs of one to three runs (their milestone rates summed out) and of twelve (sampled)."""
    import pymc as pm

    from bayes_eval.counts.layout import end_to_end_groups

    spec, graded_layout, plain_layout = layouts()
    graded = joint_model(graded_layout, spec, choose_form(graded_layout, spec))
    plain = joint_model(plain_layout, spec, choose_form(plain_layout, spec))

    def compiled(model, names):  # the sum of those of the potentials ``names`` it has
        total = sum(model[n] for n in names if n in model.named_vars)
        expression = model.replace_rvs_by_values([total])[0]
        return model.compile_fn(
            expression, inputs=model.value_vars, point_fn=True, on_unused_input="ignore"
        )

    ours = compiled(graded, ["graded_few", "end_to_end_few", "graded", "end_to_end"])
    judged = set(graded_layout.grading.pairs.tolist())
    k, n = plain_layout.e2e_k, plain_layout.e2e_n

    def summed(potential, name, pairs, point, se, sp):
        """``log sum_t P(t) prod P(k | t)`` over the judge's ``pairs`` (``potential``: the
        plain model's, its counts the data ``name``, in the order of ``pairs``)."""
        mine = [i for i, p in enumerate(pairs) if p in judged]
        values = []
        for true in itertools.product(*(range(n[pairs[i]] + 1) for i in mine)):
            counts = k[pairs].copy()
            counts[mine] = true
            pm.set_data({name: counts, f"{name}_failures": n[pairs] - counts}, model=plain)
            detected = sum(
                np.log(detection(k[pairs[i]], n[pairs[i]], se, sp)[t])
                for i, t in zip(mine, true, strict=True)
            )
            values.append(float(potential(point)) + detected)
        return special.logsumexp(values)

    few, many = end_to_end_groups(plain_layout)
    few_potential, many_potential = (compiled(plain, [n]) for n in ("end_to_end_few", "end_to_end"))
    rng = np.random.default_rng(4)
    start = plain.initial_point()
    for _ in range(4):
        point = {name: value + rng.normal(0, 0.5, np.shape(value)) for name, value in start.items()}
        se, sp = special.expit(rng.normal([1.0, 4.0], 0.5))
        expected = summed(few_potential, "e2e_few", few, point, se, sp)
        expected += summed(many_potential, "e2e_k", many, point, se, sp)
        mine = {**point, "sensitivity_logodds__": special.logit([se]),
                "specificity_logodds__": special.logit([sp])}  # fmt: skip
        assert float(ours(mine)) == pytest.approx(expected, rel=1e-9)


def test_the_log_likelihood_group_is_the_models_likelihood():
    """At 3 random points, the sum over pairs of the ``runs`` log-likelihood (numpy) equals
    the graded model's likelihood terms (graph), plus the binomial coefficients of the
    milestone counts that the model's potentials leave out."""
    import xarray as xr

    from bayes_eval.pooled.likelihood import log_likelihood

    spec, layout, _ = layouts()
    model = joint_model(layout, spec, choose_form(layout, spec))
    terms = ("k_cell", "end_to_end_few", "graded_few", "k_sampled", "end_to_end", "graded")
    names = ("mu_task", "kappa", "mu_bypass", "kappa_bypass", "p_cell", "sensitivity",
             "specificity")  # fmt: skip
    total = sum(model[n] for n in terms if n in model.named_vars)
    outputs = [total, *(model[n] for n in names)]
    evaluate = model.compile_fn(
        model.replace_rvs_by_values(outputs), inputs=model.value_vars, point_fn=True
    )
    coefficients = special.gammaln(layout.n + 1) - special.gammaln(layout.k + 1)
    coefficients = np.sum(coefficients - special.gammaln(layout.n - layout.k + 1))
    rng = np.random.default_rng(6)
    start = model.initial_point()
    for _ in range(3):
        point = {name: value + rng.normal(0, 0.5, np.shape(value)) for name, value in start.items()}
        likelihood, *values = evaluate(point)
        dims = {
            "mu_task": ("pair",),
            "kappa": ("agent",),
            "mu_bypass": ("agent",),
            "kappa_bypass": ("agent",),
            "p_cell": ("sampled_cell",),
            "sensitivity": ("grader",),
            "specificity": ("grader",),
        }
        post = xr.Dataset(
            {
                name: (("chain", "draw", *dims[name]), np.asarray(v)[None, None])
                for name, v in zip(names, values, strict=True)
            },
            coords={"chain": [0], "draw": [0]},
        )
        group = log_likelihood(post, layout, spec)["runs"].values.sum()
        assert group == pytest.approx(float(likelihood) + coefficients, rel=1e-9)


def one_graded_task(k, n, cells=((2, 3), (1, 1), (0, 2))):
    """One task's layout whose ``n`` end-to-end runs a judge scored (``k`` graded
    successes), the judge's audit 30 of 40 detected and 2 false alarms in 200."""
    layout = one_task_layout(k=[c[0] for c in cells], n=[c[1] for c in cells], e2e=(k, n))
    grading = Grading(
        graders=["judge"],
        counts=[GraderCounts(detected=30, missed=10, cleared=198, false_alarms=2)],
        pairs=np.array([0]),
        grader=np.array([0]),
        runs=np.array([n]),
        graded=np.array([k]),
        trusted=np.zeros((1, 3), dtype=np.int64),
    )
    return replace(layout, grading=with_terms(grading))


def grader_draws(shape, se, sp):
    import xarray as xr

    return {
        name: xr.DataArray(np.full(shape + (1,), value), dims=("chain", "draw", "grader"))
        for name, value in (("sensitivity", se), ("specificity", sp))
    }


def test_the_few_runs_draw_back_matches_exact_posterior_means():
    """One task of 4 graded runs (1 graded success), its milestone rates summed out: the
    means of the bypass and the milestone rates drawn back equal the exact means, ``sum_t
    w_t E[x | t]`` with ``w_t`` proportional to ``P(t) P(1 | t)`` (``P(t)`` in rational
    arithmetic, ``exact_path_likelihood``)."""
    from bayes_eval.pooled.rates import _detected_by_pair, _marginal_draws

    cells = ((2, 3), (1, 1), (0, 2))
    mu, kappa = Fraction(3, 5), Fraction(5)
    a = [mu * kappa + k for k, _ in cells]
    b = [(1 - mu) * kappa + n - k for k, n in cells]
    alpha, beta = Fraction(1, 2), Fraction(3, 2)
    se, sp, n = 0.75, 0.99, 4
    layout = one_graded_task(1, n, cells)
    draws = 200_000
    shape = (1, draws)
    post = {
        "mu_task": xr_like(np.full(shape + (1,), float(mu))),
        "kappa": xr_like(np.full(shape + (1,), float(kappa))),
        "mu_bypass": xr_like(np.full(shape + (1,), float(alpha / (alpha + beta)))),
        "kappa_bypass": xr_like(np.full(shape + (1,), float(alpha + beta))),
        **grader_draws(shape, se, sp),
    }
    detected = _detected_by_pair(post, layout)
    log_p, bypass = _marginal_draws(post, layout, np.random.default_rng(2), shape, detected)
    weight = detection(1, n, se, sp) * [float(exact_path_likelihood(a, b, alpha, beta, t, n))
                                        for t in range(n + 1)]  # fmt: skip
    weight /= weight.sum()

    def mean_given(t, a=a, b=b, alpha=alpha, m=None):
        evidence = exact_path_likelihood(a, b, alpha, beta, t, n)
        if m is None:  # the bypass
            tilted = exact_path_likelihood(a, b, alpha + 1, beta, t, n)
            return float(alpha / (alpha + beta) * tilted / evidence)
        shifted = [am + (i == m) for i, am in enumerate(a)]
        return float(
            a[m] / (a[m] + b[m]) * exact_path_likelihood(shifted, b, alpha, beta, t, n) / evidence
        )

    lam = bypass[0].ravel()
    expected = sum(w * mean_given(t) for t, w in enumerate(weight))
    assert abs(lam.mean() - expected) < 4 * lam.std() / np.sqrt(draws)
    for m in range(len(cells)):
        p = np.exp(log_p[..., m]).ravel()
        expected = sum(w * mean_given(t, m=m) for t, w in enumerate(weight))
        assert abs(p.mean() - expected) < 4 * p.std() / np.sqrt(draws)


def test_the_many_runs_bypass_drawn_back_matches_quadrature():
    """Twenty graded runs (3 graded successes) of a task whose milestone product ``Q`` is
    sampled: the bypass drawn back has the mean of ``lambda`` under ``Beta(lambda | a, b)
    sum_t Bin(t | 20, Q + (1 - Q) lambda) P(3 | t)`` (scipy's quadrature)."""
    from bayes_eval.pooled.rates import _bypass, _detected_by_pair

    q, a, b, k, n, se, sp = 0.05, 1.5, 6.0, 3, 20, 0.75, 0.99
    layout = one_graded_task(k, n)
    detected = detection(k, n, se, sp)

    def density(lam):
        return stats.beta.pdf(lam, a, b) * np.dot(
            stats.binom.pmf(np.arange(n + 1), n, q + (1 - q) * lam), detected
        )

    evidence = integrate.quad(density, 0, 1, epsabs=1e-15, epsrel=1e-12)[0]
    mean = integrate.quad(lambda lam: lam * density(lam), 0, 1, epsabs=1e-15)[0] / evidence
    draws = 50_000
    shape = (1, draws)
    post = {
        "mu_bypass": xr_like(np.full(shape + (1,), a / (a + b))),
        "kappa_bypass": xr_like(np.full(shape + (1,), a + b)),
        **grader_draws(shape, se, sp),
    }
    log_q = np.full(shape + (1,), np.log(q))
    by_pair = _detected_by_pair(post, layout)
    lam = _bypass(post, layout, np.random.default_rng(3), shape, log_q, by_pair)[..., 0].ravel()
    assert abs(lam.mean() - mean) < 4 * lam.std() / np.sqrt(draws)


@pytest.fixture(scope="module")
def fits():
    """The table fitted with the judge's audit, and without (the judge taken as perfect)."""
    sampler = {"draws": 1000, "tune": 500}
    return tuple(bayes_eval.fit(TABLE, "joint", audit=a, sampler=sampler) for a in (AUDIT, None))


def test_a_fit_through_the_judge(fits):
    """A real fit passes its diagnostics; the judge's sensitivity sits where its audit puts
    it (within its 99% interval of 0.75); t1's bound (no graded success in three runs)
    and t2's (none in twenty) rise above the fit that takes the judge as perfect;
    provenance names the judge on the
    judge's pairs only; ``p_graded`` is ``se P + (1 - sp)(1 - P)`` at them; every pair's
    log-likelihood is finite."""
    audited, perfect = fits
    assert audited.diagnostics.ok, audited.diagnostics.messages
    se = audited.draws["sensitivity"].values.ravel()
    assert np.quantile(se, 0.005) < 0.75 < np.quantile(se, 0.995)
    upper = audited.summary().set_index("task")
    alone = perfect.summary().set_index("task")
    for task in ("t1", "t2"):  # no graded success
        assert upper.loc[task, "upper"] > alone.loc[task, "upper"]
    assert "graded by judge" in upper.loc["t1", "provenance"]
    assert "graded by judge" not in upper.loc["t3", "provenance"]
    post = audited.draws
    p, q = (post[name].sel(agent="a", task="t2").values for name in ("p_task", "p_graded"))
    sp = post["specificity"].values[..., 0]
    assert np.allclose(q, se.reshape(q.shape) * p + (1 - sp) * (1 - p))
    assert np.isnan(post["p_graded"].sel(agent="a", task="t3").values).all()
    assert np.isfinite(audited.tree["log_likelihood"]["runs"].values).all()


def test_graded_milestones_and_sbc_are_refused():
    """A judge named on a milestone row: one line naming the row and the model that carries
    it; SBC of the joint model with an audit: one line."""
    from bayes_eval.checks.sbc import sbc

    milestones = TABLE.assign(grader="judge")
    with pytest.raises(InputError, match="row 2, column grader: model joint carries a grader"):
        bayes_eval.fit(milestones, "joint", audit=AUDIT)
    evidence = with_audit(bayes_eval.load_evidence(TABLE), AUDIT)
    with pytest.raises(InputError, match="sbc: the joint model's simulations"):
        sbc(evidence, "joint", simulations=4, draws=99, bins=4, seed=0)


def test_bypass_true_counts_is_bypass_terms_at_every_count():
    """``bypass_true_counts`` (every ``t`` at once, O(n) log-gammas a row) equals
    ``bypass_terms``' sum at each ``t`` (numpy and PyTensor, 1e-9), sums to one over ``t``,
    and is impossible past a row's ``n``."""
    import pytensor.tensor as pt

    from bayes_eval.pooled.paths import IMPOSSIBLE, bypass_terms, bypass_true_counts

    rng = np.random.default_rng(0)
    n = np.array([5, 12, 1, 40])
    log_q = np.log(rng.uniform(0.01, 0.9, n.size))
    log_1mq = np.log1p(-np.exp(log_q))
    a, b = rng.uniform(0.3, 4, n.size), rng.uniform(0.3, 10, n.size)
    ours = bypass_true_counts(np, log_q, log_1mq, a, b, n)
    graph = bypass_true_counts(pt, *(pt.as_tensor(x) for x in (log_q, log_1mq, a, b)), n)
    assert np.allclose(graph.eval(), ours, rtol=1e-12, atol=0)
    for r in range(n.size):
        one = [x[[r]][:, None] for x in (log_q, log_1mq, a, b)]
        for t in range(n[r] + 1):
            counts = dict(k=np.array([[t]]), n=np.array([[n[r]]]), failures=np.array([[n[r] - t]]))
            reference = bypass_terms(np, *one, **counts, j_max=n[r], logsumexp=True)[0]
            assert ours[r, t] == pytest.approx(reference, rel=1e-9)
        assert np.exp(ours[r, : n[r] + 1]).sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(ours[r, n[r] + 1 :] == IMPOSSIBLE)


def test_bypass_true_counts_in_blocks_is_one_call(monkeypatch):
    """Held a few rows at a time, the true-count terms are those of one call (to rounding:
    a block's sums over ``j`` run over its own width), ``IMPOSSIBLE`` past each row's
    ``n``: the last block here holds only short rows (concatenating the blocks' own widths
    failed there)."""
    from bayes_eval.pooled import paths

    rng = np.random.default_rng(1)
    n = np.array([40, 3, 12, 40, 3, 12, 2])
    log_q = np.log(rng.uniform(0.01, 0.9, n.size))
    log_1mq = np.log1p(-np.exp(log_q))
    a, b = rng.uniform(0.3, 4, n.size), rng.uniform(0.3, 10, n.size)
    whole = paths.bypass_true_counts(np, log_q, log_1mq, a, b, n)
    monkeypatch.setattr(paths, "TRUE_COUNT_TERMS", 2 * 41**2)  # two rows a block
    blocks = paths.bypass_true_counts_in_blocks(log_q, log_1mq, a, b, n)
    assert blocks.shape == whole.shape
    possible = np.arange(n.max() + 1) <= n[:, None]
    assert np.allclose(blocks[possible], whole[possible], rtol=1e-14, atol=0)
    assert np.all(blocks[~possible] == paths.IMPOSSIBLE)
