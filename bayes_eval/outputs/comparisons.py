"""The report's comparisons of models: the milestone method's bound beside the model's,
and the models ranked by how well each predicts a count left out, with the model whose
bounds the report uses."""

from __future__ import annotations

import pandas as pd

from bayes_eval.registry import model_of
from bayes_eval.results.summary import format_number

__all__ = ["milestone_comparison", "ranking_sections"]


def milestone_comparison(
    posterior, table, level: float, milestone_method, assumption=None
) -> pd.DataFrame:
    """The milestone method's upper bound (``milestone_method``, its fit to the same
    evidence) beside this model's, per (agent, task) with milestone runs, and why they
    differ (with the bypass the fit found, from ``assumption``, where it has one); empty
    where there is no milestone method to compare (``checks.fitted.FitChecks``)."""
    if milestone_method is None:
        return pd.DataFrame()
    spec = posterior.spec
    theirs = milestone_method.summary(level=level).set_index(["agent", "task"])["upper"]
    bypasses = {}
    if assumption is not None and len(assumption):
        found = assumption[assumption["bypass"].notna()]
        bypasses = found.set_index(["agent", "task"])["bypass"].to_dict()
    rows = []
    for row in table.itertuples():
        if (row.agent, row.task) not in theirs.index:
            continue
        reason = model_of(spec).differs
        if (row.agent, row.task) in bypasses:
            reason += f" (bypass ≈ {format_number(bypasses[(row.agent, row.task)])})"
        rows.append(
            {
                "agent": row.agent,
                "task": row.task,
                f"milestone method upper ({level:g})": format_number(theirs[(row.agent, row.task)]),
                f"{spec.name} upper ({level:g})": (
                    "no bound" if pd.isna(row.upper) else format_number(row.upper)
                ),
                "why they differ": reason,
            }
        )
    return pd.DataFrame(rows)


HOLDOUT_TEXT = (
    "The command bayes-eval compare EVIDENCE --models ... --holdout end_to_end compares "
    "models by the end-to-end outcomes they predict, whatever rows they read."
)


def ranking_sections(posterior, comparison) -> list:
    """Which model the report's bounds come from: the models compared by how well each
    predicts an observed cell left out, their ranking, and where this model stands."""
    if comparison is None:
        return []
    name = posterior.spec.name
    sections = [("h2", "Which model the bounds come from")]
    if isinstance(comparison, str):
        text = (
            f"This report's bounds are {name}'s. No other model could be ranked beside it "
            f"by leaving one cell out: {comparison}."
        )
        return [*sections, ("p", f"{text} {HOLDOUT_TEXT}")]
    table = comparison.table
    best = table.index[0]
    standing = ""
    if best != name:
        standing = f" {best} predicts better than {name}: consider its bounds beside these."
    shown = pd.DataFrame(
        {
            "model": table.index,
            "elpd (leave one cell out)": table["elpd"].map(lambda x: f"{x:.1f}"),
            "se": table["se"].map(lambda x: f"{x:.1f}"),
            "below the best": table["elpd_diff"].map(lambda x: f"{0.0 - x:.1f}"),
            "its se": table["dse"].map(lambda x: f"{x:.1f}"),
            "stacking weight": table["weight"].map(lambda x: f"{x:.2f}"),
            "Pareto k > 0.7": table["high_k"],
        }
    )
    text = (
        f"This report's bounds are {name}'s. The models below were fitted to the same "
        "evidence and ranked by how well each predicts an observed count left out of its "
        f"fit (exactly for exact models, by PSIS-LOO for MCMC ones), on the "
        f"{int(table['cells'].iloc[0])} cells they share. {comparison.sentence}{standing}"
    )
    if comparison.unscored:
        text += " Not ranked: " + "; ".join(comparison.unscored.values()) + f". {HOLDOUT_TEXT}"
    return [*sections, ("p", text), ("table", shown)]
