"""Inspect AI evaluation logs (``.eval`` and ``.json``), read with Inspect's own reader.

The mapping, each part overridable:

* agent: the log's model (``model``); the model and the solver, ``"MODEL + SOLVER"``
  (``solver``: the eval's solver or agent, else its plan's solvers joined by ``+``); or a
  metadata value (``metadata:KEY``: the sample's metadata, else the eval's).
* task: the sample, ``"TASK/ID"`` (``sample``: the eval task's name and the sample id,
  so that sample 1 of two tasks are two tasks); the eval task itself (``task``: its
  samples are trials of one task); or a metadata value (``metadata:KEY``).
* each epoch of a sample is one run (one trial);
* with ``audit_scorer``, a second, trusted scorer (a human re-score, a stricter check):
  where a run carries its score, the run is audited, and the audit (``evidence.audit``,
  each row the run's ``run_id``) measures the first scorer, whose name is the runs'
  ``grader``;
* success from one scorer: ``C``/``I`` and booleans map directly, ``N`` (no answer) is a
  failure; numbers and partial credit (``P``, 0.5) need a threshold (success: score >=
  threshold). With ``milestones``, a dict-valued score gives one milestone run per key,
  in order (step 1, 2, ...), each key's value a success flag.

A sample that ended in an error, or has no score from the scorer, is left out, with a
note that counts them. The same run read twice (the same sample uuid, or the same
sample and epoch of the same eval task id, as in a retried eval's log and the log it
retried) is an error. Runs may be marked as clustered (``cluster``: ``sample``, ``log``
or ``metadata:KEY``).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd

from bayes_eval.constants import END_TO_END, MILESTONE_METHOD
from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import load_audit, with_audit
from bayes_eval.evidence.table import Evidence, PathLike, first_line, validate_frame
from bayes_eval.messages import note

__all__ = ["PairedLogs", "read_inspect", "read_paired_inspect", "success_flag"]

INSTALL = "reading Inspect logs needs Inspect AI: pip install 'bayes_eval[inspect]'"
SUFFIXES = (".eval", ".json")
# What a run needs of a sample; the transcript (messages, events) is not read.
SKIPPED_FIELDS = {"messages", "events", "attachments", "store", "output"}
AGENT_FROM = ("model", "solver")
TASK_FROM = ("sample", "task")
CLUSTER_FROM = ("sample", "log")


def read_inspect(
    paths: PathLike | Sequence[PathLike],
    *,
    scorer: str | Sequence[str] | None = None,
    success_threshold: float | None = None,
    milestones: Sequence[str] | None = None,
    agent_from: str = "model",
    task_from: str = "sample",
    cluster: str | None = None,
    audit_scorer: str | None = None,
) -> Evidence:
    """Read Inspect AI logs as validated evidence, one trial per sample epoch.

    Parameters
    ----------
    paths : path or list of paths
        ``.eval`` or ``.json`` log files, or folders searched for them (recursively).
    scorer : str or list of str, optional
        The scorer whose score is success; optional where a log has only one. Several
        (logs of several tasks, each scored its own way): each log's one of them, which
        it must have, and only one.
    success_threshold : float, optional
        For numeric scores (and partial credit): success is score >= threshold.
    milestones : list of str, optional
        Keys of a dict-valued score, in milestone order: milestone runs, not end-to-end.
    agent_from : {"model", "solver", "metadata:KEY"}
    task_from : {"sample", "task", "metadata:KEY"}
    cluster : {"sample", "log", "metadata:KEY"}, optional
        Marks runs that share a sample, a log or a metadata value as correlated.
    audit_scorer : str, optional
        A trusted scorer: the runs it scored are the audit of ``scorer`` (the module's
        mapping), carried by the evidence (``Evidence.audit``).

    Returns
    -------
    Evidence

    Raises
    ------
    InputError
        A missing or unreadable log, an unknown scorer, a score that is not a success
        flag, a missing milestone key or metadata key, or a run read twice: one line
        naming the log, the sample and epoch, and the rule.
    """
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        raise InputError(INSTALL) from None
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    _check_choice(agent_from, AGENT_FROM, "agent_from")
    _check_choice(task_from, TASK_FROM, "task_from")
    if cluster is not None:
        _check_choice(cluster, CLUSTER_FROM, "cluster")
    if success_threshold is not None and not math.isfinite(float(success_threshold)):
        raise InputError(f"success_threshold: {success_threshold} is not a finite number")
    milestones = list(milestones) if milestones else None
    if milestones is not None and len(set(milestones)) != len(milestones):
        raise InputError(f"milestones: a key is named twice ({', '.join(milestones)})")
    if audit_scorer is not None and milestones is not None:
        raise InputError("audit_scorer: audits end-to-end runs; milestones are read without one")
    runs, seen, audited = [], {}, []
    files = _latest_tries(_headers(_log_files(paths), read_eval_log))
    for path, log in files:
        label = str(path)
        try:
            samples = list(
                read_eval_log_samples(
                    str(path), all_samples_required=False, exclude_fields=SKIPPED_FIELDS
                )
            )
        except Exception as exc:  # a truncated ZIP, bad JSON, a foreign file: many types
            raise InputError(f"{label}: not a readable Inspect log ({first_line(exc)})") from None
        name = _scorer(label, samples, scorer)
        errors = unscored = 0
        for sample in samples:
            if sample.error is not None:
                errors += 1
                continue
            score = (sample.scores or {}).get(name)
            if score is None or score.value is None:
                unscored += 1
                continue
            where = f"{label}: sample {sample.id}, epoch {sample.epoch}"
            _check_once(seen, log, sample, where)
            agent = _agent(log, sample, agent_from, where)
            task = _task(log, sample, task_from, where)
            group = "" if cluster is None else _cluster(log, sample, cluster, label, where)
            pair = {"agent": agent, "task": task}
            base = pair | {"cluster": group}
            where = f"{where}, scorer {name}"
            if milestones is None:
                flag = success_flag(score.value, success_threshold, where)
                runs.append(base | {"method": END_TO_END, "step": "", "success": flag})
                if audit_scorer is not None:
                    runs[-1]["grader"] = name
                    row = _audited(log, sample, audit_scorer, success_threshold, label)
                    if row is not None:
                        audited.append(row | {"grader": name, "graded": flag, **pair})
                continue
            if not isinstance(score.value, dict):
                raise InputError(
                    f"{where}: `milestones` needs a dict-valued score, not '{score.value}'"
                )
            for step, key in enumerate(milestones, start=1):
                if key not in score.value:
                    keys = ", ".join(map(str, score.value)) or "none"
                    raise InputError(f"{where}: no milestone key '{key}' (its keys: {keys})")
                flag = success_flag(score.value[key], success_threshold, f"{where}, key {key}")
                runs.append(base | {"method": MILESTONE_METHOD, "step": step, "success": flag})
        if errors or unscored:
            note(
                f"{label}: left out {errors} sample epoch{'s' * (errors != 1)} that ended in an "
                f"error and {unscored} without a '{name}' score, of {len(samples)}"
            )
        if log.status != "success":
            note(f"{label}: the eval's status is '{log.status}'; its finished samples are read")
    if not runs:
        raise InputError(f"{_source(paths)}: no scored runs in {len(files)} Inspect log(s)")
    frame = pd.DataFrame(runs)
    if cluster is None:
        frame = frame.drop(columns="cluster")
    note(
        f"read {len(runs)} {'milestone ' if milestones else ''}runs of "
        f"{frame['agent'].nunique()} agent(s) on {frame['task'].nunique()} task(s) from "
        f"{len(files)} Inspect log(s)"
    )
    kept = ("grader",) if audit_scorer is not None else ()
    evidence = validate_frame(frame, _source(paths), from_file=False, kept=kept)
    if audit_scorer is None:
        return evidence
    if not audited:
        raise InputError(f"{_source(paths)}: no run has a score from audit scorer '{audit_scorer}'")
    label = f"{_source(paths)} (audit scorer {audit_scorer})"
    return with_audit(evidence, load_audit(pd.DataFrame(audited), label))


@dataclass(frozen=True)
class PairedLogs:
    """Two agents' runs on the tasks both were run on (``read_paired_inspect``).

    Attributes
    ----------
    evidence : Evidence
        Both agents' runs on the common tasks.
    a, b : str
        The agents: the one compared against (``log_a``'s) and the one compared.
    pairing : str
        How the runs were paired, and what was left out, in a sentence.
    """

    evidence: Evidence
    a: str
    b: str
    pairing: str


def read_paired_inspect(
    log_a: PathLike | Sequence[PathLike],
    log_b: PathLike | Sequence[PathLike],
    *,
    scorer: str | Sequence[str] | None = None,
    success_threshold: float | None = None,
    agent_from: str = "model",
    task_from: str = "sample",
) -> PairedLogs:
    """Two agents' Inspect logs, paired task by task for ``bayes_eval.compare_agents``.

    Each of ``log_a`` and ``log_b`` (files or folders) is read by ``read_inspect`` with
    the keywords given, as it takes them, and must hold the runs of one agent, a different
    one in each. A task is a sample by default (``task_from`` ``"sample"``: the eval
    task's name and the sample id, so that both agents' runs of one sample are paired);
    the tasks only one agent was run on are left out, counted in ``pairing``.
    """
    options = dict(
        scorer=scorer,
        success_threshold=success_threshold,
        agent_from=agent_from,
        task_from=task_from,
    )
    read = {side: read_inspect(logs, **options) for side, logs in (("A", log_a), ("B", log_b))}
    agents = {}
    for side, evidence in read.items():
        names = evidence.table["agent"].unique()
        if len(names) != 1:
            raise InputError(
                f"{evidence.source}: runs of {len(names)} agents ({', '.join(sorted(names))}); a "
                f"paired comparison takes one agent's logs as {side}"
            )
        agents[side] = str(names[0])
    if agents["A"] == agents["B"]:
        raise InputError(
            f"agent_from: both logs' runs are of agent '{agents['A']}'; name the agents apart "
            "(agent_from 'solver' or 'metadata:KEY')"
        )
    tasks = {side: set(evidence.table["task"]) for side, evidence in read.items()}
    common = tasks["A"] & tasks["B"]
    what = _TASK_WORDS.get(task_from, f"the value of {task_from}")
    if not common:
        raise InputError(
            f"{read['A'].source} and {read['B'].source}: no task in both (paired by {what})"
        )
    table = pd.concat(
        [e.table[e.table["task"].isin(common)] for e in read.values()], ignore_index=True
    )
    pairing = (
        f"paired by {what}: {len(common)} task(s) with runs of both agents; left out "
        f"{len(tasks['A'] - common)} task(s) run only by {agents['A']} and "
        f"{len(tasks['B'] - common)} run only by {agents['B']}"
    )
    source = f"{read['A'].source} against {read['B'].source}"
    return PairedLogs(Evidence(table, source), agents["A"], agents["B"], pairing)


# A task's meaning, by task_from, in a pairing's sentence.
_TASK_WORDS = {
    "sample": "sample (the eval task's name and the sample id, TASK/ID)",
    "task": "eval task (its samples trials of one task)",
}


def _audited(log, sample, audit_scorer: str, threshold, label: str) -> dict | None:
    """A run's audit row where the trusted scorer scored it (its truth, its ``run_id``, the
    sample's uuid or its task, id and epoch), else None."""
    trusted = (sample.scores or {}).get(audit_scorer)
    if trusted is None or trusted.value is None:
        return None
    where = f"{label}: sample {sample.id}, epoch {sample.epoch}, scorer {audit_scorer}"
    run_id = sample.uuid or f"{log.eval.task_id}/{sample.id}/{sample.epoch}"
    return {
        "truth": success_flag(trusted.value, threshold, where),
        "method": END_TO_END,
        "run_id": run_id,
    }


def _check_choice(value: str, choices, option: str) -> None:
    if value in choices or (value.startswith("metadata:") and len(value) > len("metadata:")):
        return
    raise InputError(f"{option}: '{value}' is not one of {', '.join(choices)} or metadata:KEY")


def _headers(files: list[Path], read_eval_log) -> list[tuple[Path, object]]:
    """Each log file with its header (the eval, its status and results; no sample)."""
    headers = []
    for path in files:
        if path.suffix.lower() == ".eval" and not zipfile.is_zipfile(path):
            raise InputError(
                f"{path}: not a readable Inspect log (a .eval log is a ZIP archive, and this "
                "one is truncated or damaged)"
            )
        try:
            headers.append((path, read_eval_log(str(path), header_only=True)))
        except Exception as exc:  # bad JSON, a foreign file: many types
            raise InputError(f"{path}: not a readable Inspect log ({first_line(exc)})") from None
    return headers


def _latest_tries(headers: list[tuple[Path, object]]) -> list[tuple[Path, object]]:
    """The logs to read: of the tries of one eval task (logs of one eval task id under
    different eval ids: ``inspect eval-retry`` and ``eval_set`` write each retry as a new
    log that carries the samples its earlier tries finished), the latest alone, the
    earlier ones left out with a note."""
    tries: dict[str, list[tuple[Path, object]]] = {}
    for path, log in headers:
        tries.setdefault(log.eval.task_id, []).append((path, log))
    earlier = set()
    for logs in tries.values():
        if len({log.eval.eval_id for _, log in logs}) == 1:
            continue  # one try (the same log under two names is refused run by run)
        ordered = sorted(logs, key=lambda item: item[1].eval.created)
        for path, _ in ordered[:-1]:
            note(f"{path}: left out, an earlier try of the eval task retried in {ordered[-1][0]}")
            earlier.add(path)
    return [(path, log) for path, log in headers if path not in earlier]


def _source(paths) -> str:
    return " ".join(str(p) for p in paths)


def _log_files(paths) -> list[Path]:
    """The log files named or found in the folders named, each once, in a stable order."""
    from inspect_ai.log import list_eval_logs

    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = [
                Path(unquote(urlparse(info.name).path)) if "://" in info.name else Path(info.name)
                for info in list_eval_logs(str(path), formats=["eval", "json"], recursive=True)
            ]
            if not found:
                raise InputError(f"{path}: no Inspect logs (.eval or .json) in this folder")
            files += sorted(found)
        elif not path.exists():
            raise InputError(f"{path}: no such file or folder")
        elif path.suffix.lower() not in SUFFIXES:
            raise InputError(f"{path}: not an Inspect log (.eval or .json)")
        else:
            files.append(path)
    unique = {}
    for path in files:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _scorer(label: str, samples, scorer: str | Sequence[str] | None) -> str:
    """The scorer to read: the one named (of several named, the log's one), which must be in
    the log, or the log's only one."""
    names = list(dict.fromkeys(k for s in samples for k in (s.scores or {})))
    if isinstance(scorer, str):
        scorer = [scorer]
    if scorer is not None:
        if not names:
            return scorer[0]
        found = [name for name in scorer if name in names]
        if len(found) != 1:
            named = "no scorer named" if not found else "several of the scorers named:"
            raise InputError(
                f"{label}: {named} {', '.join(f"'{n}'" for n in (found or scorer))}; the "
                f"log's scorers: {', '.join(names)}"
            )
        return found[0]
    if len(names) == 1:
        return names[0]
    if not names:
        raise InputError(f"{label}: no sample has a score; nothing to read")
    raise InputError(
        f"{label}: the log has several scorers ({', '.join(names)}); name one with `scorer`"
    )


def _check_once(seen: dict, log, sample, where: str) -> None:
    """Refuse a run read twice: the same sample uuid, or the same eval task id, sample id
    and epoch (a retried eval's log repeats the samples of the log it retried)."""
    keys = [("epoch", log.eval.task_id, str(sample.id), sample.epoch)]
    if sample.uuid:
        keys.append(("uuid", sample.uuid))
    for key in keys:
        if key in seen:
            raise InputError(
                f"{where}: the same run is already read from {seen[key]}; a retried eval's "
                "log repeats the samples of the log it retried: give only one of them"
            )
    for key in keys:
        seen[key] = where


def _metadata(log, sample, key: str, where: str):
    for metadata in (sample.metadata or {}, log.eval.metadata or {}):
        if key in metadata and metadata[key] is not None and str(metadata[key]).strip():
            return str(metadata[key]).strip()
    raise InputError(f"{where}: no metadata key '{key}' in the sample or the eval")


def _agent(log, sample, agent_from: str, where: str) -> str:
    if agent_from == "model":
        return log.eval.model
    if agent_from == "solver":
        solver = log.eval.solver or "+".join(
            step.solver for step in (log.plan.steps if log.plan else [])
        )
        return f"{log.eval.model} + {solver or 'no solver'}"
    return _metadata(log, sample, agent_from.removeprefix("metadata:"), where)


def _task(log, sample, task_from: str, where: str) -> str:
    if task_from == "sample":
        return f"{log.eval.task}/{sample.id}"
    if task_from == "task":
        return log.eval.task
    return _metadata(log, sample, task_from.removeprefix("metadata:"), where)


def _cluster(log, sample, cluster: str, label: str, where: str) -> str:
    if cluster == "sample":
        return f"{log.eval.task_id}/{sample.id}"
    if cluster == "log":
        return label
    return _metadata(log, sample, cluster.removeprefix("metadata:"), where)


def success_flag(value, threshold: float | None, where: str) -> int:
    """A score as success (1) or failure (0); see the module's mapping."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, str):
        flag = {"C": 1, "I": 0, "N": 0}.get(value.strip().upper())
        if flag is not None:
            return flag
        if value.strip().upper() != "P":
            raise InputError(
                f"{where}: '{value}' is not a success flag (C, I, N, true/false, or a number "
                "with `success_threshold`)"
            )
        value = 0.5  # partial credit, as Inspect's value_to_float reads it
    if isinstance(value, int | float | np.integer | np.floating):
        if not math.isfinite(value):
            raise InputError(f"{where}: score {value} is not a finite number")
        if threshold is None:
            raise InputError(
                f"{where}: numeric score {value} needs `success_threshold` (success: score "
                ">= threshold)"
            )
        return int(value >= threshold)
    if isinstance(value, dict):
        raise InputError(
            f"{where}: score {value!r} is dict-valued: `milestones`, naming its keys in "
            "order, reads milestones from it"
        )
    raise InputError(f"{where}: score {value!r} is not a success flag")
