"""One independent fit per agent (``fit --by agent``): each is the fit of that agent's rows
alone, serially and on a dask cluster; bad rows of any agent stop it before any fit."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from bayes_eval import InputError, fit, fit_per_agent, load_posterior
from bayes_eval.cli.main import main
from bayes_eval.outputs.runfolder import folder_names

# Sparse and ragged: one trial per cell for agent-a, an agent with no success, missing
# cells (each agent ran three of the four tasks), uneven trials.
TABLE = pd.DataFrame(
    dict(
        agent=["agent-a"] * 3 + ["agent-b"] * 3 + ["agent-c"] * 3,
        task=["t0", "t1", "t2", "t0", "t2", "t3", "t1", "t2", "t3"],
        method="end_to_end",
        successes=[0, 1, 1, 0, 0, 0, 2, 1, 4],
        trials=[1, 1, 1, 3, 5, 2, 7, 1, 10],
    )
)
SAMPLER = {"draws": 400, "tune": 400, "chains": 2}
MODEL = "end_to_end_pooled"


@pytest.fixture(scope="module")
def serial():
    return fit_per_agent(TABLE, MODEL, seed=5, sampler=SAMPLER)


@pytest.mark.slow  # a pooled fit per agent; the command's run per agent stays (below)
def test_each_agent_is_the_fit_of_its_rows_alone(serial):
    assert list(serial) == ["agent-a", "agent-b", "agent-c"]
    for agent, posterior in serial.items():
        rows = TABLE[TABLE["agent"] == agent]
        alone = fit(rows, MODEL, seed=5, sampler=SAMPLER)
        np.testing.assert_array_equal(
            posterior.draws["p_task"].values, alone.draws["p_task"].values
        )
        summary = posterior.summary()
        assert list(summary["task"]) == list(rows["task"])
        assert (summary["agent"] == agent).all()
        assert summary["diagnostics_ok"].all()
    never = serial["agent-b"].summary()["upper"]  # 0 of 10: bounds below 1, above 0
    assert ((never > 0) & (never < 1)).all()


@pytest.mark.slow  # a pooled fit per agent, on a cluster
def test_a_cluster_gives_the_serial_fits(serial, dask_scheduler):
    seen = []
    on_cluster = fit_per_agent(
        TABLE,
        MODEL,
        seed=5,
        sampler=SAMPLER,
        scheduler=dask_scheduler,
        on_fit=lambda agent, _: seen.append(agent),
    )
    assert sorted(seen) == sorted(serial)
    for agent, posterior in serial.items():
        np.testing.assert_array_equal(
            on_cluster[agent].draws["p_task"].values, posterior.draws["p_task"].values
        )


def test_an_agent_without_usable_rows_stops_before_any_fit(tmp_path, capsys):
    table = pd.concat(
        [
            TABLE[TABLE["agent"] != "agent-b"],
            pd.DataFrame(
                dict(agent="agent-b", task="t0", method="milestone", step=1, successes=1, trials=2),
                index=[0],
            ),
        ]
    )
    fitted = []
    with pytest.raises(InputError, match=r"\(agent 'agent-b'\): no task is usable"):
        fit_per_agent(table, MODEL, on_fit=lambda agent, _: fitted.append(agent))
    assert fitted == []
    path = tmp_path / "table.csv"
    table.astype({"step": "Int64"}).to_csv(path, index=False)
    out = tmp_path / "out"
    status = main(["fit", str(path), "--model", MODEL, "--by", "agent", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and not out.exists()
    assert err.count("\n") == 1 and "agent 'agent-b'" in err


def test_by_agent_writes_a_run_per_agent_and_prints_them_together(tmp_path, capsys):
    path = tmp_path / "table.csv"
    TABLE.to_csv(path, index=False)
    out = tmp_path / "out"
    sampler = ["--draws", "400", "--tune", "400", "--chains", "2", "--seed", "5"]
    args = ["fit", str(path), "--model", MODEL, "--by", "agent", "--out", str(out)]
    assert main([*args, "--format", "csv", *sampler]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    index = pd.read_csv(out / "agents.csv")
    assert list(index["agent"]) == ["agent-a", "agent-b", "agent-c"]
    assert json.loads((out / "bayes-eval-run.json").read_text())["commands"] == ["fit --by agent"]
    written = []
    for agent, folder in zip(index["agent"], index["folder"], strict=True):
        run = load_posterior(out / folder)
        assert set(run.summary()["agent"]) == {agent}
        written.append(pd.read_csv(out / folder / "summary.csv"))
    pd.testing.assert_frame_equal(printed, pd.concat(written, ignore_index=True))
    assert main([*args, "--format", "json", *sampler]) == 0  # replaces the earlier run
    assert len(json.loads(capsys.readouterr().out)) == len(TABLE)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "2"], "--workers: applies to sweeps"),
        (["--by", "agent", "--agents", "x.csv"], "--agents: covariates and predictions"),
        (["--by", "agent", "--model", "crossed"], "model crossed is crossed"),
        (["--by", "agent", "--workers", "2", "--scheduler", "tcp://h:1"], "not allowed with"),
    ],
)
def test_sweep_options_out_of_place_are_one_line(tmp_path, capsys, extra, message):
    path = tmp_path / "table.csv"
    TABLE.to_csv(path, index=False)
    assert main(["fit", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_folder_names_are_safe_and_distinct():
    assert folder_names(["gpt/4o", "GPT/4o", "..", "model 1.5"]) == [
        "gpt_4o",
        "GPT_4o_2",
        "agent",
        "model_1.5",
    ]
