"""Milestones and expert steps scored by a grader that errs (``exact.graded_product``):
the posterior of their product checked against integrals over the rates, ``se`` and
``sp`` computed here with scipy's adaptive quadrature, against Monte Carlo of the model,
and through ``fit`` on sparse tables."""

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import bayes_eval
from bayes_eval.errors import InputError
from bayes_eval.exact.graded_product import GradedFactor, GradedProduct
from bayes_eval.exact.products import beta_product, summarise_products

PRIOR = (1.0, 1.0)
# a judge that detected 34 of 40 audited successes and raised 2 false alarms in 260
SHAPES = (35.0, 7.0, 259.0, 3.0)
COUNTS = ((2, 3), (1, 2))  # two milestones' graded successes and runs


def _product(counts=COUNTS, shapes=SHAPES, prior=PRIOR):
    return GradedProduct((tuple(GradedFactor(prior, k, n, 0) for k, n in counts),), (shapes,))


def _grader_integral(cells, true):
    """``E[prod_m P(k_m graded | t_m true of n_m)]`` over the grader's Betas, by adaptive
    quadrature: each term of the sum over the detected counts ``j_m`` is a function of
    ``se`` times one of ``sp``, so it is two 1-d integrals."""
    s1, s2, c1, c2 = SHAPES
    total = 0.0
    for detected in np.ndindex(*(k + 1 for k, _ in cells)):

        def sensitivity(se, detected=detected):
            terms = [stats.binom.pmf(j, t, se) for j, t in zip(detected, true, strict=True)]
            return stats.beta.pdf(se, s1, s2) * np.prod(terms)

        def specificity(sp, detected=detected):
            terms = [
                stats.binom.pmf(k - j, n - t, 1 - sp)
                for (k, n), j, t in zip(cells, detected, true, strict=True)
            ]
            return stats.beta.pdf(sp, c1, c2) * np.prod(terms)

        first = integrate.quad(sensitivity, 0, 1, epsabs=0, epsrel=1e-12, limit=200)[0]
        if first > 0:
            total += first * integrate.quad(specificity, 0, 1, epsabs=0, epsrel=1e-12, limit=200)[0]
    return total


@pytest.fixture(scope="module")
def reference():
    """The posterior over the two true counts (their weights from adaptive quadrature
    over ``se`` and ``sp``), and ``P(p1 p2 <= y)`` by quadrature over ``p1``."""
    (_, n1), (_, n2) = COUNTS
    a, b = PRIOR
    weights = {}
    for t1 in range(n1 + 1):
        for t2 in range(n2 + 1):
            prior = (
                special.comb(n1, t1) * special.beta(a + t1, b + n1 - t1)
                * special.comb(n2, t2) * special.beta(a + t2, b + n2 - t2)
            )  # fmt: skip
            weights[(t1, t2)] = prior * _grader_integral(COUNTS, (t1, t2))
    evidence = sum(weights.values()) / special.beta(a, b) ** 2
    total = sum(weights.values())
    weights = {t: w / total for t, w in weights.items()}

    def cdf(y):
        out = 0.0
        for (t1, t2), w in weights.items():
            first, second = (a + t1, b + n1 - t1), (a + t2, b + n2 - t2)

            def inner(p1, first=first, second=second):
                return stats.beta.pdf(p1, *first) * stats.beta.cdf(min(y / p1, 1.0), *second)

            out += w * integrate.quad(inner, 0, 1, points=[y], epsabs=0, epsrel=1e-11, limit=200)[0]
        return out

    mean = sum(
        w * (a + t1) / (a + b + n1) * (a + t2) / (a + b + n2) for (t1, t2), w in weights.items()
    )
    return {"cdf": cdf, "mean": mean, "evidence": evidence}


def test_the_bound_median_and_tail_are_the_integral(reference):
    from scipy import optimize

    summary = _product().summary(np.array([0.025, 0.5]), np.array([-np.log(0.05)]))
    upper, median = np.exp(-summary.x_quantiles)
    for got, level in ((upper, 0.975), (median, 0.5)):
        expected = optimize.brentq(lambda y, at=level: reference["cdf"](y) - at, 1e-6, 1 - 1e-9)
        assert got == pytest.approx(expected, rel=1e-4)
    assert summary.x_cdf[0] == pytest.approx(1 - reference["cdf"](0.05), abs=1e-5)


def test_the_quadrature_over_the_grader_is_exact(reference):
    """Gauss-Jacobi nodes integrate the graded counts' polynomials in ``se`` and ``sp``
    exactly: the mean and the evidence agree with adaptive quadrature to its own error."""
    product = _product()
    assert product.moments()[0] == pytest.approx(reference["mean"], rel=1e-9)
    factors = product.runs[0]
    assert np.exp(product.log_evidence(factors)) == pytest.approx(reference["evidence"], rel=1e-8)


def test_draws_follow_the_law_the_summary_gives():
    """Exact draws (forward filtering, backward sampling) against the deterministic law:
    each quantile's CDF among 200,000 draws within 4 standard errors."""
    product = _product(((9, 12), (5, 10), (2, 10)))
    probs = np.array([0.025, 0.25, 0.5, 0.9, 0.975])
    x = product.summary(probs, np.zeros(0)).x_quantiles
    draws = product.log_draws(200_000, np.random.default_rng(1))
    below = np.mean(-draws["log_p"][:, None] <= x[None, :], axis=0)
    assert np.all(np.abs(below - probs) <= 4 * np.sqrt(probs * (1 - probs) / 200_000))
    mean, sd = product.moments()
    p = np.exp(draws["log_p"])
    assert p.mean() == pytest.approx(mean, abs=4 * sd / np.sqrt(p.size))
    q = draws["q"][:, 0, 0]  # the first milestone's chance to be graded a success
    assert np.all((q > 0) & (q < 1))


def test_a_perfect_grader_leaves_the_product_of_betas():
    """An audit of a million runs without an error: the graded product is the plain
    product of ``Beta(1 + k, 1 + n - k)`` (the exact engine's, independently)."""
    shapes = (1e6, 1.0, 1e6, 1.0)
    product = _product(((7, 10), (3, 10)), shapes)
    plain = beta_product(np.array([[8.0, 4.0]]), np.array([[4.0, 8.0]]))
    probs = np.array([0.025, 0.5, 0.975])
    got = product.summary(probs, np.zeros(0)).x_quantiles
    expected = summarise_products([plain], probs)[0].x_quantiles
    assert np.allclose(got, expected, rtol=2e-4)


def test_the_left_out_count_is_the_ratio_of_evidences(reference):
    product = _product()
    k2, n2 = COUNTS[1]  # the second milestone's marginal on its own, by quadrature
    t = np.arange(n2 + 1)
    prior = special.comb(n2, t) * special.beta(1 + t, 1 + n2 - t)
    marginal = sum(p * _grader_integral((COUNTS[1],), (x,)) for p, x in zip(prior, t, strict=True))
    expected = np.log(reference["evidence"]) - np.log(marginal)
    assert product.left_out(0, 0) == pytest.approx(expected, rel=1e-8)


MILESTONES = (
    "agent,task,method,step,successes,trials,grader\n"
    "a,t1,milestone,1,1,1,judge\n"  # one trial a cell
    "a,t1,milestone,2,0,1,judge\n"  # a zero-success milestone
    "a,t2,milestone,1,3,4,judge\n"
    "a,t2,milestone,2,2,3,judge\n"
    "a,t2,milestone,3,1,2,\n"  # a trusted grader's
    "b,t1,milestone,1,0,2,judge\n"
)
AUDIT = "grader,truth,graded,runs\njudge,1,1,30\njudge,1,0,10\njudge,0,0,200\njudge,0,1,4\n"


@pytest.fixture(scope="module")
def milestone_fit(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graded_milestones")
    (folder / "evidence.csv").write_text(MILESTONES)
    (folder / "audit.csv").write_text(AUDIT)
    graded = bayes_eval.fit(folder / "evidence.csv", "mats2024", audit=folder / "audit.csv")
    trusted = bayes_eval.fit(folder / "evidence.csv", "mats2024")
    return folder, graded, trusted


def test_a_sparse_milestone_table_through_its_grader(milestone_fit):
    """One trial a cell, a zero-success milestone, a trusted cell beside graded ones: a
    grader that misses a quarter of successes raises every bound, and the provenance
    names it and the milestones it scored."""
    _, graded, trusted = milestone_fit
    with_grader, without = graded.summary(), trusted.summary()
    assert (with_grader["upper"] > without["upper"]).all()
    provenance = with_grader.set_index(["agent", "task"])["provenance"]
    assert "m1, m2 graded by judge: sensitivity 0.74" in provenance[("a", "t2")]
    assert "m3 graded" not in provenance[("a", "t2")]


def test_the_tree_carries_the_graded_chance_and_predicts_the_graded_counts(milestone_fit):
    import arviz_stats as azs

    _, graded, _ = milestone_fit
    tree = graded.tree
    assert "p_graded_milestone" in tree["posterior"]
    assert tree["posterior"]["p_graded_milestone"].sizes["graded_milestone_cell"] == 5
    assert tree["log_likelihood"]["successes"].sizes["cell"] == 6
    loo = azs.loo(tree)
    assert np.isfinite(loo.elpd)


def test_audited_runs_of_the_evidence_are_refused_by_the_product_models(milestone_fit):
    folder, _, _ = milestone_fit
    (folder / "runs_audit.csv").write_text(
        "grader,truth,graded,runs,agent,task,run_id\njudge,1,1,1,a,t1,r1\n"
        + "".join(f"{row},,,\n" for row in AUDIT.splitlines()[1:])
    )
    with pytest.raises(InputError, match="rows with a run_id .* not yet by mats2024"):
        bayes_eval.fit(folder / "evidence.csv", "mats2024", audit=folder / "runs_audit.csv")


def test_the_reports_grader_section_sets_each_product_beside_the_perfect_graders(
    milestone_fit,
):
    """Each graded product's bound beside the bound of the same counts with the grader
    taken as perfect: for a / t1 (1 of 1, 0 of 1 under uniform priors) the 97.5% quantile
    of the product of Beta(2, 1) and Beta(1, 2), from scipy's quadrature of its CDF; the
    share their difference; no floor (an end-to-end count's)."""
    from scipy import optimize

    from bayes_eval.outputs.grading import grader_table

    _, graded, trusted = milestone_fit
    summary = graded.summary()
    shown = grader_table(graded, summary, 0.975).set_index(["agent", "task"])
    assert sorted(shown.index) == [("a", "t1"), ("a", "t2"), ("b", "t1")]
    row = shown.loc[("a", "t1")]
    assert row["graded"] == "1/1, 0/1" and row["grader's floor"] == "-"

    def below(x):  # P(p1 p2 <= x), p1 ~ Beta(2, 1), p2 ~ Beta(1, 2)
        def inner(p1):
            return stats.beta.cdf(min(x / p1, 1.0), 1, 2) * stats.beta.pdf(p1, 2, 1)

        return integrate.quad(inner, 0, 1, points=[x], epsabs=1e-13)[0]

    perfect = optimize.brentq(lambda x: below(x) - 0.975, 1e-6, 1 - 1e-9, xtol=1e-12)
    assert float(row["grader taken as perfect"]) == pytest.approx(perfect, rel=1e-3)
    upper = summary.set_index(["agent", "task"])["upper"]
    alone = trusted.summary().set_index(["agent", "task"])["upper"]
    for pair, line in shown.iterrows():
        assert float(line["upper (0.975)"]) == pytest.approx(upper[pair], rel=1e-3)
        assert float(line["grader taken as perfect"]) == pytest.approx(alone[pair], rel=1e-3)
        share = float(line["the grader's share"])
        assert share == pytest.approx(upper[pair] - alone[pair], abs=1e-3 * upper[pair])


def test_milestone_bounds_hold_with_a_known_grader(load_study):
    """150 pairs of the milestone grader study (``studies/grader_milestones.py``): three
    milestones of 10 runs, their true rates log-uniform from 0.05 to 0.9 (not the uniform
    prior's family), graded by a judge that misses a quarter of the successes and raises
    a false alarm on 1% of failures, a fresh audit of 50 true successes and 300 true
    failures a pair. The audited 97.5% bounds miss the true product in at most 3.5% of the
    pairs, those with a milestone graded without a success on their own too; the bounds
    that take the judge as perfect are lower and miss more."""
    study = load_study("grader_milestones")
    rng = np.random.default_rng(3)
    name, bands, runs, se, sp = study.SETTINGS[0]
    pairs = pd.DataFrame(
        [study.pair_row(bands, runs, se, sp, (50, 300), 0.975, rng) for _ in range(150)]
    )
    missed, naive = pairs["truth"] > pairs["audited"], pairs["truth"] > pairs["perfect"]
    assert pairs["zero"].sum() > 30
    assert missed.mean() <= 0.035 and missed[pairs["zero"]].mean() <= 0.035
    assert naive.sum() > missed.sum() and (pairs["perfect"] < pairs["audited"]).all()


CHAIN = (
    "agent,task,method,step,run,milestone,successes,trials,chosen_index\n"
    "a,t1,end_to_end,,,,2,20,\n"  # the end-to-end rung: it has successes
    "a,t2,end_to_end,,,,0,10,\n"  # none: on to the milestones
    "a,t2,milestone,1,,,3,10,\n"
    "a,t2,milestone,2,,,1,10,\n"
    "a,t3,expert_completion,1,r1,,6,10,\n"  # expert steps alone
    "a,t3,expert_completion,2,r1,,0,10,\n"
    "a,t4,expert_best_of_n,1,1,,,,3\n"  # whole-task best-of-N alone: a point value
    "a,t4,expert_best_of_n,2,1,,,,2\n"
)


def uniform_spec(folder, shipped, *roles):
    """A copy of a shipped spec with the priors of ``roles`` made uniform, as a path."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "models" / f"{shipped}.toml").read_text()
    text = text.replace(f'name = "{shipped}"', f'name = "{shipped}_uniform"', 1)
    for role in roles:
        head, rest = text.split(f"[priors.{role}]", 1)
        rest = re.sub(r"alpha = [0-9.]+", "alpha = 1.0", rest, count=1)
        rest = re.sub(r"beta = [0-9.]+", "beta = 1.0", rest, count=1)
        text = f"{head}[priors.{role}]{rest}"
    path = folder / f"{shipped}_uniform.toml"
    path.write_text(text)
    return path


def test_the_chain_with_proper_priors_carries_the_grader_on_each_rung(tmp_path):
    """Phuong et al.'s chain with uniform milestone and step priors (its published
    Haldane prior is refused with an audit): one judge scored every row; each task's bound
    is that of its rung's own model through the judge (the end-to-end mixture, the graded
    milestone product, the graded expert steps), and the whole-task best-of-N point value
    is the one without the audit (no bound for the grader to widen)."""
    (tmp_path / "evidence.csv").write_text(CHAIN)
    (tmp_path / "audit.csv").write_text(AUDIT)
    evidence, audit = tmp_path / "evidence.csv", tmp_path / "audit.csv"
    chain = uniform_spec(tmp_path, "phuong_chain", "milestone", "step")
    graded = bayes_eval.fit(evidence, chain, audit=audit).summary().set_index("task")
    plain = bayes_eval.fit(evidence, chain).summary().set_index("task")
    rungs = {
        "t1": "end_to_end",
        "t2": "mats2024",
        "t3": uniform_spec(tmp_path, "ecr2024", "step"),
    }
    for task, model in rungs.items():
        alone = bayes_eval.fit(evidence, model, audit=audit).summary().set_index("task")
        assert graded.loc[task, "upper"] == pytest.approx(alone.loc[task, "upper"], rel=1e-9)
        assert graded.loc[task, "upper"] > plain.loc[task, "upper"]
        assert "graded by judge" in graded.loc[task, "provenance"]
    assert graded.loc["t4", "method"] == "expert_best_of_n"
    assert graded.loc["t4", "mean"] == plain.loc["t4", "mean"]
    assert "graded by" not in graded.loc["t4", "provenance"]
