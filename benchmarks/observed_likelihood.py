"""``end_to_end_pooled``'s likelihood as the package writes it (a potential whose
Beta-Binomial terms share their per-agent parts) against PyMC's observed
``pm.BetaBinomial``, on one table, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/observed_likelihood.py RUNS.csv [--from metr] [--draws 4000]

Both models are the package's ``end_to_end_pooled`` on the table's design (the same
priors, the same parameters); only the counts' likelihood differs. It prints, for each:

* the log density and its gradient, compiled by PyTensor (its C backend, the same for
  both) and evaluated 2,000 times at one point, the time per evaluation and the ratio;
* that the two log densities differ by one constant (the binomial coefficients the
  potential leaves out) at random points: the same model;
* the pointwise log-likelihood of ``--draws`` draws (the ``log_likelihood`` group):
  the package's numpy form (``bayes_eval.pooled.likelihood``) against
  ``pm.compute_log_likelihood`` of the observed model, the time of each and their
  largest difference.

Why it matters: an observed distribution lets PyMC derive the pointwise
log-likelihood and the predictive draws, where the package keeps a numpy form beside the
graph; it is worth it only where it does not make sampling slower (issue 75 allows 10%).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

warnings.simplefilter("ignore")

EVALUATIONS = 2_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs")
    parser.add_argument("--from", dest="input_format", default="metr")
    parser.add_argument("--draws", type=int, default=4_000)
    args = parser.parse_args()

    import pymc as pm
    import pytensor
    import pytensor.tensor as pt
    import xarray as xr

    from bayes_eval.counts.layout import layout_of
    from bayes_eval.evidence.runs import read_runs
    from bayes_eval.fit import usable_rows
    from bayes_eval.messages import collected
    from bayes_eval.pooled.likelihood import log_likelihood
    from bayes_eval.pooled.models import _agent_concentration, _coords, _mean, end_to_end_model
    from bayes_eval.specs import load_spec

    spec = load_spec("end_to_end_pooled")
    evidence = read_runs(args.runs, args.input_format)
    with collected():
        layout = layout_of(evidence, usable_rows(evidence, spec), spec)
    potential = end_to_end_model(layout, spec)
    with pm.Model(coords=_coords(layout)) as observed:
        log_mu, log_1mu = _mean(pm, "mu", spec.priors["mean"], "agent")
        log_kappa = _agent_concentration(pm, spec)
        a, b = pt.exp(log_mu + log_kappa), pt.exp(log_1mu + log_kappa)
        agent = layout.pair_agent
        pm.BetaBinomial(
            "successes", n=layout.e2e_n, alpha=a[agent], beta=b[agent], observed=layout.e2e_k
        )
    print(f"{len(layout.pairs)} pairs, {len(layout.agents)} agents")

    point = potential.initial_point()
    rng = np.random.default_rng(0)
    functions, times = {}, {}
    for name, model in (("potential", potential), ("observed", observed)):
        logp = model.logp()
        grad = pt.grad(logp, model.value_vars)
        functions[name] = pytensor.function(model.value_vars, logp)
        both = pytensor.function(model.value_vars, [logp, *grad])
        inputs = [point[v.name] for v in model.value_vars]
        both(*inputs)
        start = time.perf_counter()
        for _ in range(EVALUATIONS):
            both(*inputs)
        times[name] = (time.perf_counter() - start) / EVALUATIONS
        print(f"{name:>9}: log density and gradient {1e6 * times[name]:.1f} us an evaluation")
    print(f"observed / potential: {times['observed'] / times['potential']:.2f}")
    differences = []
    for _ in range(5):
        at = [
            point[v.name] + rng.normal(0, 0.5, np.shape(point[v.name]))
            for v in potential.value_vars
        ]
        differences.append(functions["observed"](*at) - functions["potential"](*at))
    spread = np.ptp(differences)
    print(
        f"the two log densities differ by {differences[0]:.6f} (spread {spread:.1e}): one constant"
    )

    mu_logit = rng.normal(-2, 1, (1, args.draws, len(layout.agents)))
    kappa = np.exp(rng.normal(1, 1, (1, args.draws, len(layout.agents))))
    dims = ("chain", "draw", "agent")
    post = xr.Dataset(
        {"mu": (dims, 1 / (1 + np.exp(-mu_logit))), "kappa": (dims, kappa)},
        coords={"chain": [0], "draw": np.arange(args.draws), "agent": layout.agents},
    )
    start = time.perf_counter()
    ours = log_likelihood(post, layout, spec)["successes"].values
    numpy_time = time.perf_counter() - start
    raw = xr.Dataset(
        {"mu_logit": (("chain", "draw", "mu_logit_agent"), mu_logit), "kappa": (dims, kappa)},
        coords={"chain": [0], "draw": np.arange(args.draws), "agent": layout.agents},
    )
    start = time.perf_counter()
    derived = pm.compute_log_likelihood(
        xr.DataTree.from_dict({"posterior": raw}), model=observed, progressbar=False
    )
    pymc_time = time.perf_counter() - start
    theirs = derived["log_likelihood"]["successes"].values
    print(
        f"pointwise log-likelihood of {args.draws} draws: numpy {numpy_time:.2f} s, "
        f"pm.compute_log_likelihood {pymc_time:.2f} s (ratio {pymc_time / numpy_time:.1f}); "
        f"largest difference {np.max(np.abs(theirs - ours)):.1e}"
    )


if __name__ == "__main__":
    main()
