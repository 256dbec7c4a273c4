//! Checking an application against its post-condition under stress, run after run.
//!
//! The pieces, bottom up: [`spec`] (what runs: the target and each run's request), [`outcome`]
//! (what a run came to), [`calibrate`] (stress iterations for about 10× the kernel), [`local`]
//! (running requests in this process), [`worker`] and [`supervisor`] (running them in a worker
//! process that is restarted after a timeout or crash), [`executor`] (the trait the drivers use),
//! [`journal`] (the CSV every run is appended to) and [`driver`] (the check loop, resumable).

pub mod calibrate;
pub mod driver;
pub mod executor;
pub mod journal;
pub mod local;
pub mod outcome;
pub mod pool;
pub mod races;
pub mod spec;
pub mod supervisor;
pub mod worker;

pub use driver::{run_check, CheckMeta, Stop, Tally};
pub use executor::{ExecError, Executor};
pub use journal::Journal;
pub use local::LocalExecutor;
pub use outcome::{Outcome, RunRecord};
pub use pool::Pool;
pub use spec::{
    BackendChoice, BackendKind, CalibrationRequest, Fences, RunRequest, SimModel, Target,
};
pub use supervisor::{Supervisor, WorkerCommand};
