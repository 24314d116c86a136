"""The sampler's settings: one frozen object, checked when made (``bayes_eval.settings``)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

import bayes_eval
from bayes_eval import InputError, SamplerSettings
from bayes_eval.specs import load_spec


def test_defaults_and_numpy_numbers_are_plain_python():
    settings = SamplerSettings(draws=np.int64(300), target_accept=np.float32(0.5))
    assert (settings.engine, settings.tune, settings.chains) == ("nutpie", 1000, 4)
    assert type(settings.draws) is int and settings.draws == 300
    assert type(settings.target_accept) is float and settings.target_accept == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.draws = 10


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (dict(engine="stan"), "engine: 'stan' is not one of exact, nutpie, pymc, numpyro, auto"),
        (dict(draws=0), "draws: 0 must lie between 1 and 1000000"),
        (dict(draws=True), "draws: True is not a whole number"),
        (dict(draws=2.0), "draws: 2.0 is not a whole number"),
        (dict(tune=-1), "tune: -1 must lie between 0 and 1000000"),
        (dict(chains=65), "chains: 65 must lie between 1 and 64"),
        (dict(target_accept=1), "target_accept: 1 must lie strictly between 0 and 1"),
        (dict(target_accept=float("nan")), "target_accept: nan must lie strictly between 0"),
        (dict(target_accept="0.9"), "target_accept: '0.9' is not a number"),
        (dict(thin=0), "thin: 0 must lie between 1 and 1000"),
        (dict(draws=10, thin=11), "thin: 11 is more than the 10 draws"),
        (dict(engine="exact", thin=2), "thin: exact draws are independent"),
    ],
)
def test_a_bad_setting_is_refused_by_name(given, message):
    with pytest.raises(InputError) as info:
        SamplerSettings(**given)
    assert str(info.value) == message or str(info.value).startswith(message)
    with pytest.raises(InputError, match="^" + message.split(":")[0]):  # and when updated
        SamplerSettings().updated(given)


def test_updated_replaces_what_it_names_and_nothing_else():
    spec = load_spec("hierarchical").sampler
    assert spec == SamplerSettings("nutpie", 2000, 1000, 4, 0.95)  # its [sampler] table
    assert spec.updated(None) is spec
    assert spec.updated({"draws": 50}) == SamplerSettings("nutpie", 50, 1000, 4, 0.95)
    whole = SamplerSettings(draws=7)
    assert spec.updated(whole) is whole
    with pytest.raises(InputError, match="sampler: unknown setting 'seed'; allowed: engine"):
        spec.updated({"seed": 3})  # a fit's seed is its own argument


def test_exact_specs_keep_4000_draws_and_refuse_mcmc_settings():
    spec = load_spec("phuong2024")
    assert (spec.sampler.engine, spec.draws, spec.seed) == ("exact", 4000, 20240901)
    with pytest.raises(InputError, match="^draws: MCMC settings apply to pooled models only"):
        bayes_eval.fit(bayes_eval.resources.example_evidence(), spec, sampler={"draws": 10})


def test_settings_given_whole_are_the_ones_a_pooled_fit_runs():
    table = pd.DataFrame(
        dict(task=["a", "b", "c"], method="end_to_end", successes=[0, 3, 9], trials=10)
    )
    settings = SamplerSettings(draws=150, tune=150, chains=2, target_accept=0.85)
    posterior = bayes_eval.fit(table, "end_to_end_pooled", sampler=settings, seed=3)
    assert posterior.tree["posterior"].sizes["chain"] == 2
    # the first attempt's settings (a refit, if any, doubles the draws and says so)
    provenance = posterior.summary()["provenance"].iloc[0]
    assert "nutpie (cpu) 2 chains x 150 draws (tune 150, target_accept 0.85)" in provenance


def test_pymc_names_mean_what_they_mean_in_pymc():
    assert SamplerSettings().updated({"nuts_sampler": "pymc"}).engine == "pymc"
    with pytest.raises(
        InputError, match=r"^sampler: engine is given twice \(as nuts_sampler and engine\)$"
    ):
        SamplerSettings().updated({"nuts_sampler": "nutpie", "engine": "pymc"})
    example = bayes_eval.resources.example_evidence()
    seeded = bayes_eval.fit(example, "phuong2024", sampler={"random_seed": 11})
    assert seeded.seed == 11  # an exact fit takes it too: its draws' seed
    assert bayes_eval.fit(example, "phuong2024", seed=11).draws.equals(seeded.draws)
    with pytest.raises(InputError, match="^random_seed: 12 and seed 11: give the seed once"):
        bayes_eval.fit(example, "phuong2024", seed=11, sampler={"random_seed": 12})


def test_a_thinned_fit_keeps_the_last_of_every_thin_draws_and_checks_every_draw():
    table = pd.DataFrame(
        dict(task=["a", "b", "c"], method="end_to_end", successes=[0, 3, 9], trials=10)
    )
    settings = SamplerSettings(draws=900, tune=300, chains=4, target_accept=0.85)
    whole = bayes_eval.fit(table, "end_to_end_pooled", sampler=settings, seed=3)
    thinned = bayes_eval.fit(
        table, "end_to_end_pooled", sampler=dataclasses.replace(settings, thin=3), seed=3
    )
    assert whole.diagnostics.ok and thinned.diagnostics.ok  # each the first attempt
    every, kept = whole.tree["posterior"], thinned.tree["posterior"]
    assert kept.sizes["draw"] == 300 and thinned.tree["sample_stats"].sizes["draw"] == 300
    sampled = [name for name in kept.data_vars if name.startswith(("mu", "kappa", "logit"))]
    assert sampled
    for name in sampled:  # the same chains, one draw in three kept: the 3rd, 6th, ...
        np.testing.assert_array_equal(kept[name].values, every[name].values[:, 2::3], err_msg=name)
    # the divergences and E-BFMI are the whole chains', the ESS the kept draws'
    assert thinned.diagnostics.divergences == whole.diagnostics.divergences
    assert thinned.diagnostics.ebfmi == whole.diagnostics.ebfmi
    provenance = thinned.summary()["provenance"].iloc[0]
    assert "4 chains x 900 draws (tune 300, target_accept 0.85), one draw in 3 kept" in provenance
