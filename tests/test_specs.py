"""Shipped specs load; malformed specs are located errors with suggestions."""

import pytest

from bayes_eval import InputError, load_spec, shipped_specs
from bayes_eval.specs import spec_from_toml

BASE = """schema_version = 1
name = "x"
kind = "milestone"
[priors.milestone]
dist = "Beta"
alpha = 1
beta = 1
reason = "uniform"
"""


@pytest.mark.parametrize(
    "name", ["end_to_end", "phuong2024", "mats2024", "ecr2024", "phuong_chain"]
)
def test_shipped_specs_load(name):
    spec = load_spec(name)
    assert spec.name == name and name in shipped_specs()
    assert all(prior.reason for prior in spec.priors.values())
    assert spec.level == 0.975


def test_published_priors():
    assert load_spec("phuong2024").priors["milestone"].label() == "Beta(0, 0)"
    assert load_spec("mats2024").priors["milestone"].label() == "Beta(1, 1)"
    assert load_spec("ecr2024").priors["step"].label() == "Beta(0.02, 0.02)"


def test_the_chance_of_no_task_never_solved_needs_the_share():
    text = load_spec("end_to_end_shared").text
    start = text.index("[priors.never_solvable]")
    without = text[:start] + text[text.index("[priors.all_solvable]") :]
    with pytest.raises(InputError) as info:
        spec_from_toml(without, "s.toml")
    assert str(info.value).startswith("s.toml: [priors.all_solvable] needs [priors.never_solvable]")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BASE + "colour = 1\n", "unknown key 'colour'"),
        (BASE.replace("kind", "knd"), "unknown key 'knd' (did you mean 'kind'?)"),
        (BASE.replace('"milestone"', '"milestones"', 1), "kind 'milestones' is unknown"),
        (BASE.replace("alpha = 1", "alpah = 1"), "unknown key 'alpah' (did you mean 'alpha'?)"),
        (BASE.replace("alpha = 1", "alpha = -1"), "alpha and beta must be >= 0"),
        (BASE.replace('"Beta"', '"Gamma"'), 'dist must be "Beta"'),
        (BASE.replace('reason = "uniform"', 'reason = ""'), "'reason' must say why"),
        (BASE.replace("schema_version = 1", "schema_version = 9"), "schema_version 9"),
        (BASE + "[report]\nlevel = 1.2\n", "level: 1.2 must lie strictly between 0.5 and 1"),
        (BASE + "[report]\nlevel = 0.025\n", "level: 0.025 must lie strictly between 0.5 and 1"),
        (BASE + "[report]\nlevel = nan\n", "'level' must be a finite number, got nan"),
        (BASE + "[report]\nlevl = 0.9\n", "unknown key 'levl' (did you mean 'level'?)"),
        (BASE + '[sampler]\nengine = "magic"\n', "engine 'magic' does not fit milestone/none"),
        (BASE + "[sampler]\ndraws = 0\n", "[sampler] draws: 0 must lie between 1 and 1000000"),
        (
            BASE.replace('kind = "milestone"\n', 'kind = "milestone"\npooling = "tasks"\n'),
            "pooling 'tasks' is not available for kind milestone",
        ),
        ("name = = 3", "not valid TOML"),
        (BASE.replace("alpha = 1", 'alpha = "one"'), "'alpha' must be a float"),
    ],
)
def test_bad_specs(text, message):
    with pytest.raises(InputError, match=None) as info:
        spec_from_toml(text, "s.toml")
    assert message in str(info.value)
    assert str(info.value).startswith("s.toml")
