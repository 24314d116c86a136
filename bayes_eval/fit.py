"""Fit a spec to evidence: the package's front door.

``fit`` reads the evidence and the spec, keeps the rows the model uses (saying which it
leaves out and why), checks the options (``FitOptions``), and hands them to the model's
family (``bayes_eval.families``: exact, pooled, crossed or linked), which fits them.
``fit_per_agent`` fits one agent at a time.
``load_posterior`` reads a fit back, refusing one edited since it was written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from bayes_eval.advice import advice, refuse_unfit
from bayes_eval.constants import NEVER_SOLVABLE
from bayes_eval.errors import InputError
from bayes_eval.evidence.audit import with_audit
from bayes_eval.evidence.pairs import PairRows, note_left_out
from bayes_eval.evidence.table import Evidence, PathLike, TableSource, load_evidence
from bayes_eval.families import family_of
from bayes_eval.files import check_whole
from bayes_eval.messages import collected, note
from bayes_eval.registry import NEW_AGENTS, model_of
from bayes_eval.settings import EXACT_ENGINE, FitOptions, SamplerInput, check_seed
from bayes_eval.specs import ModelSource, check_level, load_spec

if TYPE_CHECKING:
    from bayes_eval.results.posterior import Posterior

__all__ = [
    "check_graded",
    "fit",
    "fit_options",
    "fit_per_agent",
    "load_posterior",
    "side_tables",
    "usable_rows",
]


def fit(
    evidence: TableSource | Evidence,
    model: ModelSource = "phuong_chain",
    *,
    level: float | None = None,
    seed: int | None = None,
    sampler: SamplerInput = None,
    agents: TableSource | None = None,
    tasks: TableSource | None = None,
    predict: Sequence[str] = (),
    audit: TableSource | None = None,
    allow_unfit: bool = False,
) -> Posterior:
    """Fit a model to evidence.

    The rows a model leaves out, and why, are notes on ``logging.getLogger("bayes_eval")``;
    a pooled fit's progress goes to ``bayes_eval.progress`` (``bayes_eval.messages``).

    Parameters
    ----------
    evidence : path, DataFrame or Evidence
        The tidy evidence table.
    model : str, path or Spec
        A shipped spec name (``"phuong2024"``), a spec path, or a ``Spec``.
    level : float, optional
        One-sided credible level; defaults to the spec's.
    seed : int, optional
        Seed of the posterior draws; defaults to the spec's.
    sampler : dict or SamplerSettings, optional
        Overrides of a pooled spec's ``[sampler]`` by name (engine, draws, tune,
        chains, target_accept; PyMC's ``nuts_sampler`` and ``random_seed`` mean
        ``engine`` and ``seed``), or settings to use whole (``bayes_eval.SamplerSettings``).
        An unknown name is refused.
    agents, tasks : path or DataFrame, optional
        Crossed models: side tables of covariates, one row per agent (column ``agent``)
        or task (column ``task``).
    predict : list of str, optional
        Crossed models: new agents described by covariates alone, each
        ``name,column=value,...``; the fit predicts their success on every task.
    audit : path or DataFrame, optional
        The audit of the grader that scored the runs (``bayes_eval.evidence.audit``): its
        sensitivity and specificity, from the audit, are integrated out of every bound
        (``bayes_eval.exact.graded``). The evidence's ``grader`` column names each row's
        grader; without one, the audit's only grader scored every row.
    allow_unfit : bool
        Fit even a table the model refuses before sampling as outside what it can fit
        (``bayes_eval.advice.refuse_unfit``): for studies of the refusal itself.

    Returns
    -------
    bayes_eval.results.posterior.Posterior

    Raises
    ------
    InputError
        Bad evidence, spec or level, a task with no evidence the model can use, or a
        table outside what the model can fit (``bayes_eval.advice.refuse_unfit``).
    """
    evidence = load_evidence(evidence)
    spec = load_spec(model)
    if audit is not None:
        evidence = with_audit(evidence, audit)
    check_graded(evidence, spec)
    options = fit_options(spec, level, seed, sampler)
    side = side_tables(spec, agents, tasks, predict)
    options = replace(options, side=side, predict=tuple(predict))
    _check_clusters(evidence, spec)
    by_pair = usable_rows(evidence, spec)
    if not allow_unfit and model_of(spec).refuses_sparse_shared:
        refuse_unfit(evidence.table, spec)
    posterior = family_of(spec).fit(evidence, by_pair, spec, options)
    said = advice(evidence.table, spec, evidence.source)
    if said:
        note(said)
    return posterior


def load_posterior(path: PathLike) -> Posterior:
    """Read a fit written by ``bayes-eval fit --out`` (its folder) or ``Posterior.to_netcdf``
    (its file), refusing one edited or damaged since it was written; what the fit made from
    what it keeps (the draws of an exact fit, the rates and every other group of an MCMC
    fit) is made again, from its seed, to the same bytes.

    Checked, each refusal one ``InputError`` naming the file: the run folder's files
    against the SHA-256 its manifest recorded (``bayes_eval.files.check_whole``); the
    stored evidence against its hash; and an exact fit's stored posterior (its
    ``conjugate`` group: each pair's Beta shapes, point values and provenance) against
    the one its evidence, spec, level and seed give, fitted again (exact fits are cheap).
    """
    from bayes_eval.results.posterior import read_posterior

    path = Path(path)
    check_whole(path if path.is_dir() else path.parent)
    stored = read_posterior(path)
    with collected():  # the notes were said when it was fitted
        by_pair = usable_rows(stored.evidence, stored.spec)
    return family_of(stored.spec).read_back(stored, by_pair, path)


# The models that carry a grader's error into their bounds so far.
GRADED_MODELS = (
    "end_to_end",
    "end_to_end_pooled",
    "hierarchical",
    "ecr_pooled",
    "joint (end-to-end runs)",
    "crossed",
    "crossed_milestones",
    "mats2024 (milestones)",
    "ecr2024 (expert steps)",
    "a phuong_chain spec with proper priors",
)
# The prior roles of the rates a grader scores in the exact models (none of the others'
# priors governs a rate, and each is proper).
GRADED_ROLES = ("end_to_end", "milestone", "step")
# Each graded method's name in an error.
METHOD_WORDS = {"end_to_end": "end-to-end", "expert_completion": "expert-step"}


def check_graded(evidence: Evidence, spec) -> None:
    """Refuse an audited grader's evidence to a model that does not yet carry its error
    (its registry entry's ``graded``: every end-to-end model, exact, pooled across tasks
    or crossed, but one with tasks never solved, or with runs in clusters; the milestone
    and expert-step models, exact, pooled or crossed, Phuong et al.'s chain, and
    ``joint``'s end-to-end runs; not ``crossed_joint``), or under an improper prior (the
    grader's mixture needs a proper one: the chain's published Haldane milestone prior is
    refused)."""
    if evidence.audit is None:
        return
    model = model_of(spec)
    carried = bool(model.graded)
    if not carried or NEVER_SOLVABLE in spec.priors or evidence.clusters is not None:
        why = "with runs in clusters" if carried and evidence.clusters is not None else ""
        raise InputError(
            f"audit: model {spec.name} ({spec.kind}/{spec.pooling}{', ' * bool(why)}{why}) "
            "does not carry a grader's error into its bounds yet; fit "
            f"{', '.join(GRADED_MODELS)}, which do"
        )
    table = evidence.table
    read = table["method"].isin(model.uses)
    scored = (
        read & ~table["method"].isin(model.graded) & table["grader"].isin(evidence.audit.graders)
    )
    if scored.any():
        graded = " and ".join(METHOD_WORDS.get(m, m) for m in model.graded)
        raise InputError(
            f"audit: {evidence.source}: row {table['row'][scored].iloc[0]}, column grader: "
            f"model {spec.name} carries a grader's error on {graded} runs only (a blank "
            "grader: a trusted check scored the row); fit hierarchical for graded "
            "milestones, ecr_pooled for graded expert steps"
        )
    if not model.audited_runs and evidence.audit.audited_runs.any():
        raise InputError(
            f"audit: {evidence.audit.source}: rows with a run_id (runs of the evidence "
            "scored again) are taken by the end-to-end models end_to_end, end_to_end_pooled "
            f"and crossed, not yet by {spec.name} ({spec.kind})"
        )
    for role in GRADED_ROLES:
        prior = spec.priors.get(role)
        if prior is not None and not (prior.alpha > 0 and prior.beta > 0):
            raise InputError(
                f"audit: {spec.source}: the {role} prior {prior.label()} is improper; a "
                "grader's error is integrated out under a proper prior (Beta(1, 1))"
            )


def fit_per_agent(
    evidence: TableSource | Evidence,
    model: ModelSource = "phuong_chain",
    *,
    level: float | None = None,
    seed: int | None = None,
    sampler: SamplerInput = None,
    workers: int | None = None,
    scheduler: str | None = None,
    on_fit: Callable[[str, Posterior], object] | None = None,
) -> dict[str, Posterior]:
    """Fit each agent (or checkpoint) on its own rows, as a sweep of independent fits.

    Each agent's fit is exactly ``fit`` of that agent's rows with the same seed, whatever
    runs it: serially, or on a dask cluster (``workers``, ``scheduler``: see
    ``bayes_eval.inference.sweep.run_sweep``). Every agent's rows are checked before any is fitted,
    so bad input stops the sweep before it starts.

    Parameters
    ----------
    evidence, model, level, seed, sampler
        As for ``fit``; a note names its agent, and each fit done is a progress line.
    workers : int, optional
        Fit on a local dask cluster of this many worker processes.
    scheduler : str, optional
        Fit on the running dask cluster at this address.
    on_fit : callable, optional
        ``on_fit(agent, posterior)``, called as each fit finishes (in that order).

    Returns
    -------
    dict
        ``{agent: Posterior}`` in the order the agents first appear.

    Raises
    ------
    InputError
        As ``fit``, for any agent (the message names it); or a crossed model, which
        links agents and fits them together.
    """
    from bayes_eval.inference.sweep import run_sweep

    evidence = load_evidence(evidence)
    spec = load_spec(model)
    if not family_of(spec).fits_agents_apart:
        raise InputError(
            f"fit_per_agent: model {spec.name} is crossed: it links agents through their "
            "abilities and fits them together, in one fit"
        )
    options = fit_options(spec, level, seed, sampler)
    _check_clusters(evidence, spec)
    agents = list(dict.fromkeys(evidence.table["agent"]))
    parts = []
    for agent in agents:
        keep = evidence.table["agent"] == agent
        clusters = evidence.clusters
        if clusters is not None:
            clusters = clusters[clusters["agent"] == agent].reset_index(drop=True)
        part = replace(
            evidence,
            table=evidence.table[keep].reset_index(drop=True),
            source=f"{evidence.source} (agent '{agent}')",
            clusters=clusters,
        )
        with collected() as agent_notes:
            usable_rows(part, spec)
        for text in agent_notes:
            note(f"agent '{agent}': {text}")
        parts.append(part)

    def done(index, posterior):
        if on_fit is not None:
            on_fit(agents[index], posterior)

    setup = dict(parts=parts, spec=spec, options=options)
    fits = run_sweep(
        _agent_fit,
        len(parts),
        setup,
        workers=workers,
        scheduler=scheduler,
        on_result=done,
        describe=lambda index: f"fit of agent '{agents[index]}'",
    )
    return dict(zip(agents, fits, strict=True))


def _agent_fit(index: int, setup: dict):
    """One agent's fit of ``fit_per_agent``; its notes were made when the rows were
    checked."""
    options = setup["options"]
    with collected():
        return fit(
            setup["parts"][index],
            setup["spec"],
            level=options.level,
            seed=options.seed,
            sampler=options.sampler,
        )


def prior_only(
    evidence: TableSource | Evidence,
    model: ModelSource,
    *,
    seed: int | None = None,
    agents: TableSource | None = None,
    tasks: TableSource | None = None,
    predict: Sequence[str] = (),
) -> Posterior:
    """The model on the evidence's design with no data yet: a ``Posterior`` whose
    ``prior_groups()`` draw the spec's priors through the model (an exact fit, which is
    cheap, for an exact model; no sampling for an MCMC one). The arguments are
    ``fit``'s."""
    evidence = load_evidence(evidence)
    spec = load_spec(model)
    seed = spec.seed if seed is None else check_seed(seed)
    side = side_tables(spec, agents, tasks, predict)
    options = FitOptions(level=spec.level, seed=seed, side=side, predict=tuple(predict))
    _check_clusters(evidence, spec)
    by_pair = usable_rows(evidence, spec)
    return family_of(spec).prior_only(evidence, by_pair, spec, options)


def fit_options(spec, level, seed, sampler) -> FitOptions:
    """The level, seed and sampler settings of a fit: the spec's, with those given in
    their place (MCMC settings for MCMC models only), checked."""
    level = spec.level if level is None else check_level(level, "level")
    if isinstance(sampler, Mapping) and "random_seed" in sampler:  # PyMC's name for it
        sampler = dict(sampler)
        given = check_seed(sampler.pop("random_seed"), "random_seed")
        if seed is not None and seed != given:
            raise InputError(f"random_seed: {given} and seed {seed}: give the seed once")
        seed = given
    seed = spec.seed if seed is None else check_seed(seed)
    settings = spec.sampler.updated(sampler)
    if spec.exact and settings != spec.sampler:
        named = next(iter(sampler)) if isinstance(sampler, dict) else "sampler"
        raise InputError(
            f"{named}: MCMC settings apply to pooled models only; model {spec.name} is "
            "exact (conjugate)"
        )
    if settings.engine == EXACT_ENGINE and not spec.exact:
        raise InputError(f"engine: '{EXACT_ENGINE}' is for exact models; {spec.name} is MCMC")
    return FitOptions(level=level, seed=seed, sampler=settings)


def side_tables(spec, agents, tasks, predict) -> dict:
    """The covariate side tables of a crossed fit, read; any of them, or a prediction,
    given to another model is an error."""
    given = {"agent": agents, "task": tasks}
    if NEW_AGENTS not in model_of(spec).predicts:
        named = [f"{key}s" for key, value in given.items() if value is not None]
        named += ["predict"] if predict else []
        if named:
            raise InputError(
                f"{named[0]}: covariates and predictions apply to crossed models (pooling "
                f"crossed, such as the shipped crossed and time_horizon); model {spec.name} "
                f"is {spec.kind}/{spec.pooling}"
            )
        return {}
    from bayes_eval.evidence.covariates import read_side_table

    return {key: read_side_table(table, key) for key, table in given.items() if table is not None}


def _check_clusters(evidence: Evidence, spec) -> None:
    """Clustered runs need a model that treats them as correlated (its registry entry says
    so); any other would count them as independent trials and overstate what they show."""
    if evidence.clusters is None:
        return
    if not model_of(spec).clustered:
        raise InputError(
            f"{evidence.source}: the runs come in clusters, and model {spec.name} "
            f"({spec.kind}/{spec.pooling}) treats every run as an independent trial; fit "
            "them with end_to_end_pooled, hierarchical or a crossed model, which model the "
            "clusters"
        )
    if NEVER_SOLVABLE in spec.priors:
        raise InputError(
            f"{spec.source}: {NEVER_SOLVABLE}: tasks never solved are not modelled with "
            "clustered runs; drop the prior, or the cluster column"
        )
    if "cluster_concentration" not in spec.priors:
        raise InputError(
            f"{spec.source}: the runs come in clusters: the spec needs a prior "
            "[priors.cluster_concentration] (LogNormal), as the shipped "
            f"{family_of(spec).clustered_spec(spec)} has"
        )


def usable_rows(evidence, spec) -> PairRows:
    """The rows a model uses, as ``{(agent, task): {method: rows sorted by run, step}}``
    (``PairRows``, which also gives them as one table).

    A task the model cannot use (no rows of a method it reads, or, for ``joint``, no
    milestone rows) is left out with one note naming every such task and why; rows of
    methods the model does not read are noted too (``bayes_eval.messages.note``), so
    nothing disappears silently.

    Raises
    ------
    InputError
        No task is usable; the message names the tasks (the first ten, then a count).
    """
    evidence = load_evidence(evidence)
    model = model_of(spec)
    used = evidence.table["method"].isin(model.uses)
    note_left_out(evidence, ~used, f"model {spec.name} ({spec.kind}) does not use them")
    # in the input's order of agents and tasks, not the sort's (end-to-end rows first)
    by_pair = PairRows.of(evidence.table[used], evidence.pairs())
    needed = model.requires
    usable = [pair for pair in by_pair if set(needed) <= set(by_pair.methods(pair))]
    kept = set(usable)
    missing = [pair for pair in evidence.pairs() if pair not in kept]
    if not missing:
        return by_pair
    wanted = " and ".join(needed) if needed else " or ".join(model.uses)
    why = f"no {wanted} rows, which model {spec.name} needs"
    if not usable:
        raise InputError(f"{evidence.source}: no task is usable: {_named(missing)} ({why})")
    note(f"left out {len(missing)} task(s) the model cannot use ({why}): {_named(missing)}")
    return by_pair.only(usable)


def _named(pairs: list[tuple[str, str]], shown: int = 10) -> str:
    """``task 'x' (agent 'a'), ...``: the first ``shown`` by name, then how many more."""
    names = ", ".join(f"task '{task}' (agent '{agent}')" for agent, task in pairs[:shown])
    return names + (f" and {len(pairs) - shown} more" if len(pairs) > shown else "")
