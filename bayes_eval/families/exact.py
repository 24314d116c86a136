"""The exact family: conjugate posteriors, built per pair (``bayes_eval.exact.builders``)."""

from __future__ import annotations

import numpy as np

from bayes_eval.constants import END_TO_END
from bayes_eval.errors import InputError
from bayes_eval.evidence.pairs import note_left_out
from bayes_eval.messages import collected, note
from bayes_eval.registry import EXACT, model_of

__all__ = ["ExactFamily"]


class ExactFamily:
    """Exact models: each pair's posterior a mixture of products of Betas (``Family``)."""

    name = EXACT
    fits_agents_apart = True

    def fit(self, evidence, by_pair, spec, options):
        """Every pair's ``Estimate`` by the model's builder (all pairs at once where the
        entry has a table builder), through the grader where the evidence is audited;
        pairs without an estimate and rows no estimate rests on are noted."""
        from bayes_eval.exact.builders import Estimates, grade
        from bayes_eval.results.fits import ExactPosterior

        model = model_of(spec)
        if model.table_builder is not None:
            estimates = model.build_table()(by_pair, spec)
        else:
            build = model.build()
            estimates = Estimates.stack(
                [
                    build(agent, task, by_method, spec)
                    for (agent, task), by_method in by_pair.items()
                ]
            )
        if evidence.audit is not None:
            estimates = grade(estimates, by_pair, evidence.audit, spec)
        _refuse_heavy(estimates, evidence)
        without = np.flatnonzero(estimates.reason != "")
        if without.size:
            named = [
                f"task '{estimates.task[i]}' (agent '{estimates.agent[i]}'): {estimates.reason[i]}"
                for i in without[:3]
            ]
            more = f"; and {without.size - 3} more" if without.size > 3 else ""
            note(f"{without.size} task(s) without an estimate: {'; '.join(named)}{more}")
        # rows of the fitted tasks that no estimate rests on
        read = by_pair.table.index[by_pair.positions()]
        note_left_out(
            evidence,
            evidence.table.index.isin(read.difference(estimates.used)),
            f"{spec.name} rests those tasks on other evidence (see provenance)",
        )
        return ExactPosterior.from_estimates(
            estimates, spec, evidence, level=options.level, seed=options.seed
        )

    def prior_only(self, evidence, by_pair, spec, options):
        """The fit itself: an exact fit is cheap, and draws its prior from its spec."""
        return self.fit(evidence, by_pair, spec, options)

    def read_back(self, stored, by_pair, path):
        """The exact fit ``stored`` holds; refused where its ``conjugate`` group (each
        pair's Beta shapes, point values and provenance) is not the one its evidence,
        spec, level and seed give, fitted again (exact fits are cheap)."""
        from bayes_eval.results.fits import ExactPosterior
        from bayes_eval.results.posterior import package_version
        from bayes_eval.settings import FitOptions

        posterior = ExactPosterior(stored.tree, stored.spec, stored.evidence)
        options = FitOptions(level=posterior.level, seed=posterior.seed)
        with collected():  # the notes were said when it was fitted
            again = self.fit(posterior.evidence, by_pair, posterior.spec, options)
        stored, derived = posterior.group("conjugate"), again.group("conjugate")
        for name, values in derived.data_vars.items():
            kept = stored.get(name)
            same = kept is not None and kept.shape == values.shape
            if same and values.dtype.kind == "f":
                same = np.array_equal(kept.values, values.values, equal_nan=True)
            elif same:
                same = kept.values.astype(str).tolist() == values.values.astype(str).tolist()
            if not same:
                why = "the file was edited or damaged after it was written"
                written_by = posterior.written_by
                if written_by != package_version():
                    why += f", or bayes_eval {written_by}, which wrote it, fitted otherwise"
                raise InputError(
                    f"{path}: the stored posterior ({name}) is not the one its evidence and "
                    f"model {posterior.spec.name} give: {why}; fit again"
                )
        return posterior

    def agent_level(self, spec):
        return None

    def variable_roles(self, spec):
        return {}

    def report_paragraphs(self, model):
        return [(model.title, model.text)] if model.title else []

    def sbc_setup(self, evidence, evidence_rows, spec, **_):
        """Refused: an exact posterior is closed-form, with no sampler to calibrate."""
        raise InputError(
            f"sbc: model {spec.name} is exact (conjugate): its posterior is closed-form, "
            "checked against exact references, with no sampler to calibrate; SBC checks "
            "the pooled and crossed models"
        )

    def clustered_spec(self, spec):
        return "end_to_end_pooled" if model_of(spec).uses == (END_TO_END,) else "hierarchical"


def _refuse_heavy(estimates, evidence) -> None:
    """Refuse, before any summary, a pair whose exact posterior is larger than the exact
    engine summarises in about a minute (``EXACT_MAX_RUNS`` runs, ``EXACT_MAX_FACTORS``
    factors), naming it and the alternatives."""
    from bayes_eval.exact.products import EXACT_MAX_FACTORS, EXACT_MAX_RUNS

    present = ~np.isnan(estimates.alpha)
    factors, runs = present.sum(axis=(1, 2)), present.any(axis=2).sum(axis=1)
    over = np.flatnonzero((runs > EXACT_MAX_RUNS) | (factors > EXACT_MAX_FACTORS))
    if over.size:
        i = over[0]
        raise InputError(
            f"{evidence.source}: task '{estimates.task[i]}' (agent '{estimates.agent[i]}'): its "
            f"exact posterior is a product of {factors[i]:,} factors over {runs[i]:,} run(s), "
            f"more than the exact engine summarises in about a minute (at most "
            f"{EXACT_MAX_RUNS:,} runs and {EXACT_MAX_FACTORS:,} factors a task); fit a pooled "
            "model (ecr_pooled for expert steps, hierarchical for milestones), or split the "
            "task's runs or milestones into tables within those limits"
        )
