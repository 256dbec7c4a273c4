//! The one progress bar every long command shows: the bar, what it counts, the command's message,
//! and elapsed time with an estimate of what is left. Commands differ only in what they count;
//! those that run to a check's [`Stop`] count it the same way.

use gpuwmm::check::{Stop, Tally};
use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps; `counter` says what the steps are, as an indicatif template fragment
/// (`"{pos}/{len} launches"`, `"{percent}% of the matrix"`). A prefix set on the bar (e.g. the
/// app or the stage) goes before it.
pub fn bar(len: u64, counter: &str) -> ProgressBar {
    let template =
        format!("{{prefix}}{{bar:30}} {counter} | {{msg}} [{{elapsed_precise}}<{{eta_precise}}]");
    let bar = ProgressBar::new(len);
    bar.set_style(ProgressStyle::with_template(&template).expect("a valid template"));
    bar
}

/// A bar's length towards `stop`, and its unit: runs, or milliseconds of the runs' time.
pub fn stop_length(stop: &Stop) -> (u64, &'static str) {
    match *stop {
        Stop::Runs(n) => (n, "runs"),
        Stop::Seconds(s) => ((s * 1e3) as u64, "ms"),
    }
}

/// Where `tally` stands on a bar of [`stop_length`]`(stop)`.
pub fn stop_position(stop: &Stop, tally: &Tally) -> u64 {
    match stop {
        Stop::Runs(_) => tally.runs,
        Stop::Seconds(_) => tally.elapsed_ms as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_counted_in_runs_or_milliseconds() {
        let tally = Tally {
            runs: 12,
            elapsed_ms: 3456.7,
            ..Tally::default()
        };
        assert_eq!(stop_length(&Stop::Runs(40)), (40, "runs"));
        assert_eq!(stop_position(&Stop::Runs(40), &tally), 12);
        assert_eq!(stop_length(&Stop::Seconds(2.5)), (2500, "ms"));
        assert_eq!(stop_position(&Stop::Seconds(2.5), &tally), 3456);
    }

    #[test]
    fn every_counter_the_commands_use_makes_a_valid_template() {
        for counter in [
            "{pos}/{len} runs",
            "{percent}% of the matrix",
            "{pos}/{len} configurations",
            "{pos}/{len} repetitions",
        ] {
            let b = bar(10, counter);
            b.set_position(3);
            assert_eq!(b.position(), 3);
        }
    }
}
