"""Inspect AI logs, written by Inspect itself: a small eval task run offline on the
``mockllm`` provider, whose solver sets each answer by a fixed rule instead of calling a
model (Inspect's ``generate`` would download a tokenizer). The counts the CLI reads are
checked against the same rule counted by hand."""

import io
import shutil
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest

from bayes_eval import InputError, read_inspect
from bayes_eval.cli.main import main

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, mean, scorer  # noqa: E402
from inspect_ai.solver import solver  # noqa: E402

SAMPLES, EPOCHS = 5, 3
MILESTONE_KEYS = ("recon", "exploit", "exfil")


def solved(agent: str, sample: int, epoch: int) -> bool:
    """The fixed rule the solver follows: which runs succeed."""
    return (sample + epoch + (agent == "mockllm/strong")) % 3 == 0


def reached(agent: str, sample: int, epoch: int) -> int:
    """How many of the three milestones a run reaches."""
    return (2 * sample + epoch + len(agent)) % 4


def errors(sample: int, epoch: int) -> bool:
    """The one run that ends in an error."""
    return sample == 4 and epoch == 2


@solver
def rule_agent():
    async def solve(state, generate):
        sample, epoch, agent = int(state.sample_id), state.epoch, str(state.model)
        if errors(sample, epoch):
            raise RuntimeError("the sandbox fell over")
        state.metadata.update(ok=solved(agent, sample, epoch), reach=reached(agent, sample, epoch))
        state.output = ModelOutput.from_content(model=agent, content="done")
        return state

    return solve


@scorer(metrics=[accuracy()])
def verdict():
    async def score(state, target):
        return Score(value=CORRECT if state.metadata["ok"] else INCORRECT)

    return score


@scorer(metrics=[mean()])
def progress():
    async def score(state, target):
        return Score(value=0.75 if state.metadata["ok"] else 0.25)

    return score


@scorer(metrics={"*": [mean()]})
def stages():
    async def score(state, target):
        reach = state.metadata["reach"]
        return Score(value={key: i < reach for i, key in enumerate(MILESTONE_KEYS)})

    return score


def _task():
    dataset = [
        Sample(input=f"task {i}", id=i, metadata={"family": f"fam{i % 2}", "seed": f"s{i % 3}"})
        for i in range(SAMPLES)
    ]
    return Task(
        name="heist",
        dataset=dataset,
        solver=rule_agent(),
        scorer=[verdict(), progress(), stages()],
        epochs=EPOCHS,
        metadata={"scaffold": "rule"},
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two agents' logs in one folder (one ``.eval``, one ``.json``), each with one run
    that ended in an error."""
    folder = tmp_path_factory.mktemp("logs")
    for model, log_format in (("mockllm/weak", "eval"), ("mockllm/strong", "json")):
        inspect_eval(
            _task(),
            model=model,
            log_dir=str(folder),
            log_format=log_format,
            display="none",
            fail_on_error=False,
        )
    return folder


def _by_hand(rule) -> dict:
    """``{(agent, task): (successes, trials)}`` counted from the rule, the error left out."""
    out = {}
    for agent in ("mockllm/weak", "mockllm/strong"):
        for sample in range(SAMPLES):
            runs = [e for e in range(1, EPOCHS + 1) if not errors(sample, e)]
            out[(agent, f"heist/{sample}")] = (sum(rule(agent, sample, e) for e in runs), len(runs))
    return out


def _fit_csv(capsys, *args) -> pd.DataFrame:
    status = main(["fit", *map(str, args), "--model", "end_to_end", "--format", "csv"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return pd.read_csv(io.StringIO(captured.out)), captured.err


def test_cli_counts_match_a_count_by_hand(logs, capsys):
    summary, err = _fit_csv(capsys, logs, "--scorer", "verdict")
    expected = _by_hand(solved)
    assert len(summary) == len(expected)
    for row in summary.itertuples():
        k, n = expected[(row.agent, row.task)]
        # the end_to_end spec's Beta(1, 1) prior: posterior mean (k + 1) / (n + 2)
        assert row.mean == pytest.approx((k + 1) / (n + 2))
    assert "left out 1 sample epoch that ended in an error and 0 without a 'verdict' score" in err
    assert "read 28 runs of 2 agent(s) on 5 task(s) from 2 Inspect log(s)" in err


def test_numeric_scores_take_a_threshold(logs):
    evidence = read_inspect(logs, scorer="progress", success_threshold=0.5)
    counts = {(r.agent, r.task): (r.successes, r.trials) for r in evidence.table.itertuples()}
    assert counts == _by_hand(solved)
    none = read_inspect(logs, scorer="progress", success_threshold=0.8)
    assert none.table["successes"].sum() == 0


def test_dict_scores_give_milestones_in_order(logs):
    evidence = read_inspect(logs, scorer="stages", milestones=list(MILESTONE_KEYS))
    table = evidence.table
    assert set(table["method"]) == {"milestone"}
    for step in (1, 2, 3):
        expected = _by_hand(lambda a, s, e, step=step: reached(a, s, e) >= step)
        rows = table[table["step"] == step]
        assert {(r.agent, r.task): (r.successes, r.trials) for r in rows.itertuples()} == expected


def test_mapping_options(logs):
    by_task = read_inspect(logs, scorer="verdict", task_from="task").table
    assert set(by_task["task"]) == {"heist"} and by_task["trials"].sum() == 28
    by_family = read_inspect(logs, scorer="verdict", task_from="metadata:family").table
    assert sorted(by_family["task"].unique()) == ["fam0", "fam1"]
    by_solver = read_inspect(logs, scorer="verdict", agent_from="solver").table
    assert set(by_solver["agent"]) == {"mockllm/weak + rule_agent", "mockllm/strong + rule_agent"}
    by_scaffold = read_inspect(logs, scorer="verdict", agent_from="metadata:scaffold").table
    assert set(by_scaffold["agent"]) == {"rule"}  # the eval's metadata, for every sample


def test_clusters_from_sample_metadata(logs):
    evidence = read_inspect(logs, scorer="verdict", task_from="task", cluster="metadata:seed")
    clusters = evidence.clusters
    weak = clusters[clusters["agent"] == "mockllm/weak"].set_index("cluster")["trials"]
    # seeds s0: samples 0 and 3, s1: 1 and 4 (one run of 4 errored), s2: 2; 3 epochs each
    assert weak.to_dict() == {"s0": 6, "s1": 5, "s2": 3}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--scorer", "nope"], "no scorer named 'nope'; the log's scorers: verdict, progress"),
        (["--scorer", "nope,match"], "no scorer named 'nope', 'match'; the log's scorers: verd"),
        (["--scorer", "match,verdict,stages"], "several of the scorers named: 'verdict', 'stages'"),
        (["--scorer", "verdict,"], "--scorer: 'verdict,' has an empty name"),
        (["--scorer", "progress"], "sample 0, epoch 1, scorer progress: numeric score 0.25 ne"),
        (["--scorer", "stages"], "is dict-valued: --milestones, naming its keys in order, re"),
        (["--scorer", "stages", "--milestones", "recon,loot"], "no milestone key 'loot' (its "),
        ([], "the log has several scorers (verdict, progress, stages); name one with --scorer"),
        (["--scorer", "verdict", "--task-from", "metadata:difficulty"], "no metadata key 'dif"),
        (["--scorer", "verdict", "--agent-from", "team"], "--agent-from: 'team' is not one of"),
    ],
)
def test_bad_mappings_are_one_located_line(logs, capsys, args, message):
    assert main(["fit", str(logs), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert message in err


def test_the_library_names_its_parameters_where_the_command_line_names_flags(logs):
    with pytest.raises(InputError, match="several scorers .*; name one with `scorer`$"):
        read_inspect(logs)


def test_truncated_and_duplicated_logs_are_refused(logs, tmp_path, capsys):
    log = next(logs.glob("*.eval"))
    truncated = tmp_path / "truncated.eval"
    truncated.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    assert main(["fit", str(truncated), "--scorer", "verdict"]) == 2
    err = capsys.readouterr().err
    assert f"{truncated}: not a readable Inspect log" in err and len(err.splitlines()) == 1
    # a ZIP that is not an Inspect log
    foreign = tmp_path / "foreign.eval"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("hello.txt", "hi")
    assert main(["fit", str(foreign)]) == 2
    assert f"{foreign}: not a readable Inspect log" in capsys.readouterr().err
    # the same log under two names: every run would count twice
    shutil.copy(log, tmp_path / "copy.eval")
    assert main(["fit", str(log), str(tmp_path / "copy.eval"), "--scorer", "verdict"]) == 2
    err = capsys.readouterr().err
    assert "the same run is already read from" in err and len(err.splitlines()) == 1
    # the same file named twice is read once
    once = read_inspect([log, log], scorer="verdict")
    assert once.table["trials"].sum() == 14


def test_an_empty_folder_and_a_foreign_file(tmp_path):
    with pytest.raises(InputError, match="no Inspect logs"):
        read_inspect(tmp_path)
    (tmp_path / "table.csv").write_text("task\n")
    with pytest.raises(InputError, match=r"not an Inspect log \(.eval or .json\)"):
        read_inspect(tmp_path / "table.csv")


def test_without_inspect_one_line_says_how_to_install(logs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if it were not installed
    assert main(["fit", str(logs), "--scorer", "verdict"]) == 2
    assert capsys.readouterr().err == (
        "error: reading Inspect logs needs Inspect AI: pip install 'bayes_eval[inspect]'\n"
    )


VAULT_FILE = """
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import match
from inspect_ai.solver import solver

TRIED = Path(__file__).with_name("tried")


@solver
def flaky():
    async def solve(state, generate):
        sample, epoch = int(state.sample_id), state.epoch
        if (sample, epoch) == (2, 1) and not TRIED.exists():  # the first try only
            TRIED.write_text("")
            raise RuntimeError("the sandbox fell over")
        answer = "yes" if sample * epoch % 3 == 0 else "no"
        state.output = ModelOutput.from_content(model=str(state.model), content=answer)
        return state

    return solve


@task
def vault():
    return Task(
        dataset=[Sample(input=f"vault {i}", target="yes", id=i) for i in range(4)],
        solver=flaky(),
        scorer=match(),
        epochs=2,
    )
"""


def test_a_folder_of_several_tasks_models_and_a_retried_eval(logs, tmp_path, capsys):
    """``bayes-eval fit LOGDIR`` over two models' logs of one task and a second task
    whose eval failed and was retried (``eval_retry``: a new log of the same eval task,
    carrying the runs the first try finished): the first try is left out with a note, no
    run counts twice, and every (model, sample) has the counts of its rule."""
    from inspect_ai import eval_retry

    folder = tmp_path / "logs"
    shutil.copytree(logs, folder)
    (tmp_path / "vault.py").write_text(VAULT_FILE)
    (first,) = inspect_eval(
        f"{tmp_path / 'vault.py'}@vault", model="mockllm/weak", log_dir=str(folder), display="none"
    )
    assert first.status == "error"
    (retried,) = eval_retry(first, log_dir=str(folder), display="none")
    assert retried.status == "success" and retried.eval.task_id == first.eval.task_id
    summary, err = _fit_csv(capsys, folder, "--scorer", "verdict,match")
    assert f"{first.location}: left out, an earlier try of the eval task retried in" in err
    assert "read 36 runs of 2 agent(s) on 9 task(s) from 3 Inspect log(s)" in err
    expected = _by_hand(solved) | {
        ("mockllm/weak", f"vault/{s}"): (sum(s * e % 3 == 0 for e in (1, 2)), 2) for s in range(4)
    }
    assert len(summary) == len(expected)
    for row in summary.itertuples():
        k, n = expected[(row.agent, row.task)]
        assert row.mean == pytest.approx((k + 1) / (n + 2))


def _beats(b_shapes, a_shapes) -> float:
    """``P(X_B > X_A)`` of independent Beta variables, by quadrature (scipy)."""
    from scipy import integrate, stats

    xb, xa = stats.beta(*b_shapes), stats.beta(*a_shapes)
    return integrate.quad(lambda x: xb.pdf(x) * xa.cdf(x), 0, 1, epsabs=1e-10)[0]


def test_compare_agents_pairs_two_models_logs_by_sample(logs, capsys):
    """``bayes-eval compare-agents LOG_A LOG_B``: the weak model's log against the strong
    one's, paired by sample. Per sample ``P(P_B > P_A)`` of the two exact Beta(1 + k, 1 +
    n - k) posteriors (quadrature) and the difference of their means, within four Monte
    Carlo standard errors of the fit's draws; across samples, the mean difference of the
    means; the pairing stated."""
    weak, strong = next(logs.glob("*.eval")), next(logs.glob("*.json"))
    args = ["compare-agents", str(weak), str(strong), "--scorer", "verdict", "--format", "csv"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert (
        "note: paired by sample (the eval task's name and the sample id, TASK/ID): 5 task(s) "
        "with runs of both agents; left out 0 task(s) run only by mockllm/weak and 0 run only by "
        "mockllm/strong"
    ) in captured.err
    table = pd.read_csv(io.StringIO(captured.out))
    counts = _by_hand(solved)
    draws = 4000  # the end_to_end spec's exact draws
    differences = []
    for row in table[table["quantity"] == "P"].itertuples():
        ka, na = counts[("mockllm/weak", row.task)]
        kb, nb = counts[("mockllm/strong", row.task)]
        beats = _beats((1 + kb, 1 + nb - kb), (1 + ka, 1 + na - ka))
        assert abs(row.prob_b_greater - beats) < 4 * np.sqrt(beats * (1 - beats) / draws) + 1e-9
        difference = (1 + kb) / (2 + nb) - (1 + ka) / (2 + na)
        assert abs(row.diff_mean - difference) < 4 * 0.3 / np.sqrt(draws)
        differences.append(difference)
    assert len(differences) == SAMPLES
    (across,) = table[table["quantity"] != "P"].itertuples()
    assert abs(across.diff_mean - np.mean(differences)) < 4 * 0.3 / np.sqrt(draws)


def test_compare_agents_logs_refusals(logs, capsys):
    weak = next(logs.glob("*.eval"))
    scorer = ["--scorer", "verdict"]
    cases = [
        ([str(weak), str(weak), *scorer], "both logs' runs are of agent 'mockllm/weak'; name t"),
        ([str(logs), str(weak), *scorer], "runs of 2 agents (mockllm/strong, mockllm/weak); a "),
        ([str(weak)], "compare-agents: 1 inputs; give RUN_DIR A B (a fit and two of its agents)"),
        ([str(logs), "a", "b", *scorer], "--scorer: applies to two agents' logs (LOG_A LOG_B)"),
    ]
    for inputs, message in cases:
        assert main(["compare-agents", *inputs]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and len(err.splitlines()) == 1 and message in err, err
