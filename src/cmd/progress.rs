//! The one progress bar every long command shows: the bar, what it counts, the command's message,
//! and elapsed time with an estimate of what is left. Commands differ only in what they count.

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

#[cfg(test)]
mod tests {
    use super::*;

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
