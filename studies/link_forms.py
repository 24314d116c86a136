"""Which link between milestones and end-to-end runs predicts held-out unguided outcomes?

    python studies/link_forms.py [--tables 8] [--seed 0]

Two forms of ``crossed_joint``'s link, each a minimal PyMC model fitted to the same
simulated capture-the-flag tables (``capture_the_flag.simulate_table``, half the pairs'
unguided outcomes hidden), beside ``crossed`` (no link):

* competence: ``logit P = theta_a - b_t + link omega_at`` with ``omega_at`` the pair's
  milestone competence (agent, task and pair parts), the form ``crossed_joint`` ships;
* product: ``logit P = theta_a - b_t + link (log prod_m p_atm - mean)``, the log of the
  product of the pair's subtask rates (at no cell departure), centred over the pairs.

The milestone side is the same in both (``logit p_atm = milestone_mean + omega_at -
step_scale s_tm``); the end-to-end departure is integrated out by Gauss-Hermite quadrature
(one trial per pair). Every quantity is non-centred; nutpie, 4 chains x 1000 draws after
1000 tuning steps. Prints per table and form the held-out log score (sum over hidden
pairs), expected and observed successes, the coverage of the true rates by the central
95% interval, the slope's posterior mean, divergences, the worst R-hat and the least
bulk ESS over the scalars.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from capture_the_flag import held_out_split, simulate_table
from scipy import special

FORMS = ("crossed", "competence", "product")
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(20)  # probabilists' Gauss-Hermite
LOG_WEIGHTS = np.log(WEIGHTS / WEIGHTS.sum())


def indices(evidence):
    """The table as index arrays: pairs (agent, task), milestone cells (pair, subtask)."""
    e2e = evidence[evidence["method"] == "end_to_end"]
    pairs = list(dict.fromkeys(zip(evidence["agent"], evidence["task"], strict=True)))
    agents = sorted({a for a, _ in pairs})
    tasks = sorted({t for _, t in pairs})
    where = {pair: i for i, pair in enumerate(pairs)}
    cells = evidence[evidence["method"] == "milestone"]
    cell_pair = np.array([where[p] for p in zip(cells["agent"], cells["task"], strict=True)])
    slot = [(t, int(s)) for t, s in zip(cells["task"], cells["step"], strict=True)]
    steps = {s: i for i, s in enumerate(dict.fromkeys(slot))}
    return dict(
        pairs=pairs,
        pair_agent=np.array([agents.index(a) for a, _ in pairs]),
        pair_task=np.array([tasks.index(t) for _, t in pairs]),
        agents=len(agents),
        tasks=len(tasks),
        cell_pair=cell_pair,
        cell_step=np.array([steps[s] for s in slot]),
        steps=len(steps),
        k=cells["successes"].to_numpy(),
        e2e_pair=np.array([where[p] for p in zip(e2e["agent"], e2e["task"], strict=True)]),
        e2e_k=e2e["successes"].to_numpy(),
    )


def build(d, form):
    """The PyMC model of ``form`` on the index arrays ``d``."""
    import pymc as pm
    import pytensor.tensor as pt

    def bernoulli(k, logit):
        return pt.switch(pt.eq(k, 1), -pt.softplus(-logit), -pt.softplus(logit))

    with pm.Model() as model:
        ability = pm.Normal("ability_mean", 0, 2.5) + pm.LogNormal(
            "ability_scale", 0, 1
        ) * pm.Normal("ability_z", 0, 1, shape=d["agents"])
        difficulty = pm.LogNormal("difficulty_scale", 0, 1) * pm.ZeroSumNormal(
            "difficulty_z", sigma=1, shape=d["tasks"]
        )
        eta = ability[d["pair_agent"]] - difficulty[d["pair_task"]]
        if form != "crossed":
            own = pm.LogNormal("milestone_ability_scale", 0, 1) * pm.Normal(
                "milestone_ability_z", 0, 1, shape=d["agents"]
            )
            hard = pm.LogNormal("milestone_difficulty_scale", 0, 1) * pm.ZeroSumNormal(
                "milestone_difficulty_z", sigma=1, shape=d["tasks"]
            )
            omega = own[d["pair_agent"]] - hard[d["pair_task"]]
            omega = omega + pm.LogNormal("pair_scale", 0, 1) * pm.Normal(
                "pair_z", 0, 1, shape=len(d["pairs"])
            )
            step = pm.LogNormal("step_scale", 0, 1) * pm.Normal("step_z", 0, 1, shape=d["steps"])
            cell = (
                pm.Normal("milestone_mean", 0, 2.5) + omega[d["cell_pair"]] - step[d["cell_step"]]
            )
            pm.Potential("milestones", pt.sum(bernoulli(d["k"], cell)))
            if form == "competence":
                term = omega
            else:
                term = pt.inc_subtensor(
                    pt.zeros(len(d["pairs"]))[d["cell_pair"]], -pt.softplus(-cell)
                )
                term = term - pt.mean(term)
            eta = eta + pm.Normal("link", 0, 1) * term
        scale = pm.LogNormal("cell_scale", 0, 1)
        nodes = eta[d["e2e_pair"]][:, None] + scale * NODES[None, :]
        each = pt.logsumexp(bernoulli(d["e2e_k"][:, None], nodes) + LOG_WEIGHTS, axis=1)
        pm.Potential("end_to_end", pt.sum(each))
        pm.Deterministic("eta", eta)
    return model


def one_table(index, seed, form):
    """The scores of ``form`` on simulated table ``index`` (as ``capture_the_flag``'s)."""
    import nutpie
    from arviz_stats import ess, rhat

    rng = np.random.default_rng([seed, index])
    evidence, truth = simulate_table(rng)
    shown, hidden = held_out_split(evidence, rng)
    d = indices(shown)
    e2e = evidence[evidence["method"] == "end_to_end"].set_index(["agent", "task"])
    where = {pair: i for i, pair in enumerate(d["pairs"])}
    hid = np.array([where[p] for p in hidden])
    outcome = e2e.loc[hidden, "successes"].to_numpy()
    rate = truth.set_index(["agent", "task"]).loc[hidden, "rate"].to_numpy()
    compiled = nutpie.compile_pymc_model(build(d, form))
    trace = nutpie.sample(
        compiled, draws=1000, tune=1000, chains=4, seed=seed + index, progress_bar=False
    )
    post = trace.posterior.to_dataset()
    eta = post["eta"].values.reshape(-1, len(d["pairs"]))[:, hid]
    scale = post["cell_scale"].values.reshape(-1, 1)
    p = special.expit(eta + scale * rng.standard_normal(eta.shape))
    mean = p.mean(axis=0)
    low, high = np.quantile(p, [0.025, 0.975], axis=0)
    scalars = post[[n for n in post.data_vars if post[n].ndim == 2]]
    return dict(
        log_score=float(np.log(np.where(outcome == 1, mean, 1 - mean)).sum()),
        expected=float(mean.sum()),
        observed=int(outcome.sum()),
        within_95=float(np.mean((low <= rate) & (rate <= high))),
        link=float(post["link"].mean()) if "link" in post else np.nan,
        divergences=int(trace.sample_stats["diverging"].sum()),
        rhat=float(max(rhat(scalars).to_array().values)),
        ess=float(min(ess(scalars).to_array().values)),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for index in range(args.tables):
        for form in FORMS:
            row = one_table(index, args.seed, form)
            print(f"table {index} {form:10s} " + " ".join(f"{k} {v:.3g}" for k, v in row.items()))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
