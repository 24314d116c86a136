"""The crossed design: what a crossed model is built on (``bayes_eval.crossed.model``
makes it from a table and its side tables; its grader, groups and likelihood read it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bayes_eval.counts.layout import Layout
from bayes_eval.evidence.covariates import Covariates

__all__ = ["Design"]


@dataclass(frozen=True)
class Design:
    """The crossed design: the layout of the evidence, the covariates, and the agents
    predicted from covariates alone.

    ``pair_task`` indexes ``layout.tasks`` per pair; ``milestones`` is each task's number
    of milestones (the most any agent's runs have; 0 for the end-to-end kind);
    ``centred`` marks the agents whose abilities are sampled centred
    (``centred_abilities``); ``centred_tasks``, whether the difficulties are
    (``centred_difficulties``).
    """

    layout: Layout
    covariates: Covariates
    pair_task: np.ndarray
    milestones: np.ndarray
    centred: np.ndarray
    centred_tasks: bool
    predicted: tuple = ()
    predicted_raw: np.ndarray | None = None

    @property
    def agents(self) -> list:
        """The fitted agents, then the predicted ones."""
        return [*self.layout.agents, *self.predicted]

    def observed(self) -> np.ndarray:
        """``(agents, tasks)``: whether the pair was run."""
        grid = np.zeros((len(self.agents), len(self.layout.tasks)), dtype=bool)
        grid[self.layout.pair_agent, self.pair_task] = True
        return grid
