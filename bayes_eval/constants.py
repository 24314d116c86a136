"""Numbers and names that two or more of the package's modules share; a module's own live
in it (`tests/test_layering.py` checks)."""

import re

# Dimension names of every labelled array and of the result tree's groups.
AGENT = "agent"
TASK = "task"
MILESTONE = "milestone"
STEP = "step"
RUN = "run"

DEFAULT_AGENT = "agent"

# Numbers in a text table or option: plain ASCII, so that "1_0", full-width digits and "1e3"
# (which Python's int and float accept) are refused rather than read as something else.
REAL_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
INT64_MAX = 2**63 - 1

# The ways `simulate paths` breaks the milestone model's assumption.
VIOLATIONS = ("bypass", "skip", "order")

# Evidence methods (the `method` column).
END_TO_END = "end_to_end"
MILESTONE_METHOD = "milestone"
EXPERT_COMPLETION = "expert_completion"
BEST_OF_N = "expert_best_of_n"
GOLDEN = "golden_solution"

# end_to_end_pooled's optional prior role of the share of an agent's tasks never solved
# (zero-inflation), and the model variable it is the prior of.
NEVER_SOLVABLE = "never_solvable"
NEVER_SHARE = "never_share"
# Its optional companion: the chance that an agent has no task it never solves (a point
# mass at a share of 0), shared by the agents; with it, the sampled share is the share
# if the agent has such tasks (``never_share_if_any``), whether it has them is drawn back
# per agent and draw (``any_never_solved``), and ``never_share`` is their product.
ALL_SOLVABLE = "all_solvable"
NEVER_SHARE_IF_ANY = "never_share_if_any"
ANY_NEVER_SOLVED = "any_never_solved"
# The crossed end-to-end model's optional prior roles (time_horizon_2pl): the spread of
# tasks' discriminations (the slope of success in ability, one per task), and the error of
# the recorded task length around the true one, in units of the length term.
DISCRIMINATION_SCALE = "discrimination_scale"
LENGTH_ERROR = "length_error_scale"
# Its optional pair of prior roles for surprising pairs: the share of pairs whose departure
# from the additive prediction is wider, and how much wider (their scale is cell_scale
# times 1 + surprise_width).
SURPRISE_SHARE = "surprise_share"
SURPRISE_WIDTH = "surprise_width"

# end_to_end_pooled's optional prior role of how far the agents' concentrations spread
# around one they share (the standard deviation of log kappa across agents); with it, the
# concentration prior is the prior of that shared concentration.
CONCENTRATION_SCALE = "concentration_scale"

# Credible level used when neither the spec nor the user gives one.
DEFAULT_LEVEL = 0.975

# Inclusive ranges of the whole-number sampler settings (spec and command line): beyond
# them a fit would not end or not fit in memory; seeds are what numpy and nutpie take.
SAMPLER_LIMITS = {
    "draws": (1, 1_000_000),
    "tune": (0, 1_000_000),
    "chains": (1, 64),
    "thin": (1, 1000),
    "seed": (0, 2**63 - 1),
}

# Most ground-truth trials per row that calibration takes (it sums the predictive pmf over
# every count).
CALIBRATION_MAX_TRIALS = 100_000

# How many times its prior's information a pooled parameter's data must carry for it to
# be sampled centred (hierarchical.choose_form).
CENTRED_MARGIN = 3.0

# target_accept of the refit when a pooled fit diverged (see hierarchical.fit_pooled).
RETRY_TARGET_ACCEPT = 0.99

# The MCMC engines of pooled specs (bayes_eval.inference.engines).
MCMC_ENGINES = ("nutpie", "pymc", "numpyro", "auto")

# Diagnostics thresholds: R-hat, bulk and tail ESS, E-BFMI.
RHAT_MAX = 1.01
ESS_MIN = 400
EBFMI_MIN = 0.3

# Planning: the most trials a plan considers and the default probability of certifying
# (power).
PLAN_MAX_TRIALS = 100_000
PLAN_POWER = 0.8

# Columns of the summary table: a contract that scripts rely on.
SUMMARY_COLUMNS = (
    "agent",
    "task",
    "method",
    "mean",
    "median",
    "sd",
    "lower",
    "upper",
    "level",
    "log10_upper",
    "prob_above",
    "cp_upper",
    "upper_mcse",
    "diagnostics_ok",
    "observed",
    "own_runs",
    "own_successes",
    "own_lower",
    "own_upper",
    "worth_runs",
    "floor_upper",
    "extrapolated",
    "basis",
    "provenance",
)

# What carries a row's verdict at a threshold (the summary's ``basis``): the pair's own
# runs, the model's pooling of other pairs, an extrapolated bound, or a prediction for a
# pair never run.
BASIS_OWN = "own"
BASIS_POOLED = "pooled"
BASIS_EXTRAPOLATED = "extrapolated"
BASIS_PREDICTION = "prediction"
# ``report --basis``: the model's bounds decide (the default), or only a pair's own runs
# may say below.
BASIS_MODEL = "model"
REPORT_BASES = (BASIS_MODEL, BASIS_OWN)
# The prior role of the concentration of a pooled model's cell rates around their task
# mean, by the method of its cells (``Model.cell_method``).
CELL_CONCENTRATION = {
    MILESTONE_METHOD: "milestone_concentration",
    EXPERT_COMPLETION: "step_concentration",
}
