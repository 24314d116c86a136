"""A fit read back from its file is the same tree; run folders of an older version are
refused with one line that says how to refit."""

import json
from pathlib import Path

import pandas as pd
import pytest

import bayes_eval
from bayes_eval import InputError, load_posterior
from bayes_eval.cli.main import main
from bayes_eval.results.posterior import READ_FORMATS, package_version

READS = f"it reads formats {' and '.join(map(str, READ_FORMATS))}"

OLD_RUN = Path(__file__).parent / "data" / "run_v0.1.0"


def test_a_run_folder_of_version_0_1_is_refused_with_the_refit_command():
    with pytest.raises(InputError) as caught:
        load_posterior(OLD_RUN)
    message = str(caught.value)
    assert "\n" not in message
    assert "written by bayes_eval 0.1.0 in file format 1" in message
    assert f"bayes_eval {package_version()} does not read ({READS})" in message
    assert message.endswith(
        "refit with: bayes-eval fit evidence.csv --model end_to_end --seed 7 --level 0.975 "
        "--out NEW_FOLDER"
    )


def test_the_refit_command_reproduces_the_old_exact_numbers(tmp_path, monkeypatch):
    """Exact fits are deterministic: the refit gives the old summary's numbers."""
    monkeypatch.chdir(tmp_path)
    Path("evidence.csv").write_text("task,method,successes,trials\ntask_a,end_to_end,2,10\n")
    old = pd.read_csv(OLD_RUN / "summary.csv")
    new = bayes_eval.fit("evidence.csv", "end_to_end", seed=7, level=0.975).summary()
    numbers = ["mean", "median", "sd", "lower", "upper", "log10_upper", "cp_upper"]
    pd.testing.assert_frame_equal(new[numbers], old[numbers])


@pytest.mark.parametrize("command", ["check", "calibrate", "plan", "report"])
def test_every_command_that_reads_a_run_folder_refuses_it(capsys, command, tmp_path):
    extra = {
        "check": [],
        "calibrate": ["--truth", str(OLD_RUN / "summary.csv")],
        "plan": ["--task", "task_a", "--threshold", "0.1"],
        "report": ["--threshold", "0.1", "--out", str(tmp_path / "r")],
    }[command]
    status = main([command, str(OLD_RUN), *extra])
    out, err = capsys.readouterr()
    assert status == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "written by bayes_eval 0.1.0" in err and "Traceback" not in err


def _milestone_table(rng, pairs: int) -> pd.DataFrame:
    """Milestone counts with every edge: all successes (a point mass at 1 under Haldane's
    prior), one trial, one milestone, several."""
    rows = []
    for n in range(pairs):
        steps = int(rng.integers(1, 4))
        for step in range(1, steps + 1):
            trials = int(rng.integers(1, 5))
            successes = trials if n % 3 == 0 else int(rng.integers(1, trials + 1))
            rows.append(("agent-a", f"task-{n}", "milestone", step, successes, trials))
    return pd.DataFrame(rows, columns=["agent", "task", "method", "step", "successes", "trials"])


@pytest.mark.parametrize("threshold", [None, 0.2, 1e-6])
def test_the_summary_of_all_cells_at_once_is_each_cells_own_summary(threshold):
    """The summary, computed column by column, against each cell's own ``BetaProduct``
    solved alone, and its Clopper-Pearson bound against scipy: the same numbers to the
    last bit, on sparse end-to-end counts (zero, all and one-trial cells) and on milestone
    products with point masses, one factor and several."""
    import numpy as np
    from scipy import stats

    from bayes_eval.exact.products import beta_product, summarise_products

    rng = np.random.default_rng(11)
    trials = rng.integers(1, 4, 60)
    end_to_end = pd.DataFrame(
        {
            "agent": [f"agent-{n % 4}" for n in range(60)],
            "task": [f"task-{n // 4}" for n in range(60)],
            "method": "end_to_end",
            "successes": rng.binomial(trials, 0.3),
            "trials": trials,
        }
    )
    level = 0.9
    probs = np.array([1 - level, 0.5, level])
    x_points = np.array([] if threshold is None else [-np.log(threshold)])
    for table, model in [(end_to_end, "end_to_end"), (_milestone_table(rng, 30), "phuong2024")]:
        posterior = bayes_eval.fit(table, model, level=level)
        summary = posterior.summary(threshold=threshold)
        engines = set()
        for row in summary.itertuples():
            i = posterior.coords["agent"].index(row.agent)
            j = posterior.coords["task"].index(row.task)
            product = beta_product(posterior.values("alpha")[i, j], posterior.values("beta")[i, j])
            alone = summarise_products([product], probs, x_points)[0]
            engines.add(alone.engine)
            assert (row.mean, row.sd) == product.moments()
            assert row.upper == np.exp(-alone.x_quantiles[0])
            assert row.median == np.exp(-alone.x_quantiles[1])
            assert row.lower == np.exp(-alone.x_quantiles[2])
            assert row.log10_upper == -alone.x_quantiles[0] / np.log(10)
            assert f"quantiles: {alone.engine} (" in row.provenance
            if threshold is not None:
                assert row.prob_above == alone.x_cdf[0]
            if model == "end_to_end":
                k, n = posterior.values("cp_successes")[i, j], posterior.values("cp_trials")[i, j]
                expected = 1.0 if k == n else stats.beta.ppf(level, k + 1, n - k)
                assert row.cp_upper == expected
        assert "beta" in engines and (model == "end_to_end" or {"point", "grid"} <= engines)


def _crossed_with_covariates():
    """METR-like runs: one run per cell, cells missing, release dates and task lengths
    (time_horizon's covariates), families as task groups."""
    from test_native import _sparse_end_to_end

    return _sparse_end_to_end()


READ_BACK = [
    pytest.param("end_to_end", "example_evidence", {}, id="end_to_end"),
    pytest.param("phuong_chain", "example_evidence", {}, id="phuong_chain"),
    pytest.param("hierarchical", "example_pooled", {}, id="hierarchical"),
    pytest.param("end_to_end_shared", "example_pooled", {}, id="end_to_end_shared"),
    pytest.param("crossed", "example_pooled", {}, id="crossed"),
    pytest.param(
        "time_horizon",
        _crossed_with_covariates,
        {"predict": ["new,release_date=2026-01-01"]},
        id="time_horizon",
    ),
]


@pytest.mark.parametrize(("model", "table", "options"), READ_BACK)
def test_a_fit_read_back_is_the_same_tree_from_a_file_of_what_it_keeps(
    model, table, options, tmp_path
):
    """The file holds what the fit keeps (an exact fit its Beta shapes, an MCMC fit its
    sampled draws and the sampler's statistics; nothing made of them), and
    ``load_posterior`` makes the rest again: every group of the tree is identical (values,
    coordinates and attributes), and so is the summary."""
    import xarray as xr

    data = (
        bayes_eval.load_evidence(table(), keep_columns=True)
        if callable(table)
        else bayes_eval.load_evidence(bayes_eval.shipped_datasets()[table], sum_duplicates=True)
    )
    mcmc = model not in ("end_to_end", "phuong_chain")
    sampler = {"draws": 300, "tune": 300, "chains": 2} if mcmc else None
    posterior = bayes_eval.fit(data, model, sampler=sampler, seed=4, **options)
    tree = posterior.tree
    path = posterior.to_netcdf(tmp_path / "posterior.nc")
    with xr.open_datatree(path, engine="h5netcdf") as stored:
        kept = set(stored.children)
        if model in ("crossed", "time_horizon"):  # no departure: its readers draw them again
            assert "cell_z" not in stored["posterior"].data_vars
    made = {"posterior_predictive", "log_likelihood", "prior", "prior_predictive", "log_prior"}
    assert not kept & made
    assert ("posterior" in kept) == mcmc and ("sample_stats" in kept) == mcmc
    again = bayes_eval.load_posterior(path)
    # a fit of its own kind, made whole by its family from what the file holds
    assert type(again) is type(posterior) and again.is_mcmc == mcmc
    read = again.tree
    assert set(read.children) == set(tree.children)
    for name in tree.children:
        assert read[name].to_dataset().identical(tree[name].to_dataset()), name
    assert again.summary(threshold=0.05).equals(posterior.summary(threshold=0.05))


def test_a_file_of_the_format_before_is_refused_with_the_refit_command(tmp_path):
    """Format 3 (every group written, version 0.2.0): one line naming the version and
    format that wrote it and the command that fits it again."""
    import xarray as xr

    path = bayes_eval.fit(bayes_eval.shipped_datasets()["example_evidence"]).to_netcdf(
        tmp_path / "new.nc"
    )
    with xr.open_datatree(path, engine="h5netcdf") as opened:
        tree = opened.load()
    tree.attrs.update(bayes_eval_format=3, bayes_eval_version="0.2.0")
    tree.to_netcdf(tmp_path / "old.nc", engine="h5netcdf")
    with pytest.raises(InputError) as refused:
        load_posterior(tmp_path / "old.nc")
    message = str(refused.value)
    assert "written by bayes_eval 0.2.0 in file format 3" in message
    assert READS in message and "refit with: bayes-eval fit" in message


def test_a_summary_without_a_threshold_is_the_same_whatever_was_asked_before():
    """The summary at a level without a threshold, read after one with a threshold, is
    the table a fresh fit gives (``prob_above`` and ``basis`` blank): only they depend on
    the threshold."""
    evidence = bayes_eval.resources.example_evidence()
    first = bayes_eval.fit(evidence)
    with_threshold = first.summary(threshold=0.1)
    assert with_threshold["prob_above"].notna().any() and with_threshold["basis"].notna().all()
    pd.testing.assert_frame_equal(first.summary(), bayes_eval.fit(evidence).summary())


def test_a_posterior_sets_its_attributes_once_when_it_is_made():
    """No method of a fit (``Posterior`` and each kind of it) assigns an attribute of the fit
    after ``__init__``: what it makes from what it keeps is cached
    (``functools.cached_property``, its groups by name) and never replaced; a fit read
    back is made whole by its family (``read_back``), with its derivation."""
    import ast
    import inspect

    from bayes_eval.results import fits, posterior

    kinds = (posterior.Posterior, fits.ExactPosterior, fits.McmcPosterior, fits.ModelPrior)
    assert all(issubclass(kind, posterior.Posterior) for kind in kinds)
    assigned = [
        f"{kind.__name__}.{method.name}: {ast.unparse(node)}"
        for kind in kinds
        for method in ast.parse(inspect.getsource(kind)).body[0].body
        if isinstance(method, ast.FunctionDef) and method.name != "__init__"
        for node in ast.walk(method)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ]
    assert not assigned, assigned


def test_a_variable_equal_to_another_is_written_once_and_texts_compressed(tmp_path):
    """A group's variable equal to an earlier one (a crossed fit's ``difficulty`` and its
    centred ``difficulty_offset``) is written once and named in the group's attributes,
    a long text as compressed characters; both read back as they were, and a file of
    format 4 (every variable written, texts as they are) is read as before."""
    import numpy as np
    import xarray as xr

    from bayes_eval.results.posterior import COPIES, _made_whole, _without_copies

    rng = np.random.default_rng(3)
    offset = rng.normal(size=(2, 50, 40))
    with_nan = offset.copy()
    with_nan[0, 0, 0] = np.nan
    posterior = xr.Dataset(
        {
            "difficulty_offset": (("chain", "draw", "task"), offset),
            "difficulty": (("chain", "draw", "task"), offset.copy()),
            "shifted": (("chain", "draw", "task"), offset + 1e-12),
            "gap": (("chain", "draw", "task"), with_nan),
            "gap_again": (("chain", "draw", "task"), with_nan.copy()),
        }
    )
    sentence = "crossed; end_to_end/crossed; " + "a provenance of many words " * 20
    texts = xr.Dataset({"provenance": (("pair",), np.array([sentence] * 500))})
    tree = xr.DataTree.from_dict({"posterior": posterior, "conjugate": texts})
    written = _without_copies(tree)
    assert json.loads(written["posterior"].attrs[COPIES]) == {"difficulty": "difficulty_offset"}
    assert "difficulty" in tree["posterior"].data_vars  # the fit's own tree is left whole
    encoding = {"/conjugate": {"provenance": {"dtype": "S1", "compression": "gzip"}}}
    written.to_netcdf(tmp_path / "new.nc", engine="h5netcdf", encoding=encoding)
    tree.to_netcdf(tmp_path / "format4.nc", engine="h5netcdf")
    assert (tmp_path / "new.nc").stat().st_size < (tmp_path / "format4.nc").stat().st_size / 3
    for name in ("new.nc", "format4.nc"):
        with xr.open_datatree(tmp_path / name, engine="h5netcdf") as opened:
            read = _made_whole(opened.load())
        for group in ("posterior", "conjugate"):
            assert read[group].to_dataset().identical(tree[group].to_dataset()), (name, group)
