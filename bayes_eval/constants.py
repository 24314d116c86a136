"""Numbers and names that the whole package shares, kept in one place."""

# Dimension names of every labelled array and of the result tree's groups.
AGENT = "agent"
TASK = "task"
MILESTONE = "milestone"
STEP = "step"
RUN = "run"

DEFAULT_AGENT = "agent"
DEFAULT_RUN = "1"

# Evidence methods (the `method` column).
END_TO_END = "end_to_end"
MILESTONE_METHOD = "milestone"
EXPERT_COMPLETION = "expert_completion"
BEST_OF_N = "expert_best_of_n"
GOLDEN = "golden_solution"
METHODS = (END_TO_END, MILESTONE_METHOD, EXPERT_COMPLETION, BEST_OF_N, GOLDEN)
GRADINGS = ("final", "ordered")

# Credible level used when neither the spec nor the user gives one.
DEFAULT_LEVEL = 0.975

# Exact quantiles: largest error in log P (so relative error in P): 0.1%.
QUANTILE_TOLERANCE = 1e-4
# Tail mass of each Beta factor that the grid may lump at the edge of its support.
GRID_TAIL_MASS = 1e-13
# Most grid points one product may use; past it the grid step grows and the
# achieved tolerance (always reported) loosens.
GRID_MAX_POINTS = 2**21
# Largest -log P the grid represents (P = exp(-2000), far below any float's use).
GRID_MAX_X = 2000.0
# Shape parameters at or above which the second-order saddlepoint is used for
# products of two or more factors, and its error in log P there (measured against
# the grid: at most 1.0e-4 at shape 10, 3e-5 from shape 20; tests/test_conjugate.py).
SADDLEPOINT_MIN_SHAPE = 10.0
SADDLEPOINT_ERROR = 2e-4

# Draws kept from exact posteriors, for plots and predictive checks.
DEFAULT_EXACT_DRAWS = 4000
DEFAULT_SEED = 20240901

# MCMC settings a pooled spec does not give (the shipped specs give them all).
SAMPLER_DEFAULTS = {"draws": 2000, "tune": 1000, "chains": 4, "target_accept": 0.9}
# Inclusive ranges of the whole-number sampler settings (spec and command line): beyond
# them a fit would not end or not fit in memory; seeds are what numpy and nutpie take.
SAMPLER_LIMITS = {
    "draws": (1, 1_000_000),
    "tune": (0, 1_000_000),
    "chains": (1, 64),
    "seed": (0, 2**63 - 1),
}

# How many times its prior's information a pooled parameter's data must carry for it to
# be sampled centred (hierarchical.choose_form).
CENTRED_MARGIN = 3.0

# End-to-end trials per task up to which the joint model marginalises the task's milestone
# rates (an exact finite sum whose cost grows as trials cubed); above it they are sampled.
MARGINAL_END_TO_END = 5

# target_accept of the refit when a pooled fit diverged (see hierarchical.fit_pooled).
RETRY_TARGET_ACCEPT = 0.99

# Compiled nutpie models kept per process (a study refits one design many times).
COMPILE_CACHE_SIZE = 4

# Diagnostics thresholds: R-hat, bulk and tail ESS, E-BFMI.
RHAT_MAX = 1.01
ESS_MIN = 400
EBFMI_MIN = 0.3

# Calibration: central predictive interval levels whose coverage is reported, bins of
# the PIT histogram, and the two-sided level of the interval around every observed rate.
CALIBRATION_LEVELS = (0.5, 0.8, 0.9, 0.95)
PIT_BINS = 10
INTERVAL_LEVEL = 0.95

# Planning: the most trials a plan considers, the default probability of certifying
# (power) and the simulated evaluations per candidate.
PLAN_MAX_TRIALS = 100_000
PLAN_POWER = 0.8
# More end-to-end trials than a plan calls practical (the planner then points to milestones).
PLAN_PRACTICAL_TRIALS = 100_000
PLAN_SIMULATIONS = 400
# Probability left undecided at which the exact stopping-time calculation ends.
PLAN_NEGLIGIBLE = 1e-12

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
    "provenance",
)
