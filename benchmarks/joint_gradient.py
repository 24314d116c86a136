"""What the joint model's end-to-end likelihood costs per gradient, against `hierarchical`
on the same table, in one run.

Run from the repository root (needs the package installed):

    python benchmarks/joint_gradient.py [--seed 0] [--repeats 7]

Three simulated tables (``bayes_eval.checks.simulate.random_design``): a capture-the-flag table
(8 agents x 40 tasks, one trial per milestone and per end-to-end run; the shape of the
agentic benchmarks the joint model is for), and the first and the 23rd random designs of
the robustness study (seed 0: 9 agents x 33 tasks, 3 trials per cell, end-to-end rows on
185 pairs; 9 agents x 43 tasks, 10 trials per cell, end-to-end rows on 329 pairs).
Each is built as ``fit`` builds it, with ``joint`` and with ``hierarchical``, and the
log-density-and-gradient function is compiled with PyTensor's numba backend (nutpie's).
Prints, per table and model, the number of parameters and graph nodes, the first call
(the numba compile; PyTensor caches it on disk, so a second run is faster) and the time
per gradient (the fastest of ``--repeats`` batches of 200 calls), and the ratio of the
joint model's gradient time to the hierarchical model's.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

warnings.simplefilter("ignore")


def tables(seed: int) -> dict:
    from bayes_eval.checks.simulate import CAPTURE_THE_FLAG, random_design

    ctf, _ = random_design(np.random.default_rng(seed), CAPTURE_THE_FLAG)
    rng = np.random.default_rng(seed)
    designs = [random_design(rng)[0] for _ in range(23)]
    return {
        "capture-the-flag, 1 trial": ctf,
        "robustness design 1": designs[0],
        "robustness design 23": designs[22],
    }


def gradient_cost(table: pd.DataFrame, model_name: str, repeats: int) -> dict:
    import pytensor

    from bayes_eval.counts.layout import build_layout, choose_form
    from bayes_eval.evidence.table import load_evidence
    from bayes_eval.fit import usable_rows
    from bayes_eval.inference.engines import fresh_compile
    from bayes_eval.registry import model_of
    from bayes_eval.specs import load_spec

    spec = load_spec(model_name)
    layout = build_layout(usable_rows(load_evidence(table), spec), spec)
    model = model_of(spec).build()(layout, spec, choose_form(layout, spec))
    inputs = model.value_vars
    logp = model.logp()
    with fresh_compile():  # as the package compiles it
        function = pytensor.function(inputs, [logp, *pytensor.grad(logp, inputs)], mode="NUMBA")
    point = model.initial_point()
    args = [point[v.name] for v in inputs]
    start = time.perf_counter()
    function(*args)
    first = time.perf_counter() - start
    batches = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(200):
            function(*args)
        batches.append((time.perf_counter() - start) / 200)
    return dict(
        parameters=sum(np.size(a) for a in args),
        nodes=len(function.maker.fgraph.apply_nodes),
        first_call_s=first,
        gradient_ms=1e3 * min(batches),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rows = []
    for name, table in tables(args.seed).items():
        cost = {m: gradient_cost(table, m, args.repeats) for m in ("hierarchical", "joint")}
        for model, row in cost.items():
            ratio = row["gradient_ms"] / cost["hierarchical"]["gradient_ms"]
            rows.append(dict(table=name, model=model, **row, vs_hierarchical=ratio))
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
