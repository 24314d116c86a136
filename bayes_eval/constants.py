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

# Exact quantiles: largest error in X = -log P where X >= 1, and relative to X below, so
# that the relative error of both P and 1 - P is at most 1e-4 (0.01%).
QUANTILE_TOLERANCE = 1e-4
# Tail mass of each Beta factor that the grid may lump at the edge of its support.
GRID_TAIL_MASS = 1e-18
# Beta quantiles below this come from the leading power law of the lower tail (scipy's
# inverse stops at the smallest normal double).
BETA_POWER_LAW_BELOW = 1e-290
# Bins of a factor piled at X = 0 (b < 1), from its lowest, whose mean is computed to split
# their mass between their edges (the later ones are split in halves).
GRID_EXACT_BINS = 64
# Tail probability below which the grid is recomputed tilted to the point's saddlepoint.
GRID_TILT_BELOW = 1e-6
# A quantile near X = 0 is recomputed on grids capped just above it, each this many
# bins, at most GRID_ZOOMS times (each zoom narrows the range about a thousandfold).
GRID_ZOOM_POINTS = 4096
GRID_ZOOMS = 60
# Below this X (P = 1 to 295 digits) the error of a quantile is absolute, 1e-300.
GRID_SMALLEST_X = 1e-296
# Most grid points one product may use; past it the grid step grows and the
# achieved tolerance (always reported) loosens.
GRID_MAX_POINTS = 2**21
# Largest -log P the grid represents (P = exp(-2000), far below any float's use).
GRID_MAX_X = 2000.0
# Shape parameters at or above which the second-order saddlepoint is used for
# products of two or more factors, the largest probability of X = -log P it is used for
# (beyond it, in the upper tail of X, that is the lower bound at levels above 0.99, its
# error grows to 7e-4 where a shape is 10), and its error in X there: at most 6.6e-5
# against mpmath from level 0.5 to 1 - 1e-12 (tests/test_exact_reference.py).
SADDLEPOINT_MIN_SHAPE = 10.0
SADDLEPOINT_MAX_PROB = 0.99
SADDLEPOINT_ERROR = 1e-4

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

# Most ground-truth trials per row that calibration takes (it sums the predictive pmf over
# every count), and the most pmf values it holds at once (draws x counts).
CALIBRATION_MAX_TRIALS = 100_000
CALIBRATION_CHUNK = 10_000_000

# Largest tables `bayes-eval simulate paths` builds (each is fitted by every model, MCMC
# included, at every strength).
PATHS_MAX_TASKS = 10_000
PATHS_MAX_MILESTONES = 100

# Most binomial draws `bayes-eval simulate variance` makes (about ten minutes on one core).
SIMULATE_MAX_DRAWS = 4 * 10**9

# How many times its prior's information a pooled parameter's data must carry for it to
# be sampled centred (hierarchical.choose_form).
CENTRED_MARGIN = 3.0

# End-to-end trials per task up to which the joint model marginalises the task's milestone
# rates (an exact finite sum whose cost grows as trials squared); above it they are
# sampled. Sampled with 7 to 10 trials, weak data, the rates formed a funnel with their
# concentration that failed the gate on 3 of 30 random designs (studies/robustness.py).
# At 10 a gradient costs what the earlier cubic sum cost at 5 (benchmarks/joint_gradient.py).
MARGINAL_END_TO_END = 10

# target_accept of the refit when a pooled fit diverged (see hierarchical.fit_pooled).
RETRY_TARGET_ACCEPT = 0.99

# Compiled nutpie models kept per process (a study refits one design many times).
COMPILE_CACHE_SIZE = 4
# The MCMC engines of pooled specs (bayes_eval.engines).
MCMC_ENGINES = ("nutpie", "pymc", "numpyro", "auto")
# Engine auto: numpyro on a GPU from this many count cells; below, JAX's compile time
# outweighs the GPU (on 2 CPU cores nutpie fits 1,000 cells in 15 s, 5,000 in 85 s:
# benchmarks/scale.py; PyMC's numpyro on an H100 took 43 s at 5,000).
AUTO_JAX_CELLS = 5_000
# --workers: worker processes of a local dask cluster (each one process of this machine).
MAX_WORKERS = 256
# fit --by agent: characters of an agent's name kept in its run folder's name.
FOLDER_NAME_MAX = 64
# Terms of the exact marginal over clusters of runs (bayes_eval.clusters), in all (padded):
# a rate with K successes and F failures has (K + 1)(F + 1); 2 million hold 16 MB a array.
CLUSTER_TERMS_MAX = 2_000_000

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
    "observed",
    "own_upper",
    "worth_runs",
    "floor_upper",
    "extrapolated",
    "provenance",
)
# The reference prior of a cell's own-data bound (own_upper, floor_upper): the uniform
# Beta(1, 1) of the exact end_to_end model.
REFERENCE_PRIOR = (1.0, 1.0)
