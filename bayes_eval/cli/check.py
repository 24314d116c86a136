"""``bayes-eval check RUN_DIR``: every MCMC diagnostic of a pooled fit."""

from __future__ import annotations

from pathlib import Path

from bayes_eval.cli.terminal import diagnostics_text, terminal_table


def arguments(commands) -> None:
    """The command's flags."""
    check = commands.add_parser("check", help="print the MCMC diagnostics of a fit's --out folder")
    check.add_argument("run_dir", help="folder written by bayes-eval fit --out")
    check.add_argument("--debug", action="store_true", help="show tracebacks")


def run(args) -> int:
    from bayes_eval.results.posterior import load_posterior

    path = Path(args.run_dir)
    posterior = load_posterior(path)
    if not posterior.is_mcmc:
        print(
            f"{path}: model {posterior.spec.name} is exact (conjugate): no MCMC, nothing to "
            "diagnose"
        )
        return 0
    diagnostics = posterior.diagnostics
    table = terminal_table(diagnostics.table, digits=lambda x: f"{x:.4g}")
    ebfmi = ", ".join(f"{e:.2f}" for e in diagnostics.ebfmi)
    print(f"{path}: model {posterior.spec.name}\n\n{table}\n")
    print(f"divergences: {diagnostics.divergences}; E-BFMI per chain: {ebfmi}")
    print(diagnostics_text(posterior))
    return 0 if diagnostics.ok else 1
