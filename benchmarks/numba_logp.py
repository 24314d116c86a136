"""The compile route that could meet the speed targets, measured on one model: a pooled
model's log density and gradient written as numba functions of its data, cached on disk.

Run from the repository root (needs the package installed):

    python benchmarks/numba_logp.py [--points 200]

``end_to_end_pooled`` (each agent's mean task rate ``mu ~ Beta(1, 1)``, sampled as its
logit, and concentration ``kappa ~ LogNormal(2.3, 1.5)``, sampled as its log; each task's
successes Beta-Binomial) is written below by hand, its gradient too, as module-level numba
functions of the parameters and the table's arrays (agent of each task, successes,
failures, trials). The compiled code does not depend on the table's size, and numba keeps
it in its disk cache. The script

1. compares the log density and gradient with PyMC's (the model ``bayes_eval`` builds
   for the shipped pooled example) at POINTS random parameter values: the log density's
   difference (a constant, which does not change the draws, and its range over the
   points) and the gradient's largest relative difference;
2. fits the example's end-to-end rows with nutpie (4 chains x (1000 tune + 2000 draws),
   the package's sampler settings for this model) through ``nutpie``'s Python-function
   interface in two new processes, the first with an empty numba cache (cold: it
   compiles) and the second finding it (warm: it loads), and prints each one's seconds
   to import, to compile or load, and to sample, and whether the two processes drew the
   same bytes;
3. runs the warm process once more on a table of other sizes (the tasks doubled), which
   must load, not compile.

The package's way, compiling PyTensor's graph with numba anew in every process, takes
20 to 40 s before sampling starts (``benchmarks/compile_cache.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numba
import numpy as np

warnings.simplefilter("ignore")

LOG_2PI = math.log(2.0 * math.pi)
MEAN_PRIOR = (1.0, 1.0)  # Beta shapes of mu
CONCENTRATION_PRIOR = (2.3, 1.5)  # LogNormal mu, sigma of kappa
SAMPLER = dict(draws=2000, tune=1000, chains=4, target_accept=0.8, seed=20240901)


@numba.njit(cache=True, nogil=True)
def digamma(x):
    """``psi(x)`` for ``x > 0``: the recurrence up to 10, then the asymptotic series."""
    result = 0.0
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f * (1 / 132)))))
    return result + math.log(x) - 0.5 / x - series


@numba.njit(cache=True, nogil=True)
def softplus(x):
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


@numba.njit(cache=True, nogil=True)
def logp_and_gradient(theta, agent, k, failures, n):
    """``theta`` = the agents' ``logit mu``, then their ``log kappa``."""
    n_agents = theta.size // 2
    grad = np.zeros(theta.size)
    a, b = np.empty(n_agents), np.empty(n_agents)
    mean_a, mean_b = MEAN_PRIOR
    c_mu, c_sigma = CONCENTRATION_PRIOR
    log_beta_prior = math.lgamma(mean_a) + math.lgamma(mean_b) - math.lgamma(mean_a + mean_b)
    total = 0.0
    for i in range(n_agents):
        x, y = theta[i], theta[n_agents + i]
        log_p, log_1mp = -softplus(-x), -softplus(x)
        p = math.exp(log_p)
        total += mean_a * log_p + mean_b * log_1mp - log_beta_prior  # the density of logit mu
        grad[i] += mean_a * (1.0 - p) - mean_b * p
        z = (y - c_mu) / c_sigma  # LogNormal kappa on the log scale: Normal(log kappa)
        total += -math.log(c_sigma) - 0.5 * LOG_2PI - 0.5 * z * z
        grad[n_agents + i] -= z / c_sigma
        a[i], b[i] = math.exp(log_p + y), math.exp(log_1mp + y)
    d_a, d_b = np.zeros(n_agents), np.zeros(n_agents)
    for t in range(k.size):
        g = agent[t]
        a_g, b_g = a[g], b[g]
        total += (
            math.lgamma(k[t] + a_g)
            + math.lgamma(failures[t] + b_g)
            + math.lgamma(a_g + b_g)
            - math.lgamma(a_g)
            - math.lgamma(b_g)
            - math.lgamma(n[t] + a_g + b_g)
        )
        shared = digamma(a_g + b_g) - digamma(n[t] + a_g + b_g)
        d_a[g] += digamma(k[t] + a_g) - digamma(a_g) + shared
        d_b[g] += digamma(failures[t] + b_g) - digamma(b_g) + shared
    for i in range(n_agents):
        p = math.exp(-softplus(-theta[i]))
        # a = mu kappa, b = (1 - mu) kappa: da/dlogit = a (1 - p), db/dlogit = -b p
        grad[i] += d_a[i] * a[i] * (1.0 - p) - d_b[i] * b[i] * p
        grad[n_agents + i] += d_a[i] * a[i] + d_b[i] * b[i]
    return total, grad


def example_table():
    """The shipped pooled example's end-to-end rows as arrays: the agent of each task
    (0, 1, ...), successes, failures and trials."""
    import pandas as pd

    from bayes_eval.resources import shipped_datasets

    table = pd.read_csv(shipped_datasets()["example_pooled"])
    rows = table[table["method"] == "end_to_end"].sort_values(["agent", "task"])
    agent = rows["agent"].astype("category").cat.codes.to_numpy(dtype=np.int64)
    k = rows["successes"].to_numpy(dtype=float)
    n = rows["trials"].to_numpy(dtype=float)
    return agent, k, n - k, n


def compare_with_pymc(points: int) -> tuple[float, float, float]:
    """The median and the range of the log density's difference from PyMC's model of the
    same table (``bayes_eval``'s builder), and the gradient's largest relative
    difference, at ``points`` random values."""
    from bayes_eval.counts.layout import build_layout
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.fit import usable_rows
    from bayes_eval.messages import collected
    from bayes_eval.pooled.models import end_to_end_model
    from bayes_eval.resources import shipped_datasets
    from bayes_eval.specs import load_spec

    spec = load_spec("end_to_end_pooled")
    evidence = load_evidence(shipped_datasets()["example_pooled"])
    with collected():  # the rows the model leaves out are noted, not printed
        layout = build_layout(usable_rows(evidence, spec), spec, evidence.clusters)
    model = end_to_end_model(layout, spec)
    logp = model.compile_logp(jacobian=True)
    dlogp = model.compile_dlogp(jacobian=True)
    agent = np.asarray(layout.pair_agent, dtype=np.int64)
    k = np.asarray(layout.e2e_k, dtype=float)
    n = np.asarray(layout.e2e_n, dtype=float)
    rng = np.random.default_rng(0)
    differences, worst_grad = [], 0.0
    size = len(layout.agents)
    for _ in range(points):
        theta = rng.normal(0.0, 3.0, 2 * size)
        point = {"mu_logit": theta[:size], "kappa_log__": theta[size:]}
        value, grad = logp_and_gradient(theta, agent, k, n - k, n)
        differences.append(value - logp(point))
        ref_grad = dlogp(point)
        worst_grad = max(worst_grad, float(np.max(np.abs(grad - ref_grad) / np.abs(ref_grad))))
    return np.median(differences), np.ptp(differences), worst_grad


def child(copies: int, out: str) -> None:
    """Fit the example (its tasks repeated ``copies`` times) in this process; print one
    JSON line of seconds and save the draws to ``out``."""
    start = time.perf_counter()
    import nutpie
    from nutpie.compiled_pyfunc import from_pyfunc

    imported = time.perf_counter()
    agent, k, failures, n = (np.tile(values, copies) for values in example_table())
    logp_and_gradient(np.zeros(4), agent, k, failures, n)  # compiles, or loads from the cache
    loaded = time.perf_counter()
    size = int(agent.max()) + 1

    def make_logp():
        return lambda x, **data: logp_and_gradient(x, agent, k, failures, n)

    def make_expand(seed1, seed2, chain):
        return lambda x, **data: {"mu_logit": x[:size].copy(), "kappa_log__": x[size:].copy()}

    compiled = from_pyfunc(
        2 * size,
        make_logp,
        make_expand,
        [np.dtype("float64")] * 2,
        [(size,), (size,)],
        ["mu_logit", "kappa_log__"],
        # PyMC's initial point: logit mu 0, log kappa at LogNormal(2.3, 1.5)'s mean's log
        make_initial_point_fn=lambda seed: np.r_[np.zeros(size), np.full(size, 3.425)],
    )
    trace = nutpie.sample(compiled, progress_bar=False, **SAMPLER)
    sampled = time.perf_counter()
    np.save(out, np.stack([trace["posterior"][v].values for v in ("mu_logit", "kappa_log__")]))
    divergences = int(trace["sample_stats"]["diverging"].sum())
    figures = dict(
        imports=imported - start,
        load=loaded - imported,
        sample=sampled - loaded,
        divergences=divergences,
    )
    print(json.dumps(figures))


def measure(cache: str, copies: int, out: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    command = [sys.executable, __file__, "--child", str(copies), out]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    offset, spread, worst_grad = compare_with_pymc(args.points)
    print(
        f"against PyMC's model at {args.points} points: the log density differs by "
        f"{offset:.2e} (a constant: its range over the points {spread:.1e}), the gradient "
        f"within {worst_grad:.1e} relative"
    )
    with tempfile.TemporaryDirectory() as folder:
        cache = os.path.join(folder, "numba")
        runs = {
            "cold": (1, os.path.join(folder, "cold.npy")),
            "warm": (1, os.path.join(folder, "warm.npy")),
            "warm, tasks doubled": (2, os.path.join(folder, "doubled.npy")),
        }
        print(f"{'process':<20} {'import s':>8} {'compile/load s':>14} {'sample s':>8}")
        for name, (copies, out) in runs.items():
            figures = measure(cache, copies, out)
            print(
                f"{name:<20} {figures['imports']:>8.2f} {figures['load']:>14.2f} "
                f"{figures['sample']:>8.2f}  ({figures['divergences']} divergences)"
            )
        same = np.array_equal(np.load(runs["cold"][1]), np.load(runs["warm"][1]))
    print(f"cold and warm processes drew the same bytes: {same}")


if __name__ == "__main__":
    main()
