"""Prior sensitivity: the bounds under the prior family against closed forms, the
importance reweighting against a known posterior, a spec changed in Python saved as
itself, and the command line's marks."""

import dataclasses
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayes_eval
from bayes_eval.checks.sensitivity import prior_sensitivity, reweighted_bounds
from bayes_eval.prior_family import beta_family, prior_family
from bayes_eval.specs import Prior

LEVEL = 0.975
ZERO_OF_20 = pd.DataFrame(
    dict(agent=["a"], task=["t"], method=["end_to_end"], successes=[0], trials=[20])
)


def test_zero_of_twenty_every_member_matches_its_closed_form_and_the_verdict_flips():
    posterior = bayes_eval.fit(ZERO_OF_20, "end_to_end")
    found = prior_sensitivity(posterior, 0.15)
    uppers = found.bounds.set_index("member")["upper"]
    # Beta(a, b) prior, 0 of 20: the posterior is Beta(a, b + 20)
    assert uppers["spec"] == pytest.approx(stats.beta.ppf(LEVEL, 1, 21), rel=1e-10)
    assert uppers["jeffreys = permissive end_to_end"] == pytest.approx(
        stats.beta.ppf(LEVEL, 0.5, 20.5), rel=1e-10
    )
    assert uppers["sceptical end_to_end"] == pytest.approx(stats.beta.ppf(LEVEL, 2, 22), rel=1e-10)
    # the figures by hand: 0.161, 0.117, 0.219
    assert [round(uppers[m], 3) for m in uppers.index] == [0.161, 0.117, 0.219]
    pair = found.pairs.iloc[0]
    assert pair["prior_sensitive"]
    lower, upper = stats.beta.ppf([1 - LEVEL, LEVEL], 0.5, 20.5)
    jeffreys = f"jeffreys = permissive end_to_end (bounds {lower:.4g} to {upper:.4g})"
    assert f"below under {jeffreys}" in pair["flipped_by"]
    assert "undecided under the spec's prior (bounds " in pair["flipped_by"]
    # every member probably decides after that many more trials: the sceptical member,
    # Beta(2, 22) now, certifies 0.15 after all-failure runs by its own closed form
    assert pair["robust_trials"] > 0
    summary = found.mark(posterior.summary(threshold=0.15))
    assert bool(summary["prior_sensitive"].iloc[0])
    assert "PRIOR-SENSITIVE at τ = 0.15" in summary["provenance"].iloc[0]


def test_a_verdict_that_every_member_shares_is_not_marked():
    posterior = bayes_eval.fit(ZERO_OF_20, "end_to_end")
    found = prior_sensitivity(posterior, 0.5)  # every bound is below 0.5
    assert not found.pairs["prior_sensitive"].any()
    assert found.note("a", "t") == ""


def test_the_family_of_a_uniform_and_of_haldanes_prior():
    family = {m.name: m for m in prior_family(bayes_eval.load_spec("end_to_end"))}
    assert list(family) == ["spec", "jeffreys = permissive end_to_end", "sceptical end_to_end"]
    assert family["sceptical end_to_end"].changed["end_to_end"].params == {
        "alpha": 2.0,
        "beta": 2.0,
    }
    # phuong2024's milestone prior is Haldane's Beta(0, 0): no pseudo-counts to scale
    names = [m.name for m in prior_family(bayes_eval.load_spec("phuong2024"))]
    assert "uniform" in names and "jeffreys" in names
    assert not any(
        name.startswith(("sceptical milestone", "permissive milestone")) for name in names
    )
    assert beta_family(1, 1) == {
        "given": (1, 1),
        "jeffreys = permissive": (0.5, 0.5),
        "sceptical": (2, 2),
    }


def test_lognormal_and_normal_moves():
    spec = bayes_eval.load_spec("crossed")
    family = {m.name: m.changed for m in prior_family(spec)}
    scale = spec.priors["ability_scale"].params
    assert (
        family["sceptical ability_scale"]["ability_scale"].params["mu"]
        == scale["mu"] - scale["sigma"]
    )
    assert (
        family["permissive ability_scale"]["ability_scale"].params["mu"]
        == scale["mu"] + scale["sigma"]
    )
    kappa = spec.priors["cluster_concentration"].params
    moved = family["sceptical cluster_concentration"]["cluster_concentration"].params
    assert moved["mu"] == kappa["mu"] + kappa["sigma"]
    mean = spec.priors["ability_mean"].params
    assert family["permissive ability_mean"]["ability_mean"].params["sigma"] == 2 * mean["sigma"]


def test_reweighting_draws_of_a_known_posterior_gives_the_other_priors_posterior():
    # draws of Beta(1 + k, 1 + n - k) (the uniform prior's posterior), reweighted to
    # Jeffreys' prior, against Jeffreys' posterior Beta(0.5 + k, 0.5 + n - k)
    rng = np.random.default_rng(3)
    k, n = 2, 30
    p = rng.beta(1 + k, 1 + n - k, size=(4, 4000))
    log_ratio = stats.beta(0.5, 0.5).logpdf(p) - stats.beta(1, 1).logpdf(p)
    bounds, pareto_k = reweighted_bounds(p.reshape(-1, 1), log_ratio, LEVEL)
    truth = stats.beta(0.5 + k, 0.5 + n - k)
    assert pareto_k < 0.7
    # Monte Carlo error of a 0.975 quantile from 16,000 weighted draws: about 0.002
    assert bounds["upper"][0] == pytest.approx(truth.ppf(LEVEL), abs=0.006)
    assert bounds["mean"][0] == pytest.approx(truth.mean(), abs=0.002)
    assert bounds["sd"][0] == pytest.approx(truth.std(), abs=0.002)


def test_a_pooled_fit_reports_each_bound_under_the_family_with_its_power_scaling():
    frame = pd.DataFrame(
        dict(
            agent=["a"] * 4,
            task=["t1", "t2", "t3", "t4"],
            method=["end_to_end"] * 4,
            successes=[0, 1, 0, 4],
            trials=[10, 10, 1, 10],
        )
    )
    posterior = bayes_eval.fit(
        frame, "end_to_end_pooled", sampler={"draws": 500, "tune": 500, "chains": 2}, seed=1
    )
    found = prior_sensitivity(posterior, 0.3)
    assert set(found.bounds["how"]) <= {"fitted", "reweighted", "refitted", "not trusted"}
    assert found.pairs["psense"].notna().all() and (found.pairs["psense"] >= 0).all()
    reweighted = found.bounds[found.bounds["how"] == "reweighted"]
    assert len(reweighted) and (reweighted["pareto_k"] <= 0.7).all()
    # each pair's range over the family holds the spec's own bound
    pairs = found.pairs
    assert (pairs["upper_low"] <= pairs["upper"]).all() and (
        pairs["upper"] <= pairs["upper_high"]
    ).all()


def test_a_prior_changed_in_python_or_in_a_file_is_saved_as_itself(tmp_path):
    spec = bayes_eval.load_spec("end_to_end")
    # numpy's numbers, as a user's code may hand them over
    jeffreys = Prior("Beta", {"alpha": np.float64(0.5), "beta": np.float64(0.5)}, "Jeffreys")
    changed = dataclasses.replace(spec, priors={"end_to_end": jeffreys})
    text = bayes_eval.load_spec("end_to_end").source
    file_spec = tmp_path / "jeffreys.toml"
    source = open(text).read().replace("alpha = 1.0\nbeta = 1.0", "alpha = 0.5\nbeta = 0.5")
    file_spec.write_text(source)
    for model in (changed, str(file_spec)):
        posterior = bayes_eval.fit(ZERO_OF_20, model)
        path = posterior.to_netcdf(tmp_path / "posterior.nc")
        loaded = bayes_eval.load_posterior(path)
        assert loaded.spec.priors["end_to_end"].params == {"alpha": 0.5, "beta": 0.5}
        assert "Beta(0.5, 0.5)" in loaded.summary()["provenance"].iloc[0]
        assert loaded.summary(level=LEVEL)["upper"].iloc[0] == pytest.approx(
            stats.beta.ppf(LEVEL, 0.5, 20.5), rel=1e-10
        )
    # a spec read from its file keeps its text, comments and all
    assert bayes_eval.load_posterior(path).spec.text == source


def test_fit_sensitivity_on_the_command_line(tmp_path):
    table = tmp_path / "zero.csv"
    ZERO_OF_20.to_csv(table, index=False)
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayes_eval",
            "fit",
            str(table),
            "--model",
            "end_to_end",
            "--threshold",
            "0.15",
            "--sensitivity",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "1 of 1 verdicts change within it" in done.stdout
    bounds = pd.read_csv(out / "sensitivity.csv")
    assert len(bounds) == 3
    summary = pd.read_csv(out / "summary.csv")
    assert bool(summary["prior_sensitive"].iloc[0])
    report = (out / "report.md").read_text()
    assert "How much of each bound is the prior" in report
    assert "PRIOR-SENSITIVE" in report


def test_plan_gives_the_trials_under_each_prior_of_the_family():
    from bayes_eval.plan import zero_success_family

    trials = zero_success_family(0.15, LEVEL, (1.0, 1.0))
    # uniform: smallest n with 1 - 0.025^(1/(n+1)) <= 0.15
    assert trials["given"] == 22
    for name, (a, b) in beta_family(1, 1).items():
        n = trials[name]
        assert stats.beta.ppf(LEVEL, a, b + n) <= 0.15 < stats.beta.ppf(LEVEL, a, b + n - 1)


@pytest.mark.parametrize("name", sorted(bayes_eval.shipped_specs()))
def test_every_shipped_spec_written_anew_reads_back_as_itself(name):
    from bayes_eval.specs import spec_from_toml, spec_text

    spec = bayes_eval.load_spec(name)
    written = spec_text(dataclasses.replace(spec, text=""))
    assert written != spec.text  # written anew, not the file's text
    assert dataclasses.replace(spec_from_toml(written, spec.source), text=spec.text) == spec


@pytest.mark.slow  # a refit of a pooled model, about 2 minutes
def test_a_member_the_weights_cannot_reach_is_refitted(monkeypatch):
    from bayes_eval.checks import sensitivity

    frame = pd.DataFrame(
        dict(
            agent=["a"] * 3,
            task=["t1", "t2", "t3"],
            method=["end_to_end"] * 3,
            successes=[0, 2, 1],
            trials=[10, 10, 10],
        )
    )
    small = {"draws": 300, "tune": 300, "chains": 2}
    posterior = bayes_eval.fit(frame, "end_to_end_pooled", sampler=small, seed=4)
    # every member's weights taken as untrustworthy: each is refitted, and its bounds
    # are those of a fit of the member's spec, made directly
    monkeypatch.setattr(sensitivity, "KHAT_LIMIT", -np.inf)
    refits = []

    def refit(spec):
        refits.append(spec)
        return bayes_eval.fit(frame, spec, sampler=small, seed=4)

    found = prior_sensitivity(posterior, 0.3, refit=refit)
    members = found.bounds[found.bounds["member"] != "spec"]
    assert set(members["how"]) == {"refitted"} and len(refits) == members["member"].nunique()
    direct = bayes_eval.fit(frame, refits[0], sampler=small, seed=4).summary()
    first = members[members["member"] == members["member"].iloc[0]]
    assert list(first["upper"]) == list(direct["upper"])
    # without a way to refit, the member's bounds stay empty and the pair says which
    found = prior_sensitivity(posterior, 0.3)
    assert found.pairs["untrusted"].str.len().gt(0).all()


@pytest.mark.slow
def test_every_bound_of_the_shipped_pooled_example_reports_its_power_scaling(tmp_path):
    evidence = bayes_eval.shipped_datasets()["example_pooled"]
    done = bayes_eval.run(evidence, "hierarchical", threshold=0.1, sensitivity=True)
    summary = done.summary[done.summary["upper"].notna()]
    assert summary["prior_psense"].notna().all() and (summary["prior_psense"] >= 0).all()
    assert summary["prior_sensitive"].notna().all()
    assert (summary["prior_upper_low"] <= summary["upper"]).all()


@pytest.mark.parametrize("name", sorted(bayes_eval.shipped_specs()))
def test_every_member_of_every_shipped_family_is_a_valid_spec_saved_as_itself(name):
    from bayes_eval.specs import spec_from_toml, spec_text

    spec = bayes_eval.load_spec(name)
    members = prior_family(spec)
    assert members[0].name == "spec" and members[0].spec.priors == spec.priors
    for member in members[1:]:
        # one change at a time (uniform and Jeffreys: every Beta prior at once)
        assert member.changed and all(spec.priors[r] != p for r, p in member.changed.items())
        back = spec_from_toml(spec_text(member.spec), spec.source)
        assert back.priors == member.spec.priors
    changes = [m.changed for m in members]
    assert all(changes.index(c) == i for i, c in enumerate(changes))  # no member twice
