"""What a failed diagnostic takes with it: the bounds and verdicts that rest on the quantity
that failed, and no others (``Diagnostics.failed_for``, ``outputs.verdicts``)."""

import numpy as np
import pandas as pd

from bayes_eval.inference.diagnostics import Diagnostics
from bayes_eval.outputs.verdicts import BELOW, UNRELIABLE, verdicts

PAIRS = [("a0", "t0"), ("a0", "t1"), ("a1", "t0"), ("a1", "t1")]


def _diagnostics(rows, divergences=0, ebfmi=(1.0, 1.0)):
    """Diagnostics of hand-made rows (``variable``, ``r_hat``, ``ess_bulk``, ``ess_tail``),
    each checked at R-hat 1.01 and ESS 400 as the gate checks them."""
    table = pd.DataFrame(rows, columns=["variable", "r_hat", "ess_bulk", "ess_tail"])
    table["ok"] = (table["r_hat"] <= 1.01) & (table[["ess_bulk", "ess_tail"]] >= 400).all(axis=1)
    messages = ("failed",) if not table["ok"].all() or divergences else ()
    return Diagnostics(not messages, messages, table, divergences, ebfmi)


def _rates(skip=()):
    return [(f"p_task[{a}, {t}]", 1.0, 2000, 2000) for a, t in PAIRS if (a, t) not in skip]


def test_a_failed_quantity_of_one_agent_or_task_takes_only_its_pairs():
    """ability[a1] short of bulk ESS fails a1's pairs alone; difficulty[t1] with an R-hat
    of 1.03 fails t1's; a pair whose rate was not checked fails; the others pass."""
    rows = [
        ("cell_scale", 1.0, 900, 800),
        ("ability[a0]", 1.0, 1200, 900),
        ("ability[a1]", 1.0, 357, 900),
        ("difficulty[t0]", 1.0, 1500, 1500),
        ("difficulty[t1]", 1.03, 1500, 1500),
        *_rates(skip=[("a0", "t0")]),
    ]
    failed = _diagnostics(rows).failed_for(PAIRS)
    assert failed == [
        "p_task[a0, t0] (not checked)",
        "difficulty[t1] (R-hat 1.030)",
        "ability[a1] (bulk ESS 357)",
        "ability[a1] (bulk ESS 357); difficulty[t1] (R-hat 1.030)",
    ]
    ok = _diagnostics(rows[:2] + rows[3:4] + _rates()).cells_ok(PAIRS)
    assert ok.all()


def test_a_failed_scale_or_sampler_takes_every_pair():
    """A quantity that names no agent, task or pair (a scale, a coefficient) and the
    sampler's divergences are checks every bound rests on; a list longer than three is
    cut with how many more."""
    rows = [("cell_scale", 1.0, 357, 900), ("coefficient[x]", 1.0, 1000, 300), *_rates()]
    failed = _diagnostics(rows, divergences=3, ebfmi=(0.2, 0.9)).failed_for(PAIRS)
    assert (
        failed
        == [
            "3 divergent transitions; E-BFMI below 0.3 in chain(s) 0; cell_scale (bulk ESS 357) "
            "and 1 more"
        ]
        * 4
    )


def test_a_verdict_its_own_runs_carry_stands_when_the_fit_fails():
    """Where the fit failed for the agent's ability, a below verdict that the pair's own
    runs carry (basis own) stands and says why; one that the pooling carries is
    unreliable and names the quantity; a pair of another agent keeps its verdict."""
    rows = [("cell_scale", 1.0, 900, 800), ("ability[a1]", 1.0, 357, 900), *_rates()]
    diagnostics = _diagnostics(rows)
    summary = pd.DataFrame(
        dict(
            agent=["a0", "a1", "a1"],
            task=["t0", "t0", "t1"],
            lower=1e-6,
            upper=[0.01, 0.01, 0.011],
            basis=["pooled", "own", "pooled"],
            extrapolated=pd.array([False] * 3, dtype="boolean"),
            method="end_to_end",
        )
    )
    summary["diagnostics_ok"] = diagnostics.cells_ok(
        zip(summary["agent"], summary["task"], strict=True)
    )
    assert list(summary["diagnostics_ok"]) == [True, False, False]
    none = pd.DataFrame(columns=["agent", "task", "doubtful", "p_value"])
    found = verdicts(summary, none, 0.05, diagnostics=diagnostics)
    assert list(found["verdict"]) == [BELOW, BELOW, UNRELIABLE]
    assert found["reason"].iloc[1] == (
        "its own runs carry it: the MCMC diagnostics failed for ability[a1] (bulk ESS 357), "
        "which they do not rest on"
    )
    assert found["reason"].iloc[2] == "the MCMC diagnostics failed for ability[a1] (bulk ESS 357)"
    assert np.all(found["reason"].iloc[0] == "")
