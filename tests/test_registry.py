"""The model registry: one entry per model, and a new model is one entry and one builder.

The example of ``docs/models.md`` ("Adding a model") is run here as it stands: a toy
exact model, added by one ``register`` call and one builder, fits, summarises and appears
in the report with no other change. Its numbers are checked against scipy's Beta
quantiles of the hardest milestone's counts.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bayes_eval import registry
from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
from bayes_eval.families import FAMILIES
from bayes_eval.messages import collected
from bayes_eval.registry import EXACT, MODELS, Model, register, resolve
from bayes_eval.specs import load_spec, shipped_specs

ROOT = Path(__file__).resolve().parents[1]


def docs_example() -> str:
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Adding a model", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.fixture
def own_registry():
    """The registry, restored to the shipped entries after the test (every module reads
    the one table, so it is changed in place)."""
    shipped = dict(MODELS)
    yield MODELS
    MODELS.clear()
    MODELS.update(shipped)


def test_every_shipped_spec_has_an_entry_and_every_builder_imports():
    for name in shipped_specs():
        spec = load_spec(name)
        model = registry.model_of(spec)
        assert (model.kind, model.pooling) == (spec.kind, spec.pooling)
        assert set(model.priors) <= set(spec.priors)
    for model in MODELS.values():
        assert callable(model.build())
        assert model.clustered_builder is None or callable(model.build(clustered=True))
        # each names a family whose object exists; the exact one is the conjugate pooling's
        assert model.family in FAMILIES
        assert (model.family == EXACT) == (model.pooling == "none")


def test_a_model_is_registered_once(own_registry):
    shipped = next(iter(own_registry.values()))
    with pytest.raises(ValueError, match="registered already"):
        register(shipped)


def test_a_builder_is_a_callable_or_a_reference():
    assert resolve("scipy.stats:beta") is stats.beta
    assert resolve(len) is len


def test_the_docs_example_adds_a_model_that_fits_summarises_and_reports(
    own_registry, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").symlink_to(ROOT / "data")
    namespace = {}
    exec(compile(docs_example(), "docs/models.md Adding a model", "exec"), namespace)
    assert ("weakest_milestone", "none") in own_registry
    table = namespace["posterior"].summary(threshold=0.05)
    counts = pd.read_csv(ROOT / "data" / "mats2024_counts.csv")
    counts = counts[counts["method"] == MILESTONE_METHOD]
    for row in table.itertuples():
        rows = counts[counts["task"] == row.task]  # one agent: the table names none
        means = (rows["successes"] + 1) / (rows["trials"] + 2)
        hardest = rows.loc[means.idxmin()]
        k, n = hardest["successes"], hardest["trials"]
        assert row.upper == pytest.approx(stats.beta.ppf(0.975, 1 + k, 1 + n - k), rel=1e-9)
        assert row.prob_above == pytest.approx(stats.beta.sf(0.05, 1 + k, 1 + n - k), rel=1e-9)
        assert f"milestone {hardest['step']} of {len(rows)}: {k}/{n}" in row.provenance
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "**Weakest milestone.** P is at most the rate of its hardest milestone" in markdown
    assert all(task in markdown for task in table["task"])


def test_the_registry_decides_which_rows_and_runs_a_model_takes(own_registry, tmp_path):
    """An entry's ``uses``, ``requires`` and ``clustered`` are what ``fit`` reads: a toy
    end-to-end model that claims no clustered runs is refused them, and its notes say it
    left the milestone rows out."""
    import bayes_eval
    from bayes_eval import InputError
    from bayes_eval.exact.builders import end_to_end

    register(
        Model(
            "toy", "none", "exact", uses=(END_TO_END,), priors=("end_to_end",), builder=end_to_end
        )
    )
    spec = tmp_path / "toy.toml"
    spec.write_text(
        'schema_version = 1\nname = "toy"\nkind = "toy"\n[priors.end_to_end]\ndist = "Beta"\n'
        'alpha = 1.0\nbeta = 1.0\nreason = "uniform"\n'
    )
    with collected() as notes:
        posterior = bayes_eval.fit(ROOT / "data" / "example_evidence.csv", spec)
    assert any("model toy (toy) does not use them" in note for note in notes)
    upper = posterior.summary()["upper"].dropna().to_numpy()
    assert np.all((upper > 0) & (upper < 1))
    runs = tmp_path / "runs.csv"
    runs.write_text("agent,task,success,seed\nA,t,1,s1\nA,t,0,s1\nA,t,0,s2\n")
    evidence = bayes_eval.read_runs(runs, cluster="seed")
    with pytest.raises(InputError, match=r"model toy \(toy/none\) treats every run"):
        bayes_eval.fit(evidence, spec)
