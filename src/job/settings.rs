//! What a journal's runs depend on, and the rule that keeps one journal from holding runs of two
//! set-ups: `--resume` and `replay` compare what the sidecar records with what they would run now
//! and refuse a difference, naming the option (or the app's sources or PTX) and both values.
//!
//! - An option named on the command line with `--resume` must have the journal's value; an
//!   option left out takes the journal's value ([`GivenOptions`] says which were named).
//! - The app's sources (kernel and included files, `app.toml` of a bring-your-own app) and its
//!   PTX (app and check kernels) are hashed into the sidecar ([`AppHash`]); a resume or replay
//!   refuses an app whose hashes differ, and a sidecar written before gpuwmm recorded them
//!   (nothing can be compared).
//! - `--force` lets a resume go on past a difference on purpose: the job keeps the journal's
//!   options (it runs the sources there are now), and the sidecar's `forced` list records when,
//!   from which row on, and what differed ([`Forced`]), so that `replay` of an earlier row still
//!   compares with the sources that row ran.

use super::{JobError, Say};
pub use crate::apps::hash::AppHash;
use crate::check::journal::{read_meta_entry, set_meta_entry};
use crate::check::local::target_app;
use crate::check::{Stop, Target};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The options the command line named (`--fences`, `--seed`, …; a flag such as `--force` too),
/// so that a resume compares those only.
#[derive(Debug, Clone, Default)]
pub struct GivenOptions {
    names: BTreeSet<String>,
}

impl GivenOptions {
    /// `names` are long option names, with their dashes (`--stress-factor`).
    pub fn new(names: impl IntoIterator<Item = String>) -> GivenOptions {
        GivenOptions {
            names: names.into_iter().collect(),
        }
    }

    pub fn named(&self, option: &str) -> bool {
        self.names.contains(option)
    }

    /// `--force`: go on past a difference, recording it.
    pub fn force(&self) -> bool {
        self.named("--force")
    }
}

/// A job's settings: each option, as the command line spells it, with its value in words.
pub type Settings = BTreeMap<&'static str, String>;

/// The settings of a target: every target option a run depends on. A `--backend auto` or a
/// missing `--size` is compared as what it resolved to.
pub fn target_settings(target: &Target) -> Settings {
    let profile = &target.profile;
    Settings::from([
        (
            "--app-dir",
            target
                .app_dir
                .as_ref()
                .map_or("none (built-in app)".into(), |d| d.display().to_string()),
        ),
        ("--size", target.size.to_string()),
        ("--backend", target.backend.name().to_string()),
        ("--sim-model", target.sim_model.to_string()),
        ("--fence-kind", target.fence_kind.to_string()),
        ("--granularity", target.granularity.to_string()),
        ("--deadline", format!("{} ms", target.deadline_ms)),
        ("--stress-factor", target.stress_factor.to_string()),
        (
            "--profile",
            format!(
                "sequence '{}', spread {}, patch {} words",
                profile.sequence, profile.spread, profile.patch_words
            ),
        ),
        (
            "--sim-budget",
            target
                .sim_budget
                .map_or("default".into(), |b| b.to_string()),
        ),
    ])
}

/// A stop under both option names that set it (`--runs` and `--duration`, or
/// `--stable-runs` and `--stable-duration`): either names the one setting.
pub fn stop_settings(settings: &mut Settings, names: [&'static str; 2], stop: Stop) {
    for name in names {
        settings.insert(name, stop.to_string());
    }
}

/// An option (or `sources`, `PTX`) whose value a resume or replay would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub option: String,
    /// The journal's value.
    pub journal: String,
    /// The value now (given on the command line, or found in the app).
    pub given: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let now = match self.option.starts_with("--") {
            true => "given",
            false => "now",
        };
        write!(
            f,
            "{} recorded {}, {now} {}",
            self.option,
            short(&self.journal),
            short(&self.given)
        )
    }
}

/// A SHA-256 in hex is shown by its first 12 digits.
fn short(value: &str) -> String {
    let is_hash = value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit());
    match is_hash {
        true => format!("sha256 {}…", &value[..12]),
        false => value.to_string(),
    }
}

/// The options named on the command line whose values differ from the journal's: `asked` holds
/// the values the command line gives (defaults included), `recorded` the journal's.
pub fn differences<K: AsRef<str> + Ord>(
    recorded: &BTreeMap<K, String>,
    asked: &BTreeMap<K, String>,
    given: &GivenOptions,
) -> Vec<Difference> {
    asked
        .iter()
        .filter(|(option, _)| given.named(option.as_ref()))
        .filter_map(|(option, value)| {
            let journal = recorded.get(option).map_or("nothing", String::as_str);
            (journal != value).then(|| Difference {
                option: option.as_ref().to_string(),
                journal: journal.to_string(),
                given: value.clone(),
            })
        })
        .collect()
}

/// Every option of `asked` whose value differs from the one `recorded` (a job that compares all
/// its options, named or not: a tuning).
pub fn all_differences<K: AsRef<str> + Ord>(
    recorded: &BTreeMap<K, String>,
    asked: &BTreeMap<K, String>,
) -> Vec<Difference> {
    let all = GivenOptions::new(asked.keys().map(|k| k.as_ref().to_string()));
    differences(recorded, asked, &all)
}

/// The sidecar entry an [`AppHash`] is kept in (check and harden journals).
pub const APP_HASH_ENTRY: &str = "app_hash";
/// Sources, in a [`Difference`].
const SOURCES: &str = "sources";
/// PTX, in a [`Difference`].
const PTX: &str = "PTX";
/// The journal's value of sources or PTX when its sidecar records no hashes.
const NOT_RECORDED: &str = "no hash (written before gpuwmm recorded one)";
/// An input data file, in a [`Difference`]: this, then the file's name.
const INPUT_FILE: &str = "input file ";

/// The hashes of `target`'s app as it is now.
pub fn app_hash(target: &Target) -> Result<AppHash, JobError> {
    let app = target_app(target).map_err(JobError::BadApp)?;
    AppHash::of(&*app, target.size, target.app_dir.as_deref()).map_err(JobError::BadApp)
}

/// The sidecar entry of a check or harden journal's app hashes, set to `now`.
pub fn hash_entry(now: &AppHash) -> (&'static str, serde_json::Value) {
    (
        APP_HASH_ENTRY,
        serde_json::to_value(now).expect("hashes serialise"),
    )
}

/// What the journal's app hashes (`None`: not recorded) and the app's now differ in.
pub fn hash_differences(recorded: Option<&AppHash>, now: &AppHash) -> Vec<Difference> {
    let pairs = [
        (
            SOURCES,
            recorded.map(|h| h.sources_sha256.as_str()),
            &now.sources_sha256,
        ),
        (
            PTX,
            recorded.map(|h| h.ptx_sha256.as_str()),
            &now.ptx_sha256,
        ),
    ];
    let mut found: Vec<Difference> = pairs
        .into_iter()
        .filter(|(_, journal, now)| *journal != Some(now.as_str()))
        .map(|(option, journal, now)| Difference {
            option: option.to_string(),
            journal: journal.unwrap_or(NOT_RECORDED).to_string(),
            given: now.clone(),
        })
        .collect();
    // A journal that records no input file was written before gpuwmm recorded them, or its app
    // reads none (a manifest that reads one now differs in its sources).
    let recorded_inputs = recorded.map(|h| &h.inputs_sha256).filter(|i| !i.is_empty());
    if let Some(recorded) = recorded_inputs {
        let files: BTreeSet<&String> = recorded.keys().chain(now.inputs_sha256.keys()).collect();
        for file in files {
            let (journal, given) = (recorded.get(file), now.inputs_sha256.get(file));
            if journal != given {
                let value = |v: Option<&String>| v.cloned().unwrap_or_else(|| "none".to_string());
                found.push(Difference {
                    option: format!("{INPUT_FILE}{file}"),
                    journal: value(journal),
                    given: value(given),
                });
            }
        }
    }
    found
}

/// A resume of the check or harden `journal` (`rows` rows recorded): the options `given` whose
/// values (`asked`, as the command line gives them) differ from the `recorded` settings, and the
/// app's change since the journal's hashes (`recorded_hash`), refused or forced
/// ([`refuse_or_force`]). Returns the hashes of `target`'s app now.
pub fn refuse_changed_resume(
    journal: &Path,
    rows: usize,
    (recorded, asked, given): (&Settings, &Settings, &GivenOptions),
    (target, recorded_hash): (&Target, Option<&AppHash>),
    say: Say,
) -> Result<AppHash, JobError> {
    let mut changed = differences(recorded, asked, given);
    let now = app_hash(target)?;
    changed.extend(hash_differences(recorded_hash, &now));
    refuse_or_force(journal, rows, changed, (given, hash_entry(&now)), say)?;
    Ok(now)
}

/// One `--force`: when, from which journal row on (rows before it ran with the journal's
/// earlier values), and what differed. Kept in the sidecar's `forced` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forced {
    pub at: String,
    pub from_row: usize,
    pub differences: Vec<Difference>,
}

/// The sidecar entry of the [`Forced`] list.
pub const FORCED_ENTRY: &str = "forced";

/// A resume's differences refused, or with `--force` let through: recorded in the sidecar of
/// `journal` (which holds `rows` rows), with the sidecar's entry of the app hashes then set to
/// the new ones (`hashes`: the entry and its value) when the sources or PTX differ, since the
/// runs to come use them; said as a warning.
pub fn refuse_or_force(
    journal: &Path,
    rows: usize,
    differences: Vec<Difference>,
    (given, hashes): (&GivenOptions, (&str, serde_json::Value)),
    say: Say,
) -> Result<(), JobError> {
    if differences.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = differences.iter().map(Difference::to_string).collect();
    if !given.force() {
        return Err(JobError::refused(refusal(journal, &differences)));
    }
    let app_changed = differences.iter().any(|d| !d.option.starts_with("--"));
    record_forced(journal, rows, differences)?;
    if app_changed {
        set_meta_entry(journal, hashes.0, &hashes.1)?;
    }
    say(&format!(
        "warning: --force: going on with {} from row {rows} although {}; recorded in its sidecar",
        journal.display(),
        listed.join("; ")
    ));
    Ok(())
}

/// Why a resume of `journal` is refused for `differences` (options given with other values, an
/// app whose hashes differ), and what to do: give the journal's values for an option; for the
/// app, start a new journal or `--force` (which goes on with the journal's options and the app
/// as it is now).
fn refusal(journal: &Path, differences: &[Difference]) -> String {
    let (options, app): (Vec<&Difference>, Vec<&Difference>) =
        differences.iter().partition(|d| d.option.starts_with("--"));
    let list = |ds: &[&Difference]| ds.iter().map(|d| d.to_string()).collect::<Vec<_>>();
    let mut reasons = list(&options);
    if !app.is_empty() {
        let unrecorded = app.iter().all(|d| d.journal == NOT_RECORDED);
        let what = match unrecorded {
            true => "the journal records no hash of the app, so nothing shows it is unchanged",
            false => "the app changed since the journal was written",
        };
        reasons.push(format!("{what} ({})", list(&app).join("; ")));
    }
    let forced = match (options.is_empty(), app.is_empty()) {
        (false, false) => "the journal's options and the app as it is now",
        (false, true) => "the journal's options",
        (true, _) => "the app as it is now",
    };
    let values = match options.is_empty() {
        true => "",
        false => "give the journal's values (or leave those options out), ",
    };
    format!(
        "cannot resume {}: {}; {values}start a new journal, or pass --force to go on with \
         {forced} (recorded in its sidecar)",
        journal.display(),
        reasons.join("; ")
    )
}

/// Adds a [`Forced`] entry to the sidecar of `journal` (which holds `rows` rows): from now, and
/// from row `rows` on, the job goes on past `differences`.
pub fn record_forced(
    journal: &Path,
    rows: usize,
    differences: Vec<Difference>,
) -> Result<(), JobError> {
    let mut forced: Vec<Forced> = read_meta_entry(journal, FORCED_ENTRY)
        .map_err(super::bad_journal)?
        .unwrap_or_default();
    forced.push(Forced {
        at: super::sidecar::now(),
        from_row: rows,
        differences,
    });
    Ok(set_meta_entry(journal, FORCED_ENTRY, &forced)?)
}

/// The app hashes row `row` of a journal ran with: the sidecar's (`current`), unless a later
/// `--force` replaced them, in which case the values it replaced.
pub fn hash_at(current: Option<AppHash>, forced: &[Forced], row: usize) -> Option<AppHash> {
    let mut hash = current;
    for entry in forced.iter().rev().filter(|f| f.from_row > row) {
        for d in &entry.differences {
            let value = d.journal.clone();
            let recorded = (value.len() == 64).then_some(value);
            hash = match (d.option.as_str(), hash, recorded) {
                (SOURCES, Some(h), Some(v)) => Some(AppHash {
                    sources_sha256: v,
                    ..h
                }),
                (PTX, Some(h), Some(v)) => Some(AppHash { ptx_sha256: v, ..h }),
                (SOURCES | PTX, _, None) => None,
                (option, Some(mut h), value) if option.starts_with(INPUT_FILE) => {
                    let file = option[INPUT_FILE.len()..].to_string();
                    match value {
                        Some(v) => h.inputs_sha256.insert(file, v),
                        None => h.inputs_sha256.remove(&file),
                    };
                    Some(h)
                }
                (_, h, _) => h,
            };
        }
    }
    hash
}

/// Differences refused where nothing records a `--force` (a replay writes nothing; a campaign's
/// plan keeps its settings and each cell's journal records its own): `doing` what to `what`
/// (`replay a run of`, `resume`), `consequence` of going on. With `--force`, said and let
/// through.
pub fn refuse_unless_forced(
    (doing, what): (&str, &Path),
    differences: &[Difference],
    (given, consequence): (&GivenOptions, &str),
    say: Say,
) -> Result<(), JobError> {
    if differences.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = differences.iter().map(Difference::to_string).collect();
    if given.force() {
        say(&format!(
            "warning: --force: going on to {doing} {} although {}: {consequence}",
            what.display(),
            listed.join("; ")
        ));
        return Ok(());
    }
    Err(JobError::refused(format!(
        "cannot {doing} {}: {}; {consequence} (pass --force to go on anyway)",
        what.display(),
        listed.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(s: char, p: char) -> AppHash {
        AppHash {
            sources_sha256: s.to_string().repeat(64),
            ptx_sha256: p.to_string().repeat(64),
            inputs_sha256: BTreeMap::new(),
        }
    }

    #[test]
    fn only_options_named_on_the_command_line_are_compared() {
        let recorded = Settings::from([("--seed", "1".into()), ("--fences", "as-is".into())]);
        let asked = Settings::from([("--seed", "2".into()), ("--fences", "0 1".into())]);
        let given = GivenOptions::new(["--fences".to_string()]);
        let found = differences(&recorded, &asked, &given);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].to_string(), "--fences recorded as-is, given 0 1");
    }

    #[test]
    fn a_sidecar_without_hashes_differs_in_both() {
        let found = hash_differences(None, &hash('a', 'b'));
        assert_eq!(found.len(), 2);
        assert!(found[0].to_string().contains("no hash"), "{}", found[0]);
        assert!(hash_differences(Some(&hash('a', 'b')), &hash('a', 'b')).is_empty());
        let edited = hash_differences(Some(&hash('a', 'b')), &hash('c', 'b'));
        assert_eq!(edited.len(), 1);
        assert_eq!(
            edited[0].to_string(),
            "sources recorded sha256 aaaaaaaaaaaa…, now sha256 cccccccccccc…"
        );
    }

    /// `hash(s, p)` reading the input files `inputs` (name, hash digit).
    fn with_inputs(s: char, p: char, inputs: &[(&str, char)]) -> AppHash {
        let inputs = inputs
            .iter()
            .map(|(f, h)| (f.to_string(), h.to_string().repeat(64)));
        AppHash {
            inputs_sha256: inputs.collect(),
            ..hash(s, p)
        }
    }

    /// Bug: a resume or replay did not notice an edited input data file (`init = { file = … }`):
    /// its runs went on with other inputs. Each input file is compared now, by name; a journal
    /// that recorded none (written before) compares sources and PTX only.
    #[test]
    fn a_changed_input_file_is_a_difference_unless_the_journal_recorded_none() {
        let recorded = with_inputs('a', 'b', &[("in.txt", 'e'), ("w.bin", 'f')]);
        let now = with_inputs('a', 'b', &[("in.txt", '1'), ("w.bin", 'f')]);
        let found = hash_differences(Some(&recorded), &now);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].to_string(),
            "input file in.txt recorded sha256 eeeeeeeeeeee…, now sha256 111111111111…"
        );
        assert!(hash_differences(Some(&recorded), &recorded).is_empty());
        // A journal from before input files were hashed resumes as it did.
        assert!(hash_differences(Some(&hash('a', 'b')), &now).is_empty());
        // A forced resume past the edit: earlier rows replay with the file they read.
        let forced = vec![Forced {
            at: "t".into(),
            from_row: 5,
            differences: found,
        }];
        assert_eq!(hash_at(Some(now.clone()), &forced, 4), Some(recorded));
        assert_eq!(hash_at(Some(now.clone()), &forced, 5), Some(now));
    }

    #[test]
    fn rows_before_a_forced_edit_keep_the_hashes_they_ran_with() {
        let forced = vec![Forced {
            at: "t".into(),
            from_row: 5,
            differences: hash_differences(Some(&hash('a', 'b')), &hash('c', 'd')),
        }];
        let current = Some(hash('c', 'd'));
        assert_eq!(hash_at(current.clone(), &forced, 4), Some(hash('a', 'b')));
        assert_eq!(hash_at(current.clone(), &forced, 5), Some(hash('c', 'd')));
        let from_old = vec![Forced {
            at: "t".into(),
            from_row: 3,
            differences: hash_differences(None, &hash('c', 'd')),
        }];
        assert_eq!(hash_at(current.clone(), &from_old, 2), None);
        assert_eq!(hash_at(current, &from_old, 3), Some(hash('c', 'd')));
    }
}
