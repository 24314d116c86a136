"""Sharing a budget of runs for pass@k (``bayes_eval.allocation``): the preposterior
variance against simulation and direct integration, the greedy rule against every
allocation of a small budget, and the refusals."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

import bayes_eval
from bayes_eval.allocation import _variance, allocate, expected_variance
from bayes_eval.cli.main import main
from bayes_eval.errors import InputError

EXAMPLE = str(Path(__file__).resolve().parents[1] / "data" / "example_evidence.csv")


def _evidence(successes, trials) -> pd.DataFrame:
    return pd.DataFrame(
        dict(
            agent="a",
            task=[f"t{t}" for t in range(len(successes))],
            method="end_to_end",
            successes=successes,
            trials=trials,
        )
    )


@pytest.mark.parametrize("never", [0.0, 0.3])
@pytest.mark.parametrize(("a", "b", "k"), [(1.0, 3.0, 1), (1.0, 21.0, 50), (0.4, 2.5, 1000)])
def test_the_variance_of_pass_at_k_matches_integration(a, b, k, never):
    density = stats.beta(a, b).pdf

    def moment(power):
        def f(p):
            return (1 - (1 - p) ** k) ** power * density(p)

        # P = 0 with probability never adds nothing: pass@k of a rate 0 is 0
        return (1 - never) * integrate.quad(f, 0, 1, points=[1 / k], limit=400)[0]

    assert _variance(a, b, k, never) == pytest.approx(moment(2) - moment(1) ** 2, rel=1e-6)


def test_the_preposterior_variance_matches_simulation():
    a, b, k, runs = 1.0, 5.0, 30, 8
    rng = np.random.default_rng(4)
    p = rng.beta(a, b, 200_000)
    y = rng.binomial(runs, p)
    simulated = _variance(a + y, b + runs - y, k)
    error = simulated.std(ddof=1) / np.sqrt(simulated.size)
    assert abs(expected_variance(a, b, k, runs) - simulated.mean()) < 4 * error
    assert expected_variance(a, b, k, runs) < expected_variance(a, b, k, 0)


def test_the_preposterior_of_a_task_perhaps_never_solved_matches_simulation():
    """No formula in the check: draw (never solved, P, y), then the expected posterior
    variance is the spread of pass@k among draws with the same y, weighted by y's share;
    its Monte Carlo error from 20 independent batches."""
    a, b, k, runs, never = 0.5, 4.0, 20, 3, 0.4
    rng = np.random.default_rng(7)
    batches = []
    for _ in range(20):
        size = 200_000
        p = np.where(rng.uniform(size=size) < never, 0.0, rng.beta(a, b, size))
        y = rng.binomial(runs, p)
        g = 1 - (1 - p) ** k
        batches.append(sum(np.mean(y == v) * g[y == v].var() for v in range(runs + 1)))
    error = np.std(batches, ddof=1) / np.sqrt(len(batches))
    assert abs(expected_variance(a, b, k, runs, never) - np.mean(batches)) < 4 * error
    # the runs can show the task solvable, and teach more than when it surely is
    assert expected_variance(a, b, k, runs, never) < _variance(a, b, k, never)


def test_the_greedy_rule_finds_the_best_allocation_of_a_small_budget():
    evidence = _evidence([0, 1, 3, 0], [2, 4, 3, 6])
    posterior = bayes_eval.fit(evidence, "end_to_end")
    budget, k = 6, 20
    plan = allocate(posterior, k, budget, rule="information")
    shapes = [(1 + s, 1 + n - s) for s, n in zip([0, 1, 3, 0], [2, 4, 3, 6], strict=True)]

    def total(runs):
        return sum(expected_variance(a, b, k, m) for (a, b), m in zip(shapes, runs, strict=True))

    best = min(
        (runs for runs in itertools.product(range(budget + 1), repeat=4) if sum(runs) == budget),
        key=total,
    )
    assert total(plan["runs"]) == pytest.approx(total(best), rel=1e-12)
    sd = plan.attrs["sd_after"]
    assert sd["information"] <= min(sd["hardest"], sd["uniform"])
    assert plan["runs"].sum() == budget


@pytest.mark.parametrize("rule", ["hardest", "uniform"])
def test_the_other_rules_share_evenly(rule):
    posterior = bayes_eval.fit(_evidence([0, 2, 1, 0, 5], [3, 3, 3, 3, 5]), "end_to_end")
    runs = allocate(posterior, 10, 7, rule=rule)["runs"].tolist()
    # hardest: the harder half by posterior mean (tasks 0 and 3, 0 of 3 each)
    assert runs == ([4, 0, 0, 3, 0] if rule == "hardest" else [2, 2, 1, 1, 1])


def test_allocation_refuses_what_it_cannot_plan(tmp_path, capsys):
    chain = bayes_eval.fit(EXAMPLE, "phuong_chain")
    with pytest.raises(InputError, match="name one"):
        allocate(chain, 10, 5)
    with pytest.raises(InputError, match="has no end-to-end Beta posterior"):
        allocate(chain, 10, 5, agent="agent-a")
    with pytest.raises(InputError, match="rule"):
        allocate(chain, 10, 5, agent="agent-a", rule="best")
    bayes_eval.run(_evidence([0, 1], [2, 2]), "end_to_end", out=tmp_path / "run")
    assert main(["plan", str(tmp_path / "run"), "--budget", "4"]) == 2
    assert (
        "--budget needs RUN_DIR (a fit written by fit --out) and --attempts K"
        in capsys.readouterr().err
    )
    assert main(["plan", str(tmp_path / "run"), "--budget", "4", "--attempts", "10"]) == 0
    out = capsys.readouterr().out
    assert "expected posterior sd of the average pass@10 over the tasks" in out
