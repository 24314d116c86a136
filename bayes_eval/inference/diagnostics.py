"""MCMC diagnostics on ArviZ (``arviz_stats``), with the thresholds in ``constants``.

``diagnose`` returns one pass/fail flag, a table per checked quantity, and one
message per failed check that says what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayes_eval.constants import (
    ANY_NEVER_SOLVED,
    EBFMI_MIN,
    ESS_MIN,
    NEVER_SHARE,
    RETRY_TARGET_ACCEPT,
    RHAT_MAX,
)

__all__ = ["Diagnostics", "diagnose"]


@dataclass(frozen=True)
class Diagnostics:
    """Outcome of the checks.

    Attributes
    ----------
    ok : bool
        Every check passed.
    messages : tuple of str
        One actionable line per failed check.
    table : pandas.DataFrame
        One row per checked scalar: ``variable``, ``r_hat``, ``ess_bulk``, ``ess_tail``, ``ok``.
    divergences : int
    ebfmi : tuple of float
        Per chain.
    advice : str
        The one change most likely to make a failed fit pass ('' when it passed).
    """

    ok: bool
    messages: tuple
    table: pd.DataFrame
    divergences: int
    ebfmi: tuple
    advice: str = ""

    def to_dataset(self):
        """The diagnostics as a Dataset (a fit keeps them beside its draws: making them
        again from the draws takes seconds at a thousand cells)."""
        import json

        import xarray as xr

        table = self.table
        data = xr.Dataset(
            {
                "r_hat": ("quantity", table["r_hat"].to_numpy(dtype=float)),
                "ess_bulk": ("quantity", table["ess_bulk"].to_numpy(dtype=float)),
                "ess_tail": ("quantity", table["ess_tail"].to_numpy(dtype=float)),
                "ok": ("quantity", table["ok"].to_numpy(dtype=bool)),
                "ebfmi": ("chain", np.array(self.ebfmi, dtype=float)),
            },
            coords={"quantity": table["variable"].to_numpy(dtype=str)},
        )
        data.attrs = {
            "passed": int(self.ok),
            "messages": json.dumps(list(self.messages)),
            "divergences": int(self.divergences),
            "advice": self.advice,
        }
        return data

    @classmethod
    def from_dataset(cls, data) -> Diagnostics:
        """The diagnostics ``to_dataset`` kept."""
        import json

        table = pd.DataFrame(
            {
                "variable": data["quantity"].values.astype(str).astype(object),
                "r_hat": data["r_hat"].values,
                "ess_bulk": data["ess_bulk"].values,
                "ess_tail": data["ess_tail"].values,
                "ok": data["ok"].values.astype(bool),
            }
        )
        attrs = data.attrs
        return cls(
            bool(attrs["passed"]),
            tuple(json.loads(attrs["messages"])),
            table,
            int(attrs["divergences"]),
            tuple(float(x) for x in data["ebfmi"].values),
            str(attrs["advice"]),
        )

    def cell_ok(self, agent: str, task: str) -> bool:
        """Whether every check the bound of ``(agent, task)`` rests on passed
        (``failed_for``)."""
        return bool(self.cells_ok([(agent, task)])[0])

    def cells_ok(self, pairs) -> np.ndarray:
        """``cell_ok`` of each ``(agent, task)`` of ``pairs``, at once."""
        return np.array([not text for text in self.failed_for(pairs)], dtype=bool)

    def failed_for(self, pairs) -> list[str]:
        """Per ``(agent, task)`` of ``pairs``: the failed checks its bound rests on, in
        words ('' where none failed). A bound rests on the sampler as a whole (its
        divergences and E-BFMI), on its own ``p_task`` (a pair whose ``p_task`` was not
        checked did not pass), and on every quantity of its agent, its task or the pair,
        and of the model as a whole (one whose label names no agent, task or pair: a
        scale, a mean, a coefficient); not on another agent's or task's."""
        pairs = list(pairs)
        sampler = []
        if self.divergences:
            sampler.append(f"{self.divergences} divergent transitions")
        low = [i for i, e in enumerate(self.ebfmi) if e < EBFMI_MIN]
        if low:
            sampler.append(f"E-BFMI below {EBFMI_MIN} in chain(s) {', '.join(map(str, low))}")
        agents, tasks = {a for a, _ in pairs}, {t for _, t in pairs}
        own = {f"{a}, {t}" for a, t in pairs}
        whole, by_agent, by_task, by_pair, checked = [], {}, {}, {}, set()
        for row in self.table.itertuples():
            name, _, inner = row.variable.partition("[")
            inner = inner[:-1] if inner.endswith("]") else inner
            if name == "p_task":
                checked.add(inner)
            if row.ok:
                continue
            text = _failed_text(row)
            if inner in own:
                by_pair.setdefault(inner, []).append(text)
            elif inner in agents:
                by_agent.setdefault(inner, []).append(text)
            elif inner in tasks:
                by_task.setdefault(inner, []).append(text)
            else:
                whole.append(text)
        out = []
        for agent, task in pairs:
            key = f"{agent}, {task}"
            texts = sampler + whole + by_agent.get(agent, []) + by_task.get(task, [])
            texts = texts + by_pair.get(key, [])
            if key not in checked:
                texts.append(f"p_task[{key}] (not checked)")
            out.append(_listed(texts))
        return out


def _failed_text(row) -> str:
    """A failed quantity and the checks it failed, ``ability[a] (bulk ESS 357)``."""
    failed = []
    if not row.r_hat <= RHAT_MAX:
        failed.append(f"R-hat {row.r_hat:.3f}")
    for value, what in ((row.ess_bulk, "bulk"), (row.ess_tail, "tail")):
        if not value >= ESS_MIN:
            failed.append(f"{what} ESS {value:.0f}")
    return f"{row.variable} ({', '.join(failed)})"


def _listed(texts: list[str], shown: int = 3) -> str:
    """Up to ``shown`` of ``texts``, and how many more."""
    more = f" and {len(texts) - shown} more" if len(texts) > shown else ""
    return "; ".join(texts[:shown]) + more


# The free variables behind a parameter sampled in parts (``{name}_{form}``); where
# ``name`` itself is recorded, it stands for them (rank-normalised R-hat and ESS do not
# change under a monotone map) and carries their labels.
PARTS = ("_logit", "_z", "_upper", "_lower")


# The most draws the checks copy at once (32 MB): a 5,046-pair crossed fit's p_task is
# 6,250 pairs x 4,000 draws, and two whole copies of it were 400 MB of its peak.
CHECKED_VALUES = 2**22
# The rates drawn back exactly for every posterior draw (``p_task`` is checked on its own),
# and whether an agent has tasks it never solves (``never_share`` is then drawn back too).
DRAWN_BACK = ("p_task", "p_milestone", "p_step", "bypass_task", ANY_NEVER_SOLVED)


def sampled_variables(posterior) -> list[str]:
    """The sampled parameters of an MCMC posterior in their own space: not nutpie's
    unconstrained copies (named ``*__``), nor the rates drawn back exactly
    (``DRAWN_BACK``), nor the parts of a parameter that is recorded whole (``PARTS``)."""

    def part(v):
        return any(v.endswith(s) and v.removesuffix(s) in posterior for s in PARTS)

    drawn_back = DRAWN_BACK + ((NEVER_SHARE,) if ANY_NEVER_SOLVED in posterior else ())
    return [
        v
        for v in posterior.data_vars
        if v not in drawn_back and not v.endswith("__") and not part(v)
    ]


def diagnose(tree) -> Diagnostics:
    """Check an MCMC fit: R-hat, bulk and tail ESS, divergences and E-BFMI (``arviz_stats``).

    Parameters
    ----------
    tree : xarray.DataTree
        With a ``posterior`` group (draws over ``(chain, draw, ...)``; the sampled
        parameters and ``p_task``, where present, are checked, NaN elements, absent
        cells, skipped) and a ``sample_stats`` group with ``diverging`` and ``energy``
        (of every draw sampled, where the posterior keeps one in ``thin``).
    """
    import arviz_stats

    posterior = tree["posterior"].to_dataset()
    var_names = [*sampled_variables(posterior), *(["p_task"] if "p_task" in posterior else [])]
    table = _checked(posterior[var_names])
    table = table.assign(
        ok=lambda t: (
            (t["r_hat"] <= RHAT_MAX) & (t["ess_bulk"] >= ESS_MIN) & (t["ess_tail"] >= ESS_MIN)
        )
    )
    stats = tree["sample_stats"].to_dataset()
    ebfmi = tuple(float(x) for x in arviz_stats.bfmi(stats["energy"]).values)
    divergences = int(stats["diverging"].values.sum())
    messages = _messages(table, divergences, ebfmi)
    target = stats.attrs.get("target_accept")
    advice = _advice(table, divergences, ebfmi, target, stats.sizes["draw"]) if messages else ""
    return Diagnostics(not messages, tuple(messages), table, divergences, ebfmi, advice)


def _checked(data) -> pd.DataFrame:
    """R-hat and bulk and tail ESS of every scalar of ``data`` (labelled as
    ``arviz_stats.summary`` labels them, ``p_task[a, t]``), each variable's elements a
    block of at most ``CHECKED_VALUES`` draws at once (``chain_stats.convergence``:
    arviz_stats' statistics over whole arrays); elements with no draws (cells without
    evidence) are skipped."""
    from arviz_base import rcParams
    from arviz_base.labels import BaseLabeller
    from arviz_base.sel_utils import xarray_sel_iter

    from bayes_eval.inference.chain_stats import convergence

    labeller = BaseLabeller()
    tables = []
    for name in data.data_vars:  # a variable at a time: a crossed fit's are 100 MB
        variable = data[name].transpose("chain", "draw", ...)
        dims, shape = variable.dims[2:], variable.shape[2:]
        labels, at = [], []  # each element's place in C order, in the order ArviZ labels them
        for _, sel, isel in xarray_sel_iter(variable, skip_dims={"chain", "draw"}):
            labels.append(labeller.make_label_flat(name, sel, isel))
            at.append(np.ravel_multi_index(tuple(isel[d] for d in dims), shape) if dims else 0)
        flat = variable.values.reshape(*variable.shape[:2], -1)
        block = max(1, CHECKED_VALUES // max(1, flat.shape[0] * flat.shape[1]))
        for start in range(0, len(at), block):  # a block of scalars at a time: a copy each
            values = np.moveaxis(flat[..., at[start : start + block]], -1, 0)  # (scalar, ...)
            present = ~np.isnan(values).all(axis=(1, 2))
            # as arviz_stats.summary's tail ESS: the quantiles of its interval
            r_hat, ess_bulk, ess_tail = convergence(values[present], rcParams["stats.ci_prob"])
            tables.append(
                pd.DataFrame(
                    {
                        "variable": np.array(labels[start : start + block], dtype=object)[present],
                        "r_hat": r_hat,
                        "ess_bulk": ess_bulk,
                        "ess_tail": ess_tail,
                    }
                )
            )
    if not tables:
        empty = np.zeros(0)
        return pd.DataFrame(
            {"variable": empty.astype(object), "r_hat": empty, "ess_bulk": empty, "ess_tail": empty}
        )
    return pd.concat(tables, ignore_index=True)


def _advice(table, divergences, ebfmi, target_accept, draws) -> str:
    """The one change most likely to help: a smaller step where the sampler diverged (or,
    already at the retry's target_accept, a better-informed model), else more draws."""
    if divergences or min(ebfmi, default=1.0) < EBFMI_MIN:
        if target_accept is None or float(target_accept) < RETRY_TARGET_ACCEPT:
            return f"raise --target-accept to {RETRY_TARGET_ACCEPT:g}"
        return (
            f"the funnel persists at target_accept {RETRY_TARGET_ACCEPT:g}: give the "
            "concentrations more informative priors (a copy of the spec, its "
            "[priors.*_concentration]) or add trials to the tasks that fail"
        )
    return f"run longer: --draws {4 * int(draws)}"


def _messages(table, divergences, ebfmi) -> list[str]:
    out = []
    worst = table.sort_values("r_hat", ascending=False).head(1)
    high = table[table["r_hat"] > RHAT_MAX]
    if len(high):
        out.append(
            f"R-hat above {RHAT_MAX} for {len(high)} quantities (worst {worst['variable'].iloc[0]}"
            f": {worst['r_hat'].iloc[0]:.3f}): chains disagree; run longer (--tune, --draws) "
            "or look for multimodality"
        )
    for column, what in (("ess_bulk", "bulk"), ("ess_tail", "tail")):
        low = table[table[column] < ESS_MIN]
        if len(low):
            lowest = low.sort_values(column).iloc[0]
            out.append(
                f"{what} ESS below {ESS_MIN} for {len(low)} quantities (lowest "
                f"{lowest['variable']}: {lowest[column]:.0f}): increase --draws"
                + ("; the upper bound, a tail quantile, is unreliable" if what == "tail" else "")
            )
    if divergences:
        out.append(
            f"{divergences} divergent transitions: raise --target-accept (e.g. to 0.95 or "
            "0.99); if they persist the posterior has a funnel the model must be "
            "reparameterised for"
        )
    low_chains = [i for i, e in enumerate(ebfmi) if e < EBFMI_MIN]
    if low_chains:
        out.append(
            f"E-BFMI below {EBFMI_MIN} in chain(s) {', '.join(map(str, low_chains))}: the "
            "sampler explores the energy poorly; reparameterise or use more informative "
            "hyperpriors"
        )
    return out
