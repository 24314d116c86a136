"""What every family of models gives (``Family``), and the agent-level quantity one names
(``AgentLevel``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bayes_eval.evidence.pairs import PairRows
    from bayes_eval.evidence.table import Evidence
    from bayes_eval.families.simulation import SimulationSetup
    from bayes_eval.registry import Model
    from bayes_eval.results.posterior import Posterior, StoredFit
    from bayes_eval.settings import FitOptions
    from bayes_eval.specs import Spec

__all__ = ["AgentLevel", "Family"]


@dataclass(frozen=True)
class AgentLevel:
    """The variable that compares an MCMC fit's agents across tasks (``name``), its
    ``label`` in a comparison, and whether it is on the log-odds scale (a difference of
    two is then a log odds ratio, and its ratio the odds ratio)."""

    name: str
    label: str
    log_odds: bool = False


class Family(Protocol):
    """A family of models (``bayes_eval.families``).

    Attributes
    ----------
    name : str
        As the registry names it.
    fits_agents_apart : bool
        Whether an agent's rows can be fitted alone (``fit_per_agent``): not where the
        model links agents through a shared scale.
    """

    name: str
    fits_agents_apart: bool

    def fit(
        self, evidence: Evidence, by_pair: PairRows, spec: Spec, options: FitOptions
    ) -> Posterior:
        """A fit of the rows ``by_pair`` (those the model uses) of ``evidence``."""

    def prior_only(
        self, evidence: Evidence, by_pair: PairRows, spec: Spec, options: FitOptions
    ) -> Posterior:
        """The model on the design of ``by_pair`` with no data yet: a ``Posterior`` whose
        ``prior_groups()`` draw the spec's priors through the model."""

    def read_back(self, stored: StoredFit, by_pair: PairRows, path: Path) -> Posterior:
        """The fit ``stored`` holds (read from ``path``), made whole again: what the fit
        made from what it keeps, from its seed; refused where its evidence and spec do not
        give it."""

    def agent_level(self, spec: Spec) -> AgentLevel | None:
        """The quantity that compares an MCMC fit's agents across tasks; None where the
        fit has none (an exact fit: its agents are compared by their pairs' means)."""

    def variable_roles(self, spec: Spec) -> dict[str, str]:
        """``{posterior variable: prior role}`` of the parameters the spec's priors govern."""

    def report_paragraphs(self, model: Model) -> list[tuple[str, str]]:
        """The report's paragraphs on the model (``(title, text)``): what it assumes, and
        how it fails."""

    def clustered_spec(self, spec: Spec) -> str:
        """A shipped spec of the family that models runs in clusters, for an error that
        names one."""

    def sbc_setup(
        self, evidence: Evidence, evidence_rows: PairRows, spec: Spec, **options
    ) -> SimulationSetup:
        """What every simulation of simulation-based calibration reads
        (``bayes_eval.checks.sbc``; ``options``: ``simulations``, ``form``, ``side``,
        ``draws``, ``tune``, ``seed``); refused where the family has nothing to
        calibrate."""

    def sbc_replicate(self, index: int, setup: SimulationSetup) -> dict:
        """The ranks of simulation ``index``: the truth drawn from the prior, the counts
        from the model on the design, the model fitted to them."""
