"""The crossed model on METR's runs against a peer's agent x task GLM, in one run.

Run from the repository root (needs the package installed with the ``jax`` extra, and
METR's public runs):

    python benchmarks/crossed_metr.py --runs PATH/metr_runs.csv [--seed 20240901]

Both fit the same table (METR's runs without the human baseliners: 10 agents, 83 tasks,
6,852 runs, as ``bayes-eval fit FILE --runs --model crossed`` reads it) on this machine:

(a) ``crossed`` as ``bayes_eval.fit`` runs it at the spec's defaults (nutpie, 4 chains of
    2000 draws after 1000 tuning steps, compilation included);
(b) the peer's model (as HiBayES fits it): ``logit P = mean + alpha_a + beta_t``, agent
    and task effects Normal(0, sigma), centred (every agent and task has dozens of runs
    or more), with HalfNormal(1) scales, a Binomial count per cell, no agent x task
    term, on numpyro's NUTS, 4 chains of 1000 draws after 1000 warm-up steps, run one
    after another (jit compilation included).

Prints for each the wall time, the worst R-hat and smallest bulk ESS over every sampled
quantity, the divergences, and, over the cells with no success, the median and smallest
97.5% bound and how many lie below 1e-3 and 1e-7 (and, for ``crossed``, the rows whose
bound lies below their own mean or is marked ``extrapolated``); then the ratios of the
wall times and of the smallest bulk ESS per second. The peer's intercept and effects
trade along a ridge that only their priors close, which costs it effective draws; it has
no agent x task term, so its bounds are not a target: they show what additivity alone
certifies.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval.constants import ESS_MIN, RHAT_MAX
from bayes_eval.messages import collected

LEVEL = 0.975


def metr_cells(runs: Path):
    """METR's evidence without the human baseliners, and its counts per (agent, task)."""
    from bayes_eval import load_evidence, read_runs

    table = read_runs(runs, "metr").table
    table = table.loc[table["agent"] != "human", ["agent", "task", "method", "successes", "trials"]]
    evidence = load_evidence(table.reset_index(drop=True))
    cells = table.groupby(["agent", "task"], as_index=False)[["successes", "trials"]].sum()
    return evidence, cells


def bound_figures(upper: pd.Series) -> dict:
    return dict(
        zero_cells=len(upper),
        median_bound=float(upper.median()),
        smallest_bound=float(upper.min()),
        below_1e3=int((upper < 1e-3).sum()),
        below_1e7=int((upper < 1e-7).sum()),
    )


def ours(evidence, cells: pd.DataFrame, seed: int) -> dict:
    from bayes_eval import fit

    start = time.perf_counter()
    with collected():  # the benchmark's notes
        posterior = fit(evidence, "crossed", seed=seed)
    seconds = time.perf_counter() - start
    table = posterior.diagnostics.table
    summary = posterior.summary().merge(cells, on=["agent", "task"])
    zero = summary.loc[summary["successes"] == 0, "upper"]
    return dict(
        model="crossed (bayes_eval)",
        seconds=seconds,
        diagnostics_ok=posterior.diagnostics.ok,
        worst_r_hat=float(table["r_hat"].max()),
        least_ess_bulk=float(table["ess_bulk"].min()),
        divergences=posterior.diagnostics.divergences,
        **bound_figures(zero),
        below_own_mean=int((summary["upper"] < summary["mean"]).sum()),
        extrapolated=int(summary["extrapolated"].sum()),
    )


def peer(cells: pd.DataFrame, seed: int) -> dict:
    import jax
    import numpyro
    import numpyro.distributions as dist
    from arviz_stats.base import array_stats
    from numpyro.infer import MCMC, NUTS

    agent = pd.factorize(cells["agent"])[0]
    task = pd.factorize(cells["task"])[0]
    k, n = cells["successes"].to_numpy(), cells["trials"].to_numpy()

    def model():
        mean = numpyro.sample("mean", dist.Normal(0.0, 2.5))
        agent_scale = numpyro.sample("agent_scale", dist.HalfNormal(1.0))
        task_scale = numpyro.sample("task_scale", dist.HalfNormal(1.0))
        with numpyro.plate("agents", agent.max() + 1):
            alpha = numpyro.sample("alpha", dist.Normal(0.0, agent_scale))
        with numpyro.plate("tasks", task.max() + 1):
            beta = numpyro.sample("beta", dist.Normal(0.0, task_scale))
        logit = mean + alpha[agent] + beta[task]
        numpyro.deterministic("p", jax.nn.sigmoid(logit))
        numpyro.sample("k", dist.Binomial(n, logits=logit), obs=k)

    start = time.perf_counter()
    mcmc = MCMC(
        NUTS(model),
        num_warmup=1000,
        num_samples=1000,
        num_chains=4,
        chain_method="sequential",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("diverging",))
    seconds = time.perf_counter() - start
    samples = mcmc.get_samples(group_by_chain=True)
    sampled = {name: np.asarray(v) for name, v in samples.items() if name != "p"}
    axes = dict(chain_axis=0, draw_axis=1)
    r_hat = max(float(np.nanmax(array_stats.rhat(v, **axes))) for v in sampled.values())
    ess = min(float(np.nanmin(array_stats.ess(v, **axes))) for v in sampled.values())
    upper = np.quantile(np.asarray(samples["p"]).reshape(-1, len(cells)), LEVEL, axis=0)
    zero = pd.Series(upper[k == 0])
    return dict(
        model="agent x task GLM (numpyro)",
        seconds=seconds,
        diagnostics_ok=bool(r_hat <= RHAT_MAX and ess >= ESS_MIN),  # bulk ESS only
        worst_r_hat=r_hat,
        least_ess_bulk=ess,
        divergences=int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum()),
        **bound_figures(zero),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, type=Path, help="METR's metr_runs.csv")
    parser.add_argument("--seed", type=int, default=20240901)
    args = parser.parse_args(argv)
    evidence, cells = metr_cells(args.runs)
    rows = [ours(evidence, cells, args.seed), peer(cells, args.seed)]
    table = pd.DataFrame(rows).set_index("model")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.T.to_string(float_format=lambda x: f"{x:.3g}"))
    ratio = rows[0]["seconds"] / rows[1]["seconds"]
    per_second = [row["least_ess_bulk"] / row["seconds"] for row in rows]
    print(f"\ncrossed / peer wall time: {ratio:.2f}")
    print(f"crossed / peer least bulk ESS per second: {per_second[0] / per_second[1]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
