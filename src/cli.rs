//! The command line: only the clap definitions, no behaviour.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use gpuwmm::apps::Size;
use gpuwmm::backend::select::BackendChoice;
use gpuwmm::backend::sim::SimModel;
use gpuwmm::env::{Environment, StressKind};
use gpuwmm::job::harden::MinimiseKind;
use gpuwmm::litmus::{AccessFlavour, LitmusShape};
use gpuwmm::ptx::passes::fences::{FenceKind, Granularity};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "gpuwmm",
    version = env!("GPUWMM_VERSION"),
    about = "Expose weak-memory bugs in CUDA applications and harden them with fences",
    long_about = "gpuwmm runs CUDA applications under tuned memory stress and thread randomisation \
to expose weak-memory bugs, finds a minimal set of fences that makes them stable, and measures \
what those fences cost. Everything works on a real GPU (--backend cuda) and on a simulator with \
an operational weak-memory model (--backend sim) for machines without one.",
    after_help = "Start with `gpuwmm devices`, then `gpuwmm ptx sites cbe-dot` to see where fences \
could go in a built-in app (`gpuwmm apps` lists them)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Folder of the compiled-PTX cache (default: $GPUWMM_CACHE_DIR, else
    /// ~/.cache/gpuwmm/ptx, or .cache/ptx of the checkout for a binary run from its build tree).
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and transform PTX: list fence sites, insert or strip fences, add the stress harness.
    #[command(subcommand)]
    Ptx(PtxCommand),
    /// List the GPUs this machine has (with NVML energy support), and the simulator.
    Devices,
    /// Install the CUDA tools gpuwmm compiles with (NVRTC, ptxas, cuobjdump, CCCL headers) from
    /// pinned NVIDIA Python wheels; they run on the CPU, no GPU or toolkit needed.
    ///
    /// Needs python3 with pip and access to PyPI (pip's own variables, e.g. PIP_INDEX_URL or
    /// PIP_FIND_LINKS, are honoured). Does nothing where a CUDA toolkit is found (unless
    /// --force), and a second run only checks. gpuwmm finds the folder by itself afterwards.
    #[command(after_help = "Examples:
  gpuwmm setup                          # into ~/.local/share/gpuwmm/cuda-tools
  gpuwmm setup --dir /opt/gpuwmm-tools  # then export GPUWMM_CUDA_TOOLS=/opt/gpuwmm-tools")]
    Setup(SetupArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to standard output.
    #[command(after_help = "Example (bash):
  gpuwmm completions bash > ~/.local/share/bash-completion/completions/gpuwmm")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output.
    #[command(after_help = "Example:
  gpuwmm man > ~/.local/share/man/man1/gpuwmm.1 && man gpuwmm")]
    Man,
    /// Run a litmus test (MP, SB, LB, CoRR) between two blocks and print the outcome histogram,
    /// or (`litmus run`) litmus files.
    ///
    /// Thread 0 and thread 1 of each instance run in different blocks. The weak outcome is the one
    /// sequential consistency forbids: MP r0=1,r1=0 (flag seen, data not); SB r0=0,r1=0; LB
    /// r0=1,r1=1; CoRR r0=1,r1=0. `gpuwmm litmus run --help` runs tests written as files.
    #[command(after_help = "Examples:
  gpuwmm litmus mp --backend sim --iterations 10000 --fence-t0 fence.sc.gpu
  gpuwmm litmus generate --out generated && gpuwmm litmus run generated/MP --backend sim")]
    Litmus(LitmusArgs),
    /// Tune memory stress for this chip: critical patch size, access sequence, spread.
    ///
    /// Runs the paper's three micro-benchmark stages with MP, LB and SB between two blocks while
    /// stressing blocks (a random 50–100% of the device's resident threads) hammer a scratchpad.
    ///
    /// Stage 1: every stressing thread stores to and loads from one word l < L, at every distance
    /// d < D; runs of locations with more than ε weak behaviours are ε-patches, and the size most
    /// of them share is the critical patch size P. Stage 2: every access sequence σ of up to N
    /// loads and stores, at the first word of each P-word region. Stage 3: σ at m random regions
    /// among M. A stage whose candidates do not differ beyond chance (chi-square, p ≥ 0.01)
    /// chooses nothing: the default profile's value is kept, and the output says so.
    ///
    /// Each (test, distance, location or σ or m) runs C times and is one row of a CSV journal,
    /// so an interrupted tuning resumes with --resume. Writes tuning/<chip>.toml (what check and
    /// harden read) and, in the out folder, the journal, summary.md and charts.
    #[command(
        after_help = "The paper's budgets (the defaults) take days on a GPU; a first look:
  gpuwmm tune --backend cuda --distances 256 --distance-step 32 --executions 200
On the simulator (which has no caches: expect no patch structure), small budgets:
  gpuwmm tune --backend sim --distances 64 --distance-step 16 --locations 64 --executions 50 \\
      --max-sequence 3 --max-spread 4 --profile-out /tmp/sim.toml
Skip stages with values you trust:
  gpuwmm tune --patch-words 32 --sequence 'ld st2 ld'      # stage 3 only
  gpuwmm tune --resume --out results/tune/<chip>-<date>     # continue an interrupted tuning
  gpuwmm tune --resume        # the newest unfinished one with the same chip, seed and budgets
On a Slurm cluster, one job per GPU kind (node feature):
  gpuwmm tune --backend cuda --slurm --constraint a100 --constraint h100 --gres gpu:1 --time 2-00:00:00"
    )]
    Tune(TuneArgs),
    /// Run an application under stress and check its post-condition, for a run count or a duration.
    ///
    /// Each run adds a random 15–50% of the app's blocks as stressing blocks (for `sys-str`,
    /// `rand-str`, `cache-str`), with stress calibrated to last about 10× the app's kernel, and
    /// with `+` gives blocks and warps random ids. Runs execute in a worker process: a hung kernel
    /// is recorded as `timeout`, a fault or a dying worker as `crash`, and the check goes on.
    /// Every run is appended to a CSV journal under results/check/, which `--resume` continues
    /// and `gpuwmm replay` re-runs from.
    #[command(after_help = "Examples:
  gpuwmm check cbe-dot --env sys-str+ --runs 1000
  gpuwmm check sdk-red-nf --env no-str- --duration 2m --backend cuda
  gpuwmm check cbe-dot --env sys-str+ --runs 1000 --resume     # continue the newest unfinished check
  gpuwmm check cbe-dot --fences all --runs 10000 --json | jq .confidence
  gpuwmm check cbe-dot --fences 2 --runs 500                    # with a fence at site 2 (`gpuwmm ptx sites`)")]
    Check(CheckArgs),
    /// Check every app under every environment: the paper's apps × environments matrix.
    ///
    /// Each cell is a check (its own stress calibration and journal `<out>/<app>-<env>.csv`,
    /// which `gpuwmm replay` reads). At the end `summary.csv` (one row per cell) and
    /// `summary.md` (apps × environments, `*` where the error rate is above 5%, and per
    /// environment the apps with errors / effective) are written to the out folder, and the
    /// Markdown is printed.
    #[command(after_help = "Examples:
  gpuwmm campaign --apps all --envs all --runs 1000
  gpuwmm campaign --apps cbe-dot,sdk-red --envs no-str-,sys-str+ --duration 1m --backend sim
  gpuwmm campaign --apps all --envs all --runs 1000 --resume   # continue an interrupted campaign
  gpuwmm campaign --apps all --envs all --duration 1h --slurm --partition gpu --gres gpu:1 \\
      --time 1:10:00 --out /shared/campaign                      # one Slurm array task per cell
  gpuwmm campaign --collect /shared/campaign                    # summaries and cell status, any time")]
    Campaign(CampaignArgs),
    /// Re-run one run of a check, campaign or harden journal in this process and compare its
    /// outcome.
    ///
    /// The run gets the same seed, fences and stress, and so the same inputs, stressing blocks,
    /// permutations and stress locations. The simulator replays a run exactly; on a GPU the
    /// interleaving is not deterministic, so a replay may differ. A harden journal holds many
    /// queries (fence sets), each with runs numbered from 0: name the query with --query.
    #[command(after_help = "Examples:
  gpuwmm replay results/check/cbe-dot-sys-str+-sim-seed1.csv 17
  gpuwmm replay results/harden/cbe-dot-sys-str+-sim-seed1.csv 0 --query 3")]
    Replay(ReplayArgs),
    /// Find a minimal set of fences that makes an application stable under stress.
    ///
    /// Starting with a fence at every candidate site (`gpuwmm ptx sites`), the search drops
    /// fences by halves, then one at a time, keeping a removal when I runs under stress show no
    /// error. The result must then pass a stability check (--stable-runs or --stable-duration);
    /// if it fails, the search starts again from all fences with I doubled. Every run is appended
    /// to a CSV journal under results/harden/, which `--resume` continues after an interruption.
    /// The fences are reported as source lines and a patch; the app rebuilt from that patch is
    /// then run (--patch-runs). Exit code 0: a stable set whose patch passed; 1: no stable set,
    /// or a patch that does not build or failed a run; 2: bad input.
    #[command(after_help = "Examples:
  gpuwmm harden cbe-dot --backend sim
  gpuwmm harden sdk-red-nf --backend cuda --stable-duration 1h
  gpuwmm harden cbe-dot --backend sim --resume      # continue an interrupted hardening")]
    Harden(HardenArgs),
    /// Measure what fences cost: runtime and energy of no, empirical and conservative fences.
    ///
    /// Each app runs natively (no stress, no thread randomisation) in up to three variants,
    /// all from the app with its own fences stripped: `no` (no fences), `emp` (the fences a
    /// hardening kept, with their kinds) and `cons` (a fence after every memory access). After
    /// warm-up runs, the variants run interleaved (no, emp, cons, no, …) with the same input per
    /// repetition; runs failing the post-condition are discarded and counted. Runtime is kernel
    /// time from CUDA events (on the simulator: the busiest thread's instruction count, labelled
    /// as such). Energy, on a GPU with NVML, comes from the total-energy counter over windows of
    /// back-to-back runs (at least 5 s and 32 runs), interleaved and separated by random idle
    /// gaps over which idle power is measured. Every figure is a median with a 95%
    /// distribution-free interval; overheads are medians of paired ratios over `no`.
    ///
    /// Writes cost.csv (one row per run, appended as it goes; --resume continues it),
    /// summary.md, summary.json, cost.svg and, where measured, energy.svg to the out folder.
    #[command(after_help = "Examples:
  gpuwmm cost cbe-dot --backend sim --runs 200 --emp results/harden/cbe-dot-sys-str+-sim-seed1.csv
  gpuwmm cost cbe-dot sdk-red --backend cuda --duration 2m --target-ci 0.5%
  gpuwmm cost cbe-dot --variants no,cons --runs 100       # no harden result needed
  gpuwmm cost --resume --out results/cost/cuda-seed1      # continue an interrupted measurement")]
    Cost(CostArgs),
    /// List the applications gpuwmm knows: name, idiom, post-condition; or show one as a check
    /// reads it.
    ///
    /// With a name or --app-dir, the app is compiled at both sizes and its launches resolved
    /// against the kernels compiled, as a check does before its first run: a wrong kernel name,
    /// argument count or a source NVRTC refuses exits with code 2, naming the file and line.
    /// Otherwise it shows the sizes, buffers (name, type, length, contents), launches (kernel as
    /// resolved, grid, block, arguments, repeat) and the check kernel with its inputs.
    #[command(after_help = "Examples:
  gpuwmm apps                      # every app: name, idiom, post-condition
  gpuwmm apps sdk-red              # one built-in app as a check reads it
  gpuwmm apps --app-dir myapp      # your app: is it read as intended?")]
    Apps(AppsArgs),
    /// Internal: the worker process of `check` and `harden` (JSON lines on stdin and stdout).
    #[command(hide = true)]
    Worker,
}

/// What app runs where, and how: shared by `check`, `harden` and `campaign`.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Also load a bring-your-own app: a folder with `kernel.cu` and `app.toml` (see apps/README.md).
    #[arg(long)]
    pub app_dir: Option<PathBuf>,
    /// Input size: `sim` (small) or `gpu`; default `gpu` on a GPU and `sim` on the simulator.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<Size>,
    /// The fence instruction inserted at fence sites.
    #[arg(long, default_value_t = FenceKind::ScGpu, value_parser = parse_fence_kind)]
    pub fence_kind: FenceKind,
    /// Fence sites: `line`, one per source line (code inlined from a helper counts as the line
    /// that calls it); `inner-line`, one per line an access is written on, inside helpers and
    /// headers too (one site, and one fence in the patch, for every call of a helper); or
    /// `instruction`, one per PTX access instruction.
    #[arg(long, default_value_t = Granularity::SourceLine, value_parser = by_name::<Granularity>())]
    pub granularity: Granularity,
    /// A kernel still running after this long is a timeout (e.g. 30s, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub deadline: Duration,
    /// Stress lasts about this many times the app's kernel (calibrated per environment);
    /// 0.01 to 1000.
    #[arg(long, default_value_t = 10.0, value_parser = gpuwmm::limits::parse_stress_factor)]
    pub stress_factor: f64,
    /// A stress profile (TOML) to use instead of tuning/<chip>.toml.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Simulator only: thread-instructions per launch before it counts as a timeout (1 to 10^12).
    #[arg(long, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::SIM_BUDGET))]
    pub sim_budget: Option<u64>,
    /// Run in this process instead of a supervised worker (starts faster, but a crash ends it).
    #[arg(long)]
    pub in_process: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// When a check stops.
#[derive(Debug, Args)]
#[group(required = false, multiple = false)]
pub struct StopArgs {
    /// Stop after this many runs, 1 to 10^9 (default: see each command's help).
    #[arg(
        long,
        value_parser = clap::value_parser!(u64).range(gpuwmm::limits::RUNS),
        help = runs_help("runs", gpuwmm::check::driver::DEFAULT_RUNS)
    )]
    pub runs: Option<u64>,
    /// Stop once the runs took this long (e.g. 90s, 10m, 1h); a resumed check counts the
    /// time already spent.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

/// Where the journal goes.
#[derive(Debug, Args)]
pub struct JournalArgs {
    /// The CSV journal (default: results/<command>/<app>-<env>-<backend>-seed<seed>.csv, or
    /// with -2, -3, … before .csv when that exists: a new journal for every run). An existing
    /// file given here is continued with --resume and otherwise refused.
    #[arg(long)]
    pub journal: Option<PathBuf>,
    /// Continue the check or hardening recorded in the journal, from the run after the last one
    /// recorded (with the journal's settings). Without --journal: the newest unfinished default
    /// journal of the same app, environment, backend and seed.
    #[arg(long)]
    pub resume: bool,
    /// With --resume: go on although an option given differs from the journal's, or the app's
    /// sources or PTX changed since (or the journal is too old to say). The job keeps the
    /// journal's options and runs the app as it is now; the sidecar's `forced` list records it.
    #[arg(long, requires = "resume")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The application (`gpuwmm apps` lists them); optional with --app-dir, whose app.toml
    /// names it.
    #[arg(required_unless_present = "app_dir")]
    pub app: Option<String>,
    /// The testing environment: no-str, sys-str, rand-str or cache-str, then + (thread
    /// randomisation) or -.
    #[arg(long, default_value = "sys-str+", value_parser = parse_env)]
    pub env: Environment,
    /// Which fences: `as-is` (the app unchanged), `all`, `none`, or site ids from `gpuwmm ptx
    /// sites` (`0,2,5-7`), inserted in addition to fences the app has; each of its own kind
    /// with `id@kind`, as harden's final fences are (`0@fence.sc.gpu,2@fence.acq_rel.gpu`).
    #[arg(long, default_value = "as-is")]
    pub fences: String,
    #[command(flatten)]
    pub stop: StopArgs,
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Print the results as one JSON document on stdout instead of the summary (progress and
    /// warnings stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// Simulator: record in every run the conflicting accesses of different threads that
    /// causality order leaves unordered, and report them summed over the runs as pairs of
    /// source lines, in three classes: data races (undefined under PTX), unsynchronised pairs a
    /// fence can order (and what is missing), and unsynchronised pairs no fence can order (and
    /// what would). `--races strict` shows data races only. Kept in `<journal>.races.jsonl`, so
    /// `--resume` goes on with it.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "strict")]
    pub races: Option<gpuwmm::check::races::RaceMode>,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
    /// D: distances 0 ≤ d < D, in words between x and y (0 = adjacent); 1 to 65536.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::TUNE_COUNT))]
    pub distances: u32,
    /// Test every this many-th distance only (1 = all, as in the paper); 1 to 65536.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::TUNE_COUNT))]
    pub distance_step: u32,
    /// L: stage 1 stresses each scratchpad word 0 ≤ l < L; 1 to 65536.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::TUNE_COUNT))]
    pub locations: u32,
    /// C: executions of each test configuration; 1 to 10^9.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::EXECUTIONS))]
    pub executions: u64,
    /// N: stage 2 tries every access sequence of 1 to N loads and stores; 1 to 10.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::MAX_SEQUENCE))]
    pub max_sequence: u32,
    /// M: stage 3 tries spreads 1 to M; M is 1 to 1024.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::MAX_SPREAD))]
    pub max_spread: u32,
    /// ε: a location belongs to an ε-patch when it gave more than ε weak behaviours.
    #[arg(long, default_value_t = 3)]
    pub epsilon: u64,
    /// The litmus tests every stage scores, separated by commas.
    #[arg(long, default_value = "mp,lb,sb", value_delimiter = ',', value_parser = parse_shape)]
    pub tests: Vec<LitmusShape>,
    /// Skip stage 1 with this critical patch size (words, 1 to 65536).
    #[arg(long, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::TUNE_COUNT))]
    pub patch_words: Option<u32>,
    /// Skip stage 2 with this access sequence (e.g. 'ld st2 ld'); needs --patch-words.
    #[arg(long, requires = "patch_words")]
    pub sequence: Option<String>,
    /// Test instances per launch: 1 is the paper's one test per launch; more run side by side,
    /// each in its own pair of blocks and memory (faster, and counted as that many executions);
    /// 1 to 4096.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::INSTANCES))]
    pub instances: u32,
    /// Threads per block, test and stressing blocks alike; 1 to 1024.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::BLOCK_THREADS))]
    pub block_threads: u32,
    /// Resident threads each launch fills 50–100% of (default: the device's; 1024 on the
    /// simulator, which would otherwise interpret 32,768 threads per launch); 1 to 65536.
    #[arg(long, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::TUNE_COUNT))]
    pub max_threads: Option<u32>,
    /// Iterations of σ by every stressing thread (default 1000 on a GPU, 16 on the simulator);
    /// 0 to 10^9.
    #[arg(long, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::STRESS_ITERATIONS))]
    pub stress_iterations: Option<u32>,
    /// Where the journal, summary and charts go (default results/tune/<chip>-<date>, or with
    /// -2, -3, … when that exists: a new folder for every run).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the tuning in --out (without --out: the newest unfinished one under
    /// results/tune/ with the same chip, seed and budgets): recorded configurations are not run
    /// again.
    #[arg(long)]
    pub resume: bool,
    /// Where the profile goes (default tuning/<chip>.toml; with --slurm, only for one
    /// --constraint).
    #[arg(long)]
    pub profile_out: Option<PathBuf>,
    /// Replace an existing profile file; with --resume, also go on with a tuning whose settings
    /// differ from those given, with the tuning's own settings (its sidecar's `forced` list
    /// records it).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub slurm: TuneSlurmArgs,
}

/// Tuning each GPU kind of a Slurm cluster: one job per kind.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Slurm")]
pub struct TuneSlurmArgs {
    /// Submit one tuning job per --constraint to Slurm (each resuming its journal in
    /// <out>/<kind>/ when requeued, and writing tuning/<chip>.toml), and print the job ids.
    #[arg(long)]
    pub slurm: bool,
    /// A GPU kind as the cluster's node features name it (`--constraint` of sbatch), one per
    /// use: one job each.
    #[arg(long, requires = "slurm", required_if_eq("slurm", "true"))]
    pub constraint: Vec<String>,
    #[command(flatten)]
    pub sbatch: SbatchArgs,
    /// Write the batch scripts, print them and the sbatch commands, and submit nothing.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The applications: names separated by commas, or `all` (the built-in apps, and the one in
    /// --app-dir).
    #[arg(long, required_unless_present = "collect")]
    pub apps: Option<String>,
    /// The testing environments: names separated by commas (e.g. `no-str-,sys-str+`), or `all`
    /// (the paper's eight).
    #[arg(long, required_unless_present = "collect")]
    pub envs: Option<String>,
    /// Which fences every app runs with: `as-is`, `all` or `none` (site ids are per app).
    #[arg(long, default_value = "as-is")]
    pub fences: String,
    /// When each cell stops (--runs or --duration per cell; on --resume, the recorded one
    /// unless given).
    #[command(flatten)]
    pub stop: StopArgs,
    /// The folder of the journals and summaries (default: results/campaign/<backend>-seed<seed>,
    /// or with -2, -3, … when that exists: a new folder for every run).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the campaign in the out folder (without --out: the newest unfinished default
    /// folder of the same backend and seed): unfinished cells go on, finished ones are kept.
    #[arg(long)]
    pub resume: bool,
    /// With --resume: go on although an option given differs from the one the campaign or a
    /// cell's journal records, or an app's sources or PTX changed since; recorded in each
    /// journal's sidecar (see `check --force`).
    #[arg(long, requires = "resume")]
    pub force: bool,
    /// Read the campaign in this folder (run here or on Slurm, finished or not) and write its
    /// summaries, with each cell's status (done, running, waiting, not started, failed).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["slurm", "resume", "out"])]
    pub collect: Option<PathBuf>,
    #[command(flatten)]
    pub slurm: SlurmArgs,
    /// Internal (what a Slurm array task runs): run only this cell of the plan in --out.
    #[arg(long, hide = true, requires = "out", conflicts_with = "slurm")]
    pub cell: Option<usize>,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Handing a campaign to Slurm as one job array, one task per cell.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Slurm")]
pub struct SlurmArgs {
    /// Submit the campaign to Slurm (`sbatch --array`), one task per app × environment, each
    /// resuming its cell's journal in --out (a shared file system), and print the job id.
    #[arg(long)]
    pub slurm: bool,
    #[command(flatten)]
    pub sbatch: SbatchArgs,
    /// At most this many tasks at once (`--array=0-N%K`).
    #[arg(long, requires = "slurm", value_parser = clap::value_parser!(u32).range(1..))]
    pub array_limit: Option<u32>,
    /// Write the plan and the batch script, print the sbatch command, and submit nothing.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
}

/// What every Slurm job gpuwmm submits may ask of sbatch (for a campaign, of each array task).
#[derive(Debug, Clone, Args)]
pub struct SbatchArgs {
    /// The partition the jobs run in.
    #[arg(long, requires = "slurm")]
    pub partition: Option<String>,
    /// Generic resources of each job, e.g. `gpu:1`.
    #[arg(long, requires = "slurm")]
    pub gres: Option<String>,
    /// Time limit of each job, in Slurm's format (e.g. `1:10:00` or `2-00:00:00`).
    #[arg(long, requires = "slurm")]
    pub time: Option<String>,
    /// Another sbatch option for every batch script, one per use (e.g. `--sbatch-arg=--mem=8G`).
    #[arg(
        long,
        requires = "slurm",
        allow_hyphen_values = true,
        value_name = "ARG"
    )]
    pub sbatch_arg: Vec<String>,
}

/// How long the stability check runs.
#[derive(Debug, Args)]
#[group(required = false, multiple = false)]
pub struct StableArgs {
    /// The stability check passes after this many runs without an error, 1 to 10^9 (default
    /// 10000 on the simulator).
    #[arg(long, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::RUNS))]
    pub stable_runs: Option<u64>,
    /// The stability check passes once its runs took this long without an error (default 1h, the
    /// paper's hour, on a GPU).
    #[arg(long, value_parser = parse_duration)]
    pub stable_duration: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct HardenArgs {
    /// The application (`gpuwmm apps` lists them); the `-nf` variants have their fences removed.
    /// Optional with --app-dir, whose app.toml names it.
    #[arg(required_unless_present = "app_dir")]
    pub app: Option<String>,
    /// The testing environment every run uses.
    #[arg(long, default_value = "sys-str+", value_parser = parse_env)]
    pub env: Environment,
    #[command(flatten)]
    pub stable: StableArgs,
    /// Runs per check in the first round (I, 1 to 10^9); each new round doubles it.
    #[arg(long, default_value_t = gpuwmm::harden::algorithm::INITIAL_ITERATIONS, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::ITERATIONS))]
    pub iterations: u64,
    /// Rounds at most (1 to 64): after this many, the last result is reported as not stable.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::ROUNDS))]
    pub max_rounds: u32,
    /// After Algorithm 1, try weaker fences in place of each kept one (fence.acq_rel.gpu, then
    /// membar.cta, then fence.acq_rel.cta), keeping the weakest that passes `I` runs and the
    /// stability check. `auto`: on where the backend tells fence kinds apart (a GPU, or the
    /// simulator's `ptx` model), off on the simulator's `sc` and `weak` models.
    #[arg(long, default_value_t = MinimiseKind::Auto, value_parser = by_name::<MinimiseKind>())]
    pub minimise_kind: MinimiseKind,
    /// How the patch writes fences. `exact`: the CUDA statement of the kind kept
    /// (`__threadfence()`, `__threadfence_block()`, `__threadfence_system()`, and libcu++'s
    /// `cuda::atomic_thread_fence` for release/acquire kinds, with its `#include`).
    /// `threadfence`: `__threadfence*()` only; a release/acquire fence becomes the stronger
    /// sequentially consistent fence of its scope, and the report says so.
    #[arg(long, value_enum, default_value_t = gpuwmm::harden::report::FenceStyle::Exact)]
    pub fence_style: gpuwmm::harden::report::FenceStyle,
    /// Once the search is stable, build the app from the patch (in memory: your files are not
    /// touched) and run it this many times under the same environment and stress, stopping at
    /// the first run that does not pass: a patch that does not compile or does not keep the
    /// app passing ends harden with exit code 1. 0 skips the check (0 to 10^9).
    #[arg(long, default_value_t = gpuwmm::harden::verify::DEFAULT_PATCH_RUNS, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub patch_runs: u64,
    /// Worker processes that run a query's runs side by side (default: one per core on the
    /// simulator, one on a GPU). Each run's seed depends only on its query and number, and runs
    /// are judged and journaled in order, so the fences found and the journal do not depend on
    /// it (only the timing columns do). 1 to 256.
    #[arg(long, value_parser = gpuwmm::limits::parse_jobs)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub journal: JournalArgs,
    /// Print the results as one JSON document on stdout instead of the fences, patch and
    /// summary (the search's lines go to stderr, with progress and warnings).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Where to install (default: the user's data folder, ~/.local/share/gpuwmm/cuda-tools, or
    /// .cuda-tools of the checkout for a binary run from its build tree).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Install even where a CUDA toolkit is found, and reinstall over a complete folder.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A check, campaign or harden journal (`.csv`, with its `.json` beside it).
    pub journal: PathBuf,
    /// The run number to replay (the journal's `run` column).
    pub run: u64,
    /// For a harden journal: the query the run belongs to (the journal's `query` column; harden
    /// prints it as `#Q` on each line of its search).
    #[arg(long)]
    pub query: Option<usize>,
    /// The bring-your-own app's folder, when it is no longer where the journal records it
    /// (a journal of a built-in app takes none).
    #[arg(long)]
    pub app_dir: Option<PathBuf>,
    /// Replay although the app's sources or PTX are not those the run ran with (or the journal
    /// recorded none): the run replayed may then not be the one recorded.
    #[arg(long)]
    pub force: bool,
}

fn parse_env(s: &str) -> Result<Environment, String> {
    s.parse()
}

fn parse_size(s: &str) -> Result<Size, String> {
    s.parse()
}

/// Parses `90s`, `10m`, `1h`, `1h30m`, `500ms`, or a number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("bad duration '{s}' (expected e.g. 30s, 10m, 1h, 1h30m, 500ms)");
    let text = s.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds))
            .ok_or_else(bad);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += Duration::from_secs_f64(value * scale);
        rest = &rest[unit_len..];
    }
    if total.is_zero() && text != "0s" {
        return Err(bad());
    }
    Ok(total)
}

#[derive(Debug, Args)]
pub struct AppsArgs {
    /// One app to show as a check reads it: compiled at both sizes, its launches resolved
    /// (sizes, buffers, launches, check); without it (and --app-dir), every app in a list.
    pub name: Option<String>,
    /// A bring-your-own app to show as a check reads it: a folder with `kernel.cu` and
    /// `app.toml` (see apps/README.md); exit code 2 on the errors a check would give.
    #[arg(long)]
    pub app_dir: Option<PathBuf>,
}

/// The help of `--runs`: its range and the command's default.
fn runs_help(what: &str, default: u64) -> String {
    format!(
        "Stop after this many {what}, 1 to 10^9 (default {default} when --duration is not given)"
    )
}

#[derive(Debug, Args)]
#[command(mut_arg("runs", |arg| arg.help(runs_help(
    "repetitions per app (each runs every variant once)",
    gpuwmm::cost::DEFAULT_REPETITIONS,
))))]
pub struct CostArgs {
    /// The applications (`gpuwmm apps` lists them); not needed with --resume, nor with
    /// --app-dir alone (the app of that folder).
    pub apps: Vec<String>,
    /// Which fence sets to measure, separated by commas; `no` is the baseline and required.
    #[arg(long, default_value = "no,emp,cons")]
    pub variants: String,
    /// Where `emp`'s fences come from: a harden journal (its .csv or .json sidecar) or what
    /// `harden --json` printed; `auto` takes the newest finished, stable hardening of the app
    /// (or its -nf variant) on this backend under results/harden/, and runs `gpuwmm harden`
    /// first (saying so) when there is none. Give one file per app, in the apps' order.
    #[arg(long, default_value = "auto", value_delimiter = ',')]
    pub emp: Vec<String>,
    /// Timing repetitions per app (each runs every variant once), or with --duration the time
    /// per app; default 200 repetitions.
    #[command(flatten)]
    pub stop: StopArgs,
    /// Stop an app's timing early once every overhead's 95% interval has at most this
    /// half-width, in percentage points of overhead (`0.5%`, or `0.005`).
    #[arg(long, value_parser = parse_fraction)]
    pub target_ci: Option<f64>,
    /// Uncounted runs of each variant before measuring (0 to 10^6).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::WARMUP))]
    pub warmup: u64,
    /// Energy windows per variant (GPU with NVML only; 1 to 1000).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::WINDOWS))]
    pub windows: u32,
    /// An energy window lasts at least this long (the energy counter advances about every 100 ms).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub window_time: Duration,
    /// An energy window holds at least this many runs (1 to 10^9).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::RUNS))]
    pub window_runs: u64,
    /// The folder of cost.csv and the summaries (default results/cost/<backend>-seed<seed>, or
    /// with -2, -3, … when that exists: a new folder for every run).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the measurement in --out (without --out: the newest unfinished default folder of
    /// the same backend and seed); runs recorded are kept, the measurement's settings are the
    /// recorded ones.
    #[arg(long)]
    pub resume: bool,
    /// With --resume: go on although an option given differs from the measurement's, or an
    /// app's sources or PTX changed since; recorded in the sidecar (see `check --force`).
    #[arg(long, requires = "resume")]
    pub force: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// A fraction, written as `0.5%` or `0.005`.
fn parse_fraction(s: &str) -> Result<f64, String> {
    let (number, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (s, 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a fraction (e.g. 0.5% or 0.005)"))?;
    if value.is_nan() || value <= 0.0 || !value.is_finite() {
        return Err(format!("'{s}' must be above 0"));
    }
    Ok(value * scale)
}

#[derive(Debug, Subcommand)]
pub enum PtxCommand {
    /// Print the candidate fence sites: id, source file:line, the source line, the PTX access.
    ///
    /// A site is a place after a global or generic load, store, atomic or reduction where a fence
    /// may go. With `--granularity line` (default) all accesses of one source line form one site.
    ///
    /// For an app (a built-in name, or `--app-dir DIR`) the sites are numbered exactly as
    /// `check --fences` and `harden` number them: the app's kernels only, not its check kernel.
    /// A bare `.cu` or `.ptx` file is listed kernel by kernel, numbered over the whole file.
    Sites(SitesArgs),
    /// Write transformed PTX: fences inserted or stripped, optionally the stress harness.
    Instrument(InstrumentArgs),
}

#[derive(Debug, Args)]
pub struct InputArgs {
    /// A CUDA source (`.cu`, compiled with NVRTC and line info) or PTX (`.ptx`) file.
    pub input: PathBuf,
    /// Target architecture for NVRTC, e.g. `sm_90`. The default, `portable`, is the oldest one
    /// the NVRTC found accepts (`sm_70` with CUDA 12, `sm_75` with CUDA 13); its PTX runs on every
    /// newer GPU.
    #[arg(long, default_value = "portable")]
    pub arch: String,
    /// Fence sites: `line`, one per source line (code inlined from a helper counts as the line
    /// that calls it); `inner-line`, one per line an access is written on, inside helpers and
    /// headers too (one site, and one fence in the patch, for every call of a helper); or
    /// `instruction`, one per PTX access instruction.
    #[arg(long, default_value_t = Granularity::SourceLine, value_parser = by_name::<Granularity>())]
    pub granularity: Granularity,
}

#[derive(Debug, Args)]
pub struct SitesArgs {
    /// An application (`gpuwmm apps` lists them), or a CUDA source (`.cu`) or PTX (`.ptx`)
    /// file; optional with --app-dir.
    #[arg(required_unless_present = "app_dir")]
    pub input: Option<PathBuf>,
    /// A bring-your-own app folder (`kernel.cu` + `app.toml`): its sites as check and harden
    /// number them.
    #[arg(long)]
    pub app_dir: Option<PathBuf>,
    /// Target architecture for NVRTC (files only; apps use the portable one, as check does).
    #[arg(long, default_value = "portable")]
    pub arch: String,
    /// Fence sites: `line`, one per source line (code inlined from a helper counts as the line
    /// that calls it); `inner-line`, one per line an access is written on, inside helpers and
    /// headers too (one site, and one fence in the patch, for every call of a helper); or
    /// `instruction`, one per PTX access instruction.
    #[arg(long, default_value_t = Granularity::SourceLine, value_parser = by_name::<Granularity>())]
    pub granularity: Granularity,
    /// Print the sites as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InstrumentArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Sites that get a fence: `all`, `none`, or ids and ranges from `ptx sites` (`0,2,5-7`).
    #[arg(long, default_value = "none")]
    pub fences: String,
    /// The fence instruction to insert.
    #[arg(long, default_value_t = FenceKind::ScGpu, value_parser = parse_fence_kind)]
    pub fence_kind: FenceKind,
    /// Remove the fences already in the PTX first (this makes the `-nf` variants).
    #[arg(long)]
    pub strip: bool,
    /// Add the stress harness: a control-block parameter, stressing blocks after the app's
    /// blocks, virtual (randomisable) block and thread ids. Fences go in first.
    #[arg(long)]
    pub harness: bool,
    /// The kernel to harness (needed when the module has more than one).
    #[arg(long, requires = "harness")]
    pub kernel: Option<String>,
    /// What the stressing blocks do: none, sys (the access sequence at `spread` locations), rand
    /// (random loads/stores), cache (walk an L2-sized scratchpad).
    #[arg(long, default_value_t = StressKind::Sys, value_parser = by_name::<StressKind>(), requires = "harness")]
    pub stress: StressKind,
    /// The sys access sequence, e.g. "ld st" or "st2 ld".
    #[arg(long, default_value = "ld st", requires = "harness")]
    pub sequence: String,
    /// Output file (standard output if absent).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Which backend runs the kernels, and how the simulator behaves.
#[derive(Debug, Clone, Args)]
pub struct BackendArgs {
    /// `cuda` (a real GPU), `sim` (the simulator), or `auto`: cuda where a driver and a GPU are
    /// present, else sim.
    #[arg(long, default_value_t = BackendChoice::Auto, value_parser = by_name::<BackendChoice>())]
    pub backend: BackendChoice,
    /// The simulator's memory model: `ptx` (the PTX memory consistency model, see README),
    /// `sc` (sequential consistency), or the store-buffer model of gpuwmm 0.1, `weak` /
    /// `weak-stale` (not PTX; kept to replay journals recorded with it).
    #[arg(long, default_value_t = SimModel::Ptx, value_parser = by_name::<SimModel>())]
    pub sim_model: SimModel,
    /// Seed of everything random (recorded with results, so a run can be replayed).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LitmusArgs {
    #[command(subcommand)]
    pub command: Option<LitmusCommand>,
    /// The test: mp, sb, lb or corr.
    #[arg(value_parser = parse_shape, required = true)]
    pub test: Option<LitmusShape>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Where y lies after x, in 32-bit words: 1 = adjacent (1 to 65536). tune counts the words
    /// between them instead: its distance d is --distance d+1 here.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::DISTANCE))]
    pub distance: u32,
    /// Fence between thread 0's two accesses (fence.sc.gpu, membar.gl, fence.acq_rel.gpu,
    /// membar.cta, fence.sc.sys).
    #[arg(long, value_parser = parse_fence_kind)]
    pub fence_t0: Option<FenceKind>,
    /// Fence between thread 1's two accesses.
    #[arg(long, value_parser = parse_fence_kind)]
    pub fence_t1: Option<FenceKind>,
    /// Kernel launches (1 to 10^9).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::ITERATIONS))]
    pub iterations: u64,
    /// Test instances per launch (each with its own pair of blocks and locations; 1 to 4096).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::INSTANCES))]
    pub instances: u32,
    /// Threads per block (only thread 0 of a block takes part; 1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::BLOCK_THREADS))]
    pub block_threads: u32,
    /// How the accesses are spelled: volatile, relaxed (relaxed.gpu) or cg.
    #[arg(long, default_value_t = AccessFlavour::Volatile, value_parser = by_name::<AccessFlavour>())]
    pub access: AccessFlavour,
}

#[derive(Debug, Subcommand)]
pub enum LitmusCommand {
    /// Run litmus files (the PTX dialect of Dat3M's suite) and, with --expect, compare them
    /// with known verdicts.
    ///
    /// Each file is translated into one PTX kernel: every thread runs in the CTA the file names
    /// (one block per CTA; a launch holds --instances copies of the test side by side), locations
    /// are global words --distance words apart, registers are 32-bit. Each test prints a
    /// herd-style report: its final states with counts (`*>` marks states satisfying the
    /// condition), Ok/No, the positive/negative witnesses and the observation (Never, Sometimes,
    /// Always). Only executions in which every thread finished have a final state; launches
    /// that hang are counted as not finished.
    ///
    /// Supported: ld/st (weak, volatile, relaxed, acquire/release, at cta/gpu/sys scope), fence.sc,
    /// fence.acq_rel, membar.{cta,gl,sys}, atom/red (add, sub, exch, cas, inc, dec, and, or, xor,
    /// min, max), bar.cta.sync and bar.cta.arrive in Dat3M's operands (id, or instance, id and
    /// an optional count of litmus threads; ids 0-15 or in a register; each litmus thread runs
    /// as lane 0 of its own warp), branches, goto, labels, add/sub/mul/div, and `ld r, 5`.
    /// Threads on several GPUs (`P1@cta 0,gpu 1`) run on the simulator, which places each
    /// CTA's block on its GPU (`.gpu` then reaches only that GPU); a GPU backend refuses them.
    /// A test using anything else (proxy operations or aliases, unknown instructions) is
    /// refused with its file, line and construct, and the other tests still run.
    ///
    /// With --expect (an expected.csv: test, tier, expected, sc_reachable columns) each test gets
    /// a verdict, for the state its condition is about (satisfying it for exists/~exists,
    /// violating it for forall):
    ///   ok              forbidden and never reached, or allowed and reached;
    ///   ok (sc, ...)    allowed and reachable under sequential consistency (says if reached);
    ///   UNSOUND         forbidden by the PTX model, yet reached;
    ///   not seen        allowed only through a weak behaviour, and never reached;
    ///   ok (no final state)  the row says no-final-state, and no execution can end (every
    ///                   order of the threads' barrier steps deadlocks, proved);
    ///   not comparable  no final state to compare without that proof, refused or malformed.
    /// Exit code 1 when a test is UNSOUND, 2 when a file or the CSV is malformed.
    ///
    /// With --journal each test's result is journaled as it ends; after an interruption the
    /// same command with --resume runs only the tests the journal lacks (a file edited since
    /// runs again) and prints the whole table.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "Examples:
  gpuwmm litmus generate --out generated     # test files and their expected.csv, from the model
  gpuwmm litmus run generated --backend sim --executions 2000 \\
      --expect generated/expected.csv --csv conformance.csv
  gpuwmm litmus run generated/MP/MP+weak+fence.sc+gpu-gpu+cta-each.litmus --backend sim --sim-model sc
  gpuwmm litmus run generated/MP --backend cuda --instances 1024 --expect generated/expected.csv
  gpuwmm litmus run generated --executions 100000 --journal conformance.csv     # Ctrl-C, then:
  gpuwmm litmus run generated --executions 100000 --journal conformance.csv --resume")]
    Run(LitmusRunArgs),
    /// Print every final state the PTX memory model allows for litmus files, exactly, and with
    /// --expect compare the verdicts with known ones.
    ///
    /// An axiomatic model (PTX ISA "Memory Consistency Model", PTX 7.5+, as formalised by
    /// Lustig et al., ASPLOS 2019) enumerates each test's candidate executions: one path per
    /// thread for the values its reads return (loops unrolled 3 times), reads-from, Fence-SC
    /// order, barrier arrivals, coherence order per location; it keeps those satisfying
    /// Coherence, Fence-SC, Atomicity, No-Thin-Air, SC-per-location and Causality (with
    /// morally strong pairs, scopes, release/acquire patterns, fences and barriers). Each test
    /// prints, herd-style, the allowed states (`*>` satisfies the condition, `(weak)` marks a
    /// state sequential consistency does not reach), Ok/No, the observation, and the verdict
    /// expected.csv would hold (`expected`, `sc_reachable`). Barriers follow the semantics of
    /// the suite's published verdicts (Dat3M's: no phases; a third operand is a quorum).
    ///
    /// Threads may run on several GPUs (`.gpu` scope then covers one GPU's threads). Not
    /// modelled, refused per test with the reason: proxy aliases and operations, unknown
    /// instructions, address-valued init, executions of more than 64 events.
    ///
    /// With --expect each test's `expected` is compared with the model's; --csv writes the
    /// model's verdicts as an expected.csv (paths relative to the CSV's folder).
    /// Exit code 1 when a verdict disagrees with --expect, 2 when a file or the CSV is malformed.
    #[command(verbatim_doc_comment)]
    #[command(after_help = "Examples:
  gpuwmm litmus generate --out generated     # test files and their expected.csv
  gpuwmm litmus model generated/MP/MP+weak+fence.sc+gpu-gpu+cta-each.litmus
  gpuwmm litmus model generated --expect generated/expected.csv")]
    Model(LitmusModelArgs),
    /// Write families of litmus tests, with an expected.csv whose verdicts come from the model.
    ///
    /// Each family is a cycle of relations (MP, SB, LB, S, R, 2+2W, WRC, ISA2, IRIW, RWC, WWC,
    /// 3.SB, 3.LB, CoRR, CoRW, CoWR, CoWW, and RMW variants), crossed with access orders (weak,
    /// volatile, relaxed, acquire/release, RMWs), fences (none, fence.acq_rel, fence.sc,
    /// membar), scopes (cta, gpu, sys) and placements (one CTA, one CTA per thread, thread 0
    /// apart; or, with --across-gpus, the same on two GPUs). Files go to
    /// DIR/<family>/<name>.litmus in the Dat3M dialect; DIR/expected.csv has the columns of the
    /// shared suite's, DIR/generated-tests.txt lists the tests (a later generation into DIR
    /// removes those it does not write again). The output is the same on every run.
    #[command(after_help = "Examples:
  gpuwmm litmus generate --out generated
  gpuwmm litmus model generated --expect generated/expected.csv
  gpuwmm litmus generate --across-gpus --out across
  gpuwmm litmus run across --backend sim --expect across/expected.csv")]
    Generate(LitmusGenerateArgs),
}

#[derive(Debug, Args)]
pub struct LitmusModelArgs {
    /// Litmus files, or folders searched recursively for *.litmus files (in sorted order).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// An expected.csv with the verdicts of the tests: prints the agreement table.
    #[arg(long)]
    pub expect: Option<PathBuf>,
    /// Write the model's verdicts as an expected.csv to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Print only the table and summary, not each test's states.
    #[arg(long, short)]
    pub quiet: bool,
    /// Candidate executions to try per test before refusing it (the largest shared-suite,
    /// generated or Dat3M loop test needs a few million; four threads each taking a lock in a
    /// loop need more); 1 to 10^12.
    #[arg(long, value_name = "N", default_value_t = gpuwmm::litmus::model::explore::MAX_CANDIDATES,
          value_parser = clap::value_parser!(u64).range(gpuwmm::limits::CANDIDATES))]
    pub max_candidates: u64,
}

#[derive(Debug, Args)]
pub struct LitmusGenerateArgs {
    /// Folder to write the tests and expected.csv into (created; existing files are replaced).
    #[arg(long)]
    pub out: PathBuf,
    /// Write the families with their threads on two GPUs instead (a CTA per thread,
    /// alternating between the GPUs; or thread 0 on one GPU and the others in one CTA of the
    /// other), where `.gpu` scope no longer includes every thread. They run on the simulator;
    /// a GPU backend is one device and refuses them.
    #[arg(long)]
    pub across_gpus: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LitmusRunArgs {
    /// Litmus files, or folders searched recursively for *.litmus files (run in sorted order).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Executions of each test (instances in all, over all launches; default 10,000 on the
    /// simulator, 1,000 on a GPU; 1 to 10^9).
    #[arg(long, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::EXECUTIONS))]
    pub executions: Option<u64>,
    /// A test whose state (the one its condition rules on) the PTX model allows and no
    /// execution reached runs on, up to this many executions in all: a rare weak behaviour is
    /// hunted longer, a forbidden state never (default 10 x --executions on the simulator, no
    /// more than --executions on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::EXECUTIONS))]
    pub max_executions: Option<u64>,
    /// Test instances per launch, side by side in their own blocks and memory (default 1 on the
    /// simulator, whose model is coarser when unrelated instances share a launch, 256 on a
    /// GPU); 1 to 4096.
    #[arg(long, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::INSTANCES))]
    pub instances: Option<u32>,
    /// Where each location of a test lies after the one before, in 32-bit words: 1 = adjacent
    /// (1 to 65536). tune counts the words between them instead: its distance d is
    /// --distance d+1 here.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(gpuwmm::limits::DISTANCE))]
    pub distance: u32,
    /// An expected.csv with the verdicts of the tests: prints the conformance table.
    #[arg(long)]
    pub expect: Option<PathBuf>,
    /// Write the conformance table to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// A launch still running after this long does not finish (GPU; e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub deadline: Duration,
    /// Simulator only: thread-instructions per launch before it does not finish (default
    /// 100000 per instance; 1 to 10^12).
    #[arg(long, value_parser = clap::value_parser!(u64).range(gpuwmm::limits::SIM_BUDGET))]
    pub sim_budget: Option<u64>,
    /// A CSV journal of the tests' results, a row as each test ends (with a sidecar of the
    /// settings), so that an interrupted run loses only the test under way. An existing file
    /// given here is continued with --resume and otherwise refused.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Continue the run --journal records: a test it holds (same path, same text) is printed
    /// from it, the others run. The journal's settings must be given again (the interrupt
    /// message prints the command).
    #[arg(long, requires = "journal")]
    pub resume: bool,
    /// Internal: be the worker process of a run on a GPU (file names as JSON lines on stdin).
    #[arg(long, hide = true)]
    pub serve: bool,
}

fn parse_shape(s: &str) -> Result<LitmusShape, String> {
    s.parse()
}

fn parse_fence_kind(s: &str) -> Result<FenceKind, String> {
    s.parse()
}

/// A library enum that the command line reads by name. The library stays free of clap: this is
/// the one place that tells clap each value's name (and help, where the value has one).
trait ByName: Copy + Send + Sync + 'static {
    fn values() -> &'static [Self];
    fn name(self) -> &'static str;
    fn help(self) -> Option<&'static str> {
        None
    }
    /// Other names that read as this value (older spellings).
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }
}

/// The value parser of a [`ByName`] enum: `--help` lists the names, a wrong one is refused with
/// the list.
fn by_name<T: ByName>() -> impl TypedValueParser<Value = T> {
    let possible = T::values().iter().map(|&v| {
        let value = PossibleValue::new(v.name()).aliases(v.aliases().iter().copied());
        match v.help() {
            Some(help) => value.help(help),
            None => value,
        }
    });
    PossibleValuesParser::new(possible).map(|name| {
        *T::values()
            .iter()
            .find(|v| v.name() == name || v.aliases().contains(&name.as_str()))
            .expect("clap accepted only these names")
    })
}

/// `impl ByName` for a library enum with an `ALL` list and a `name` method; any other
/// methods (`help`, `aliases`) follow.
macro_rules! read_by_name {
    ($ty:ident $(, $($extra:tt)*)?) => {
        impl ByName for $ty {
            fn values() -> &'static [Self] {
                &$ty::ALL
            }
            fn name(self) -> &'static str {
                $ty::name(self)
            }
            $($($extra)*)?
        }
    };
}

read_by_name!(BackendChoice);
read_by_name!(Granularity);
read_by_name!(AccessFlavour);
read_by_name!(MinimiseKind);
read_by_name!(
    SimModel,
    fn help(self) -> Option<&'static str> {
        Some(SimModel::help(self))
    }
);
read_by_name!(
    StressKind,
    fn aliases(self) -> &'static [&'static str] {
        match self {
            StressKind::No => &["none"],
            _ => &[],
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every help text of `cmd` and its subcommands, rendered as `--help` prints it.
    fn help_texts(cmd: &mut clap::Command, into: &mut Vec<(String, String)>) {
        into.push((
            cmd.get_name().to_string(),
            cmd.render_long_help().to_string(),
        ));
        for sub in cmd.get_subcommands_mut() {
            help_texts(sub, into);
        }
    }

    /// Regression: the top-level help suggested `gpuwmm ptx sites apps/cbe-dot/kernel.cu` and
    /// the litmus helps `tests/litmus/…` and `../shared/…`, paths of the build tree that an
    /// installed binary run from another folder does not have ("No such file or directory").
    #[test]
    fn help_examples_name_no_build_tree_path() {
        use clap::CommandFactory;
        let mut texts = Vec::new();
        help_texts(&mut Cli::command(), &mut texts);
        assert!(texts.len() > 20, "{}", texts.len());
        for (name, text) in texts {
            for line in text.lines().filter(|l| l.contains("gpuwmm ")) {
                for tree in ["apps/", "tests/", "../shared", "results/gpu"] {
                    assert!(!line.contains(tree), "`{name} --help` suggests {line:?}");
                }
            }
        }
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("90s"), Ok(s(90)));
        assert_eq!(parse_duration("10m"), Ok(s(600)));
        assert_eq!(parse_duration("1h30m"), Ok(s(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        for bad in ["", "h", "10x", "-3", "1h-2m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
