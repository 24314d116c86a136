"""The pass@k and pass^k table (``Posterior.attempts``, ``run(attempts=...)``, ``fit
--attempts``): exact rows against mpmath, milestone products and expert mixtures against
their binomial expansion at hundreds of digits, MCMC rows against their own summary."""

from __future__ import annotations

import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import bayes_eval
from bayes_eval.cli.main import main
from bayes_eval.errors import InputError
from bayes_eval.results.attempts import ATTEMPTS_COLUMNS, parse_attempts

EXAMPLE = str(Path(__file__).resolve().parents[1] / "data" / "example_evidence.csv")
ATTEMPTS = (1, 1000, 10**6, 10**9)
LEVEL = 0.975


def _end_to_end(rows) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(agent="a", task=task, method="end_to_end", successes=k, trials=n)
            for task, k, n in rows
        ]
    )


def test_beta_rows_match_mpmath_at_every_scale():
    # 0 of 10 million runs puts P near 1e-7, where pass@1e9 is neither 0 nor 1
    evidence = _end_to_end([("none", 0, 20), ("some", 3, 10), ("rare", 0, 10**7), ("all", 5, 5)])
    posterior = bayes_eval.fit(evidence, "end_to_end")
    table = posterior.attempts(ATTEMPTS, threshold=0.5)
    assert list(table.columns) == list(ATTEMPTS_COLUMNS)
    assert len(table) == 4 * len(ATTEMPTS)
    for row in table.itertuples():
        k = row.attempts
        n, s = {"none": (20, 0), "some": (10, 3), "rare": (10**7, 0), "all": (5, 5)}[row.task]
        a, b = 1 + s, 1 + n - s  # the uniform prior's posterior
        with mp.workdps(60):
            ma, mb = mp.mpf(a), mp.mpf(b)
            none = mp.beta(ma, mb + k) / mp.beta(ma, mb)
            every = mp.beta(ma + k, mb) / mp.beta(ma, mb)
            assert row.pass_at_mean == pytest.approx(float(1 - none), rel=1e-6)
            assert row.pass_all_mean == pytest.approx(float(every), rel=1e-6, abs=1e-300)
            upper = mp.mpf(float(special.betaincinv(a, b, LEVEL)))
            lower = mp.mpf(float(special.betaincinv(a, b, 1 - LEVEL)))
            assert row.pass_at_upper == pytest.approx(float(1 - (1 - upper) ** k), rel=1e-6)
            assert row.pass_all_lower == pytest.approx(float(lower**k), rel=1e-6, abs=1e-300)
        # P(pass@k > 1/2) = P(P > 1 - 2^(-1/k))
        rate = -math.expm1(-math.log(2) / k)
        assert row.pass_at_prob_above == pytest.approx(
            stats.beta.sf(rate, a, b), rel=1e-6, abs=1e-12
        )
        assert row.diagnostics_ok and row.observed
        assert "exact (Beta closed forms)" in row.provenance


def _expansion(components, k: int) -> tuple[float, float]:
    """``E[1 - (1 - P)^k]`` and ``E[P^k]`` of an equal mixture of Beta products, from the
    binomial expansion of ``(1 - P)^k`` in exact moments, at enough digits for its
    alternating terms (about ``k log10 2`` cancel); numpy floats are made ``mpf`` first,
    which mpmath would otherwise evaluate at double precision."""
    with mp.workdps(int(k * 0.31) + 40):
        shapes = [
            [(mp.mpf(float(a)), mp.mpf(float(b))) for a, b in zip(*c, strict=True)]
            for c in components
        ]

        def moment(j):  # E[P^j] over the mixture
            return mp.fsum(
                mp.fprod(mp.beta(a + j, b) / mp.beta(a, b) for a, b in factors)
                for factors in shapes
            ) / len(shapes)

        none = mp.fsum(mp.binomial(k, j) * (-1) ** j * moment(j) for j in range(k + 1))
        return float(1 - none), float(moment(k))


@pytest.mark.parametrize(
    ("model", "rows", "method"),
    [
        ("phuong2024", [(1, 3, 10), (2, 5, 10), (3, 1, 12)], "milestone"),
        (
            "ecr2024",
            [(1, 9, 10, 1), (2, 7, 10, 1), (1, 4, 10, 2), (2, 9, 10, 2)],
            "expert_completion",
        ),
    ],
)
def test_product_and_mixture_means_match_their_expansion(model, rows, method):
    columns = ["step", "successes", "trials"] + (["run"] if method == "expert_completion" else [])
    evidence = pd.DataFrame([dict(zip(columns, r, strict=True)) for r in rows])
    evidence = evidence.assign(agent="a", task="t", method=method)
    posterior = bayes_eval.fit(evidence, model)
    product = posterior.product_at(0, 0)
    table = posterior.attempts([1, 10, 300])
    mean = posterior.summary()["mean"].iloc[0]
    for row in table.itertuples():
        pass_at, pass_all = _expansion(product.factors, int(row.attempts))
        assert row.pass_all_mean == pytest.approx(pass_all, rel=1e-9)
        # pass@k: exact draws with control variates; the stated error is honest
        stated = float(row.provenance.split("Monte Carlo error <= ")[1].split(" ")[0])
        assert abs(row.pass_at_mean - pass_at) <= 4 * stated * pass_at
        assert stated < 2e-3
        if row.attempts == 1:  # P itself: the control variate makes it exact
            assert row.pass_at_mean == pytest.approx(mean, rel=1e-12)
            assert row.pass_all_mean == pytest.approx(mean, rel=1e-12)
    summary = posterior.summary()
    bounded = table.set_index("attempts")
    upper = summary["upper"].iloc[0]
    assert bounded.loc[300, "pass_at_upper"] == pytest.approx(1 - (1 - upper) ** 300, rel=1e-9)


def test_point_values_and_missing_estimates_have_no_pass_at_k():
    posterior = bayes_eval.fit(EXAMPLE, "phuong_chain")
    table = posterior.attempts("10,1e6")
    point = table[table["method"] == "expert_best_of_n"]
    assert len(point) == 2
    assert point["pass_at_mean"].isna().all() and point["pass_all_lower"].isna().all()
    assert point["provenance"].str.contains("point value of P").all()
    assert point["diagnostics_ok"].isna().all()
    assert table.drop(point.index)["pass_at_mean"].notna().all()


def test_pooled_rows_map_each_draw():
    rng = np.random.default_rng(3)
    rates = rng.beta(0.4, 0.6, size=8)
    rows = [(f"t{j}", int(rng.binomial(4, r)), 4) for j, r in enumerate(rates)]
    posterior = bayes_eval.fit(_end_to_end(rows), "end_to_end_pooled")
    summary = posterior.summary(threshold=0.2).set_index("task")
    table = posterior.attempts([1, 50], threshold=0.2)
    one = table[table["attempts"] == 1].set_index("task")
    # k = 1 is P itself
    for column, same in [
        ("mean", "pass_at_mean"),
        ("upper", "pass_at_upper"),
        ("lower", "pass_all_lower"),
    ]:
        np.testing.assert_allclose(one[same], summary[column], rtol=1e-12)
    np.testing.assert_allclose(one["pass_at_prob_above"], summary["prob_above"], rtol=1e-12)
    fifty = table[table["attempts"] == 50].set_index("task")
    mean = summary["mean"]
    # Jensen: pass@k is concave in P, pass^k convex
    assert (fifty["pass_at_mean"] <= 1 - (1 - mean) ** 50 + 1e-12).all()
    assert (fifty["pass_all_mean"] >= mean**50 * (1 - 1e-12)).all()
    np.testing.assert_allclose(fifty["pass_at_upper"], 1 - (1 - summary["upper"]) ** 50, rtol=1e-9)
    assert fifty["provenance"].str.contains("MCMC draws of P").all()


@pytest.mark.parametrize(
    ("given", "expected"),
    [("10,1e6", (10, 10**6)), ([3, 1, 3], (1, 3)), ("1e9", (10**9,)), (" 7 ", (7,))],
)
def test_attempts_are_parsed(given, expected):
    assert parse_attempts(given) == expected


@pytest.mark.parametrize("given", ["0", "2e9", "1.5", "-3", "+3", "x", "", "10,", [True]])
def test_bad_attempts_are_refused(given):
    with pytest.raises(InputError, match="attempts"):
        parse_attempts(given)


def test_fit_writes_attempts_and_refuses_bad_ones_before_fitting(tmp_path, capsys):
    out = tmp_path / "run"
    done = bayes_eval.run(EXAMPLE, out=out, attempts=[10])
    written = pd.read_csv(out / "attempts.csv")
    assert "attempts.csv" in done.written
    pd.testing.assert_series_equal(written["pass_at_upper"], done.attempts["pass_at_upper"])
    code = main(["fit", EXAMPLE, "--attempts", "10,0", "--out", str(tmp_path / "no")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines()[-1] == "error: --attempts: '0' is outside 1 to 1,000,000,000"
    assert not (tmp_path / "no").exists()
