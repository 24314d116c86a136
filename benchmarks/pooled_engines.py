"""Collapsed hierarchy on nutpie and PyMC against a centred Beta hierarchy, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/pooled_engines.py [--tasks 100] [--milestones 5] [--trials 20 100]
        [--mean 0.6] [--seed 0]

For each TRIALS (the judged sparse case first: 20 trials per milestone, where pooling is
what a user picks; then rich data beside it), the same simulated data (TASKS x
MILESTONES, drawn from the hierarchy of the ``hierarchical`` spec, milestone rates
around MEAN) is fitted three ways, 4 chains x 1000 draws after 1000 tuning steps each,
all at the ``hierarchical`` spec's target_accept and all on one core (nutpie would
otherwise run its chains in parallel threads while PyMC runs them in sequence, and the
ratio would measure the parallelism, not the engines):

(a) the collapsed model (Beta-Binomial, rates drawn back exactly; task means in the
    form ``fit`` chooses) on nutpie;
(b) the same collapsed model on PyMC's NUTS;
(c) a centred, uncollapsed hierarchy (every milestone rate a sampled Beta) on PyMC.

For each it prints the size of the log-density-and-gradient graph (nodes after
PyTensor's rewrites, and distinct operations), compile time, sampling time, the minimum
bulk ESS of ``p_task`` over tasks, ESS per second of sampling, gradient evaluations
per draw and divergences, and the ratio of ESS per second to (c).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

warnings.simplefilter("ignore")

DRAWS, TUNE, CHAINS = 1000, 1000, 4


def simulate(n_tasks: int, n_milestones: int, seed: int, trials: int, mean: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        mu_task = rng.beta(mean * 8, (1 - mean) * 8)
        for m, p in enumerate(rng.beta(mu_task * 30, (1 - mu_task) * 30, n_milestones), 1):
            rows.append(
                dict(
                    task=f"t{t:03d}",
                    method="milestone",
                    step=m,
                    successes=int(rng.binomial(trials, p)),
                    trials=trials,
                )
            )
    return pd.DataFrame(rows)


def min_ess(p_task) -> float:
    import arviz_stats

    return float(np.nanmin(arviz_stats.ess(p_task, method="bulk").values))


def collapsed(layout, spec, engine: str, seed: int, target: float):
    import nutpie

    from bayes_eval.counts.layout import choose_form
    from bayes_eval.inference.engines import compile_nutpie
    from bayes_eval.pooled.models import hierarchy_model
    from bayes_eval.pooled.rates import pooled_rates

    model = hierarchy_model(layout, spec, choose_form(layout, spec))
    if engine == "nutpie":
        start = time.perf_counter()
        compiled = compile_nutpie(model)
        compile_time = time.perf_counter() - start
        start = time.perf_counter()
        trace = nutpie.sample(
            compiled,
            draws=DRAWS,
            tune=TUNE,
            chains=CHAINS,
            seed=seed,
            progress_bar=False,
            target_accept=target,
            cores=1,
        )
        sample_time = time.perf_counter() - start
    else:
        compile_time, sample_time, trace = _pymc(model, seed, target)
    posterior = trace["posterior"].to_dataset()
    rates = pooled_rates(posterior, layout, spec, np.random.default_rng(seed))
    p_task = posterior["mu_task"].copy(data=rates["p_task"][1][:, :, 0, :])
    return graph_size(model), compile_time, sample_time, min_ess(p_task), *_stats(trace)


def graph_size(model) -> tuple[int, int]:
    """Nodes of the compiled log-density-and-gradient function, and distinct operations."""
    function = model.logp_dlogp_function()._pytensor_function
    nodes = function.maker.fgraph.apply_nodes
    return len(nodes), len({str(node.op) for node in nodes})


def centred(layout, spec, seed: int, target: float):
    import pymc as pm
    import pytensor.tensor as pt

    from bayes_eval.counts.layout import Form
    from bayes_eval.pooled.models import _coords, _task_hierarchy

    cell_agent = layout.pair_agent[layout.cell_pair]
    centred_means = Form(np.ones(len(layout.pairs), dtype=bool), np.zeros(0, dtype=bool))
    with pm.Model(coords=_coords(layout)) as model:
        log_mu, _, log_kappa = _task_hierarchy(pm, layout, spec, centred_means)
        mean, conc = pt.exp(log_mu)[layout.cell_pair], pt.exp(log_kappa)[cell_agent]
        p = pm.Beta("p_cell", alpha=mean * conc, beta=(1 - mean) * conc, dims="cell")
        pm.Binomial("k_cell", n=layout.n, p=p, observed=layout.k, dims="cell")
        log_q = pt.inc_subtensor(pt.zeros(len(layout.pairs))[layout.cell_pair], pt.log(p))
        pm.Deterministic("p_task", pt.exp(log_q), dims="pair")
    compile_time, sample_time, trace = _pymc(model, seed, target)
    ess = min_ess(trace["posterior"]["p_task"])
    return graph_size(model), compile_time, sample_time, ess, *_stats(trace)


def _pymc(model, seed: int, target: float):
    """PyMC's NUTS; compile time is the wall time not spent sampling."""
    import pymc as pm

    from bayes_eval.inference.engines import fresh_compile

    start = time.perf_counter()
    with fresh_compile():  # as the package compiles it
        trace = pm.sample(
            draws=DRAWS,
            tune=TUNE,
            chains=CHAINS,
            cores=1,
            random_seed=seed,
            nuts_sampler="pymc",
            model=model,
            progressbar=False,
            target_accept=target,
            compute_convergence_checks=False,
        )
    sample_time = float(trace["posterior"].attrs["sampling_time"])
    return time.perf_counter() - start - sample_time, sample_time, trace


def _stats(trace) -> tuple[float, int]:
    """Mean gradient evaluations per draw, and divergences."""
    stats = trace["sample_stats"]
    return float(stats["n_steps"].mean()), int(stats["diverging"].values.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--milestones", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--trials", type=int, nargs="+", default=[20, 100], help="trials per milestone"
    )
    parser.add_argument("--mean", type=float, default=0.6, help="typical milestone rate")
    args = parser.parse_args()

    import bayes_eval
    from bayes_eval.counts.layout import build_layout
    from bayes_eval.fit import usable_rows

    spec = bayes_eval.load_spec("hierarchical")
    target = spec.sampler.target_accept
    for trials in args.trials:
        data = simulate(args.tasks, args.milestones, args.seed, trials, args.mean)
        layout = build_layout(usable_rows(data, spec), spec)
        results = {
            "(a) collapsed, nutpie": collapsed(layout, spec, "nutpie", args.seed, target),
            "(b) collapsed, PyMC": collapsed(layout, spec, "pymc", args.seed, target),
            "(c) centred Beta, PyMC": centred(layout, spec, args.seed, target),
        }
        base = results["(c) centred Beta, PyMC"]
        base_rate = base[3] / base[2]
        print(
            f"\n## {args.tasks} tasks x {args.milestones} milestones x {trials} trials, "
            f"milestone rates around {args.mean:g}, {CHAINS} chains x {DRAWS} draws "
            f"({TUNE} tune), target_accept {target:g}\n"
        )
        print(
            "| engine | graph nodes | distinct ops | compile s | sample s | min ESS | ESS/s "
            "| grad/draw | divergences | ESS/s vs (c) |\n|" + "---|" * 10
        )
        for name, (graph, compile_s, sample_s, ess, steps, divergences) in results.items():
            rate = ess / sample_s
            print(
                f"| {name} | {graph[0]} | {graph[1]} | {compile_s:.1f} | {sample_s:.1f} | "
                f"{ess:.0f} | {rate:.0f} | {steps:.1f} | {divergences} | "
                f"{rate / base_rate:.1f}x |"
            )


if __name__ == "__main__":
    main()
