"""The refit ladder's choices (``bayes_eval.inference.retry``) on fits' diagnostics as the
gate reports them: what is refitted next, in which form, with which settings."""

from dataclasses import dataclass

import pandas as pd

from bayes_eval import SamplerSettings
from bayes_eval.constants import RETRY_TARGET_ACCEPT
from bayes_eval.inference.diagnostics import Diagnostics
from bayes_eval.inference.retry import _next_plans


@dataclass(frozen=True)
class Form:
    """A model's form as the ladder reads it: its key, and the forms to refit it in."""

    name: str

    def key(self):
        return (self.name,)

    def refits(self, diagnostics):
        return [self, Form("other" if self.name == "first" else "first")]


def diagnostics(divergences=0, r_hat=1.0, ess=1000.0):
    """A fit's diagnostics with one quantity of this R-hat and ESS."""
    table = pd.DataFrame(dict(variable=["x"], r_hat=[r_hat], ess_bulk=[ess], ess_tail=[ess]))
    messages = []
    if divergences:
        messages.append(f"{divergences} divergent transitions")
    if r_hat > 1.01:
        messages.append("R-hat above 1.01")
    if ess < 400:
        messages.append("bulk ESS below 400")
    return Diagnostics(not messages, tuple(messages), table, divergences, (0.9, 0.9))


SPEC = SamplerSettings(draws=500, tune=500, target_accept=0.95)


def test_a_refit_after_a_fit_that_diverged_takes_smaller_steps_every_time():
    # the first fit only short of draws: its refits keep its target, with twice the draws
    fits = [({}, diagnostics(r_hat=1.02), Form("first"), SPEC)]
    plans = _next_plans(fits, [], [10.0], SPEC)
    assert [(form.name, s.draws, s.target_accept) for form, s in plans] == [
        ("first", 1000, 0.95),
        ("other", 1000, 0.95),
    ]
    # the refit in the same form diverged: the refit left, in the other form, at 0.99
    fits.append(({}, diagnostics(divergences=1), *plans[0]))
    plans = _next_plans(fits, plans[1:], [10.0, 20.0], SPEC)
    assert [(form.name, s.draws, s.target_accept) for form, s in plans] == [
        ("other", 1000, RETRY_TARGET_ACCEPT)
    ]


def test_the_fit_refitted_longer_is_the_best_of_those_short_only_of_draws():
    """A fit with one divergence ranks before one with a high R-hat and a short ESS (fewer
    failed checks), but more draws cannot mend a divergence: the one short of draws is
    refitted, twice the most draws any fit had, in its form and settings."""
    fits = [
        ({}, diagnostics(divergences=1), Form("first"), SPEC),
        ({}, diagnostics(r_hat=1.02, ess=300.0), Form("other"), SPEC),
    ]
    plans = _next_plans(fits, [], [10.0, 10.0], SPEC)
    assert [(form.name, s.draws, s.target_accept) for form, s in plans] == [("other", 1000, 0.95)]
    # none short only of draws: no refit for more draws
    fits[1] = ({}, diagnostics(divergences=2, r_hat=1.02), Form("other"), SPEC)
    assert _next_plans(fits, [], [10.0, 10.0], SPEC) == []
