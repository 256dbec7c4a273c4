//! A campaign's results as one table: applications × testing environments, each cell the error
//! rate of one check, as the paper's tables 4 and 5 show them.
//!
//! It takes the counts of checks and renders them as long-format CSV (one row per cell, for
//! scripts) and as Markdown (one row per app, one column per environment, and a last row counting
//! per environment the apps it found errors in and the apps it is effective for), and writes them
//! as a campaign's summary files. [`plan`] is what a campaign folder holds, [`collect`] reads one
//! back. Running the checks is the `campaign` command's business.

pub mod collect;
pub mod plan;

use crate::check::{Outcome, Tally};
use crate::env::Environment;
use crate::plot::{rate_chart, PlotError, RateRow};
use crate::stats::Rate;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A `--apps` or `--envs` list that cannot be read.
#[derive(Debug, Error, PartialEq)]
pub enum CampaignError {
    #[error("empty {0} list: give names separated by commas, or `all`")]
    EmptyList(&'static str),
    #[error("{message}")]
    UnknownEnv { name: String, message: String },
    #[error("unknown application '{name}' (known: {known})")]
    UnknownApp { name: String, known: String },
}

/// `all` (every environment of the paper), or environments separated by commas, in the order
/// given and without repeats.
pub fn parse_envs(list: &str) -> Result<Vec<Environment>, CampaignError> {
    if list.trim() == "all" {
        return Ok(Environment::all());
    }
    let mut envs = Vec::new();
    for name in names(list) {
        let env: Environment = name.parse().map_err(|message| CampaignError::UnknownEnv {
            name: name.to_string(),
            message,
        })?;
        if !envs.contains(&env) {
            envs.push(env);
        }
    }
    non_empty(envs, "environment")
}

/// `all` (every name in `known`), or app names separated by commas, in the order given and
/// without repeats; a name not in `known` is refused before anything is written.
pub fn parse_apps(list: &str, known: &[&str]) -> Result<Vec<String>, CampaignError> {
    if list.trim() == "all" {
        return non_empty(known.iter().map(|s| s.to_string()).collect(), "app");
    }
    let mut apps: Vec<String> = Vec::new();
    for name in names(list) {
        if !known.contains(&name) {
            return Err(CampaignError::UnknownApp {
                name: name.to_string(),
                known: known.join(", "),
            });
        }
        if !apps.iter().any(|a| a == name) {
            apps.push(name.to_string());
        }
    }
    non_empty(apps, "app")
}

fn names(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn non_empty<T>(items: Vec<T>, what: &'static str) -> Result<Vec<T>, CampaignError> {
    if items.is_empty() {
        return Err(CampaignError::EmptyList(what));
    }
    Ok(items)
}

/// The outcomes of one check, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub pass: u64,
    pub fail: u64,
    pub timeout: u64,
    pub crash: u64,
}

impl Counts {
    pub fn runs(&self) -> u64 {
        self.pass + self.fail + self.timeout + self.crash
    }

    /// Runs that did not pass: failures, timeouts and crashes.
    pub fn errors(&self) -> u64 {
        self.fail + self.timeout + self.crash
    }

    pub fn error_rate(&self) -> Rate {
        Rate::new(self.errors(), self.runs())
    }
}

impl From<&Tally> for Counts {
    fn from(tally: &Tally) -> Counts {
        Counts {
            pass: tally.count(Outcome::Pass),
            fail: tally.count(Outcome::Fail),
            timeout: tally.count(Outcome::Timeout),
            crash: tally.count(Outcome::Crash),
        }
    }
}

/// One cell of the matrix: an app checked under an environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub app: String,
    pub env: Environment,
    pub counts: Counts,
}

/// Per environment, how many apps it found errors in and how many it is effective for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnvSummary {
    pub with_errors: usize,
    pub effective: usize,
}

/// The results of a campaign, with what produced them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CampaignTable {
    /// Lines saying what ran the checks (the simulator labels itself as one).
    pub provenance: Vec<String>,
    pub cells: Vec<Cell>,
}

/// The columns of [`CampaignTable::to_csv`].
pub const CSV_HEADER: [&str; 12] = [
    "app",
    "env",
    "runs",
    "pass",
    "fail",
    "timeout",
    "crash",
    "error_rate",
    "low",
    "high",
    "effective",
    "provenance",
];

impl CampaignTable {
    pub fn new() -> CampaignTable {
        CampaignTable::default()
    }

    /// Adds a cell; a provenance line not seen yet is recorded with it.
    pub fn add(&mut self, app: &str, env: Environment, counts: Counts, provenance: &str) {
        if !self.provenance.iter().any(|p| p == provenance) {
            self.provenance.push(provenance.to_string());
        }
        self.cells.push(Cell {
            app: app.to_string(),
            env,
            counts,
        });
    }

    /// The apps, in the order their first cell was added.
    pub fn apps(&self) -> Vec<&str> {
        let mut apps: Vec<&str> = Vec::new();
        for cell in &self.cells {
            if !apps.contains(&cell.app.as_str()) {
                apps.push(&cell.app);
            }
        }
        apps
    }

    /// The environments, in the order their first cell was added.
    pub fn envs(&self) -> Vec<Environment> {
        let mut envs = Vec::new();
        for cell in &self.cells {
            if !envs.contains(&cell.env) {
                envs.push(cell.env);
            }
        }
        envs
    }

    pub fn cell(&self, app: &str, env: Environment) -> Option<&Cell> {
        self.cells.iter().find(|c| c.app == app && c.env == env)
    }

    /// The paper's table-5 counts for `env`.
    pub fn env_summary(&self, env: Environment) -> EnvSummary {
        let rates = self
            .cells
            .iter()
            .filter(|c| c.env == env)
            .map(|c| c.counts.error_rate());
        let mut summary = EnvSummary::default();
        for rate in rates {
            summary.with_errors += usize::from(rate.count > 0);
            summary.effective += usize::from(rate.is_effective());
        }
        summary
    }

    /// One row per cell: counts, the error rate and its 95% Wilson interval (fractions), whether
    /// it is effective, and what ran it.
    pub fn to_csv(&self) -> String {
        let provenance = self.provenance.join("; ");
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.write_record(CSV_HEADER).expect("writing to memory");
        for cell in &self.cells {
            let c = &cell.counts;
            let rate = c.error_rate();
            let record = [
                cell.app.clone(),
                cell.env.to_string(),
                c.runs().to_string(),
                c.pass.to_string(),
                c.fail.to_string(),
                c.timeout.to_string(),
                c.crash.to_string(),
                format!("{:.6}", rate.rate),
                format!("{:.6}", rate.low),
                format!("{:.6}", rate.high),
                rate.is_effective().to_string(),
                provenance.clone(),
            ];
            writer.write_record(&record).expect("writing to memory");
        }
        let bytes = writer.into_inner().expect("writing to memory");
        String::from_utf8(bytes).expect("the fields are UTF-8")
    }

    /// The provenance, then the matrix (apps × environments) and the table-5 row, then a legend.
    pub fn to_markdown(&self) -> String {
        let envs = self.envs();
        let mut lines: Vec<String> = self.provenance.iter().map(|p| format!("{p}\n")).collect();
        let mut header = vec!["app".to_string()];
        header.extend(envs.iter().map(Environment::to_string));
        lines.push(row(&header));
        lines.push(row(&vec!["---".to_string(); header.len()]));
        for app in self.apps() {
            let mut cells = vec![escape(app)];
            cells.extend(envs.iter().map(|&env| match self.cell(app, env) {
                Some(cell) => cell_text(&cell.counts),
                None => "—".to_string(),
            }));
            lines.push(row(&cells));
        }
        let mut last = vec!["apps with errors / effective".to_string()];
        last.extend(envs.iter().map(|&env| {
            let s = self.env_summary(env);
            format!("{} / {}", s.with_errors, s.effective)
        }));
        lines.push(row(&last));
        lines.push(String::new());
        lines.push(
            "Cells: error rate (runs that failed, timed out or crashed / runs); \
             `*` marks an effective environment (error rate above 5%)."
                .to_string(),
        );
        lines.join("\n") + "\n"
    }
}

impl CampaignTable {
    /// The matrix as a chart: one row per cell (app by app, environments in their order), the
    /// error rate with its interval, coloured by environment, the provenance under it.
    pub fn to_svg(&self) -> Result<String, PlotError> {
        let title = "error rate per app and environment";
        rate_chart(title, &self.provenance.join("; "), &self.rate_rows())
    }

    /// The chart's rows: app by app, environments in their order, coloured by environment.
    pub fn rate_rows(&self) -> Vec<RateRow> {
        let envs = self.envs();
        let mut rows = Vec::new();
        for app in self.apps() {
            for (series, &env) in envs.iter().enumerate() {
                if let Some(cell) = self.cell(app, env) {
                    rows.push(RateRow {
                        label: format!("{app} {env}"),
                        series,
                        rate: cell.counts.error_rate(),
                    });
                }
            }
        }
        rows
    }
}

/// Writing a campaign's summaries failed.
#[derive(Debug, Error)]
pub enum SummaryError {
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `summary.csv`, `summary.md` and `summary.svg` into `out`. One table (one GPU model, or
/// the simulator) gives exactly the local campaign's files; with several, `summary.md` has a
/// section per table, `summary.csv` all their rows (each names its provenance), and the second
/// table's chart is `summary-2.svg`, and so on. `status`, when given, ends `summary.md`.
pub fn write_summaries(
    tables: &[CampaignTable],
    status: Option<&str>,
    out: &Path,
) -> Result<(), SummaryError> {
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| SummaryError::Write { path, source })
    };
    std::fs::create_dir_all(out).map_err(|source| SummaryError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let mut csv = String::new();
    let mut markdown = String::new();
    for (i, table) in tables.iter().enumerate() {
        let rows = table.to_csv();
        let rows = if i == 0 {
            &rows[..]
        } else {
            after_header(&rows)
        };
        csv.push_str(rows);
        if tables.len() > 1 {
            markdown.push_str(&format!("## {}\n\n", table.provenance.join("; ")));
        }
        markdown.push_str(&table.to_markdown());
        if tables.len() > 1 {
            markdown.push('\n');
        }
        let chart = match i {
            0 => "summary.svg".to_string(),
            _ => format!("summary-{}.svg", i + 1),
        };
        write(&chart, &table.to_svg()?)?;
    }
    if tables.is_empty() {
        csv = CSV_HEADER.join(",") + "\n";
        markdown = "No cell has a run yet.\n".to_string();
    }
    if let Some(status) = status {
        markdown.push_str(&format!("\n## cells\n\n{status}"));
    }
    write("summary.csv", &csv)?;
    write("summary.md", &markdown)
}

/// A CSV text without its first line.
fn after_header(csv: &str) -> &str {
    csv.split_once('\n').map_or("", |(_, rest)| rest)
}

/// `57.7% (173/300)*`: the rate, the counts, and `*` when effective.
pub fn cell_text(counts: &Counts) -> String {
    let rate = counts.error_rate();
    format!(
        "{:.1}% ({}/{}){}",
        100.0 * rate.rate,
        rate.count,
        rate.trials,
        if rate.is_effective() { "*" } else { "" }
    )
}

fn row(cells: &[String]) -> String {
    format!("| {} |", cells.join(" | "))
}

/// A name in a Markdown table cell: a `|` would end the cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// An environment by its name, for the tests of this module and of its children.
#[cfg(test)]
fn test_env(name: &str) -> Environment {
    name.parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::test_env as env;
    use super::*;

    fn counts(pass: u64, fail: u64, timeout: u64, crash: u64) -> Counts {
        Counts {
            pass,
            fail,
            timeout,
            crash,
        }
    }

    /// Two apps under two environments: cbe-dot is effective under sys-str+ only, sdk-red has a
    /// single timeout under no-str- (an error, but not effective).
    fn table() -> CampaignTable {
        let mut t = CampaignTable::new();
        let sim = "backend: simulator (sim) — a model of weak memory, not hardware";
        t.add("cbe-dot", env("no-str-"), counts(300, 0, 0, 0), sim);
        t.add("cbe-dot", env("sys-str+"), counts(127, 173, 0, 0), sim);
        t.add("sdk-red", env("no-str-"), counts(299, 0, 1, 0), sim);
        t.add("sdk-red", env("sys-str+"), counts(300, 0, 0, 0), sim);
        t
    }

    #[test]
    fn markdown_has_apps_as_rows_environments_as_columns_and_the_table5_row() {
        let md = table().to_markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "backend: simulator (sim) — a model of weak memory, not hardware"
        );
        assert_eq!(lines[2], "| app | no-str- | sys-str+ |");
        assert_eq!(lines[3], "| --- | --- | --- |");
        assert_eq!(lines[4], "| cbe-dot | 0.0% (0/300) | 57.7% (173/300)* |");
        assert_eq!(lines[5], "| sdk-red | 0.3% (1/300) | 0.0% (0/300) |");
        assert_eq!(lines[6], "| apps with errors / effective | 1 / 0 | 1 / 1 |");
        assert!(lines[8].contains("above 5%"), "{md}");
    }

    #[test]
    fn a_missing_cell_is_a_dash_and_names_with_a_bar_are_escaped() {
        let mut t = table();
        t.add("my|app", env("no-str-"), counts(10, 0, 0, 0), "gpu");
        let md = t.to_markdown();
        assert!(md.contains("| my\\|app | 0.0% (0/10) | — |"), "{md}");
        assert_eq!(t.provenance.len(), 2);
    }

    #[test]
    fn the_chart_has_a_row_per_cell_in_table_order_and_the_provenance() {
        let rows = table().rate_rows();
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        let order = [
            "cbe-dot no-str-",
            "cbe-dot sys-str+",
            "sdk-red no-str-",
            "sdk-red sys-str+",
        ];
        assert_eq!(labels, order);
        assert_eq!(
            rows.iter().map(|r| r.series).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        assert_eq!(rows[1].rate, Rate::new(173, 300));
        let svg = table().to_svg().unwrap();
        for label in order {
            assert!(
                svg.contains(&format!("\n{label}\n")),
                "{label} is not drawn"
            );
        }
        assert!(svg.contains("backend: simulator (sim)"));
    }

    #[test]
    fn app_names_are_escaped_in_the_chart() {
        let mut t = table();
        t.add("a<b&c", env("no-str-"), counts(10, 0, 0, 0), "gpu");
        let svg = t.to_svg().unwrap();
        assert!(svg.contains("a&lt;b&amp;c no-str-"), "{svg}");
    }

    #[test]
    fn csv_is_long_format_one_row_per_cell_with_counts_rate_and_interval() {
        let csv = table().to_csv();
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(header, CSV_HEADER);
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 4);
        let dot = &rows[1];
        assert_eq!(&dot[0], "cbe-dot");
        assert_eq!(&dot[1], "sys-str+");
        assert_eq!(
            (&dot[2], &dot[3], &dot[4], &dot[5], &dot[6]),
            ("300", "127", "173", "0", "0")
        );
        let (rate, low, high): (f64, f64, f64) = (
            dot[7].parse().unwrap(),
            dot[8].parse().unwrap(),
            dot[9].parse().unwrap(),
        );
        assert!((rate - 173.0 / 300.0).abs() < 1e-6);
        assert!(low < rate && rate < high);
        assert_eq!(&dot[10], "true");
        assert!(dot[11].contains("simulator"));
        assert_eq!(&rows[2][10], "false");
    }

    #[test]
    fn the_effective_threshold_is_strictly_above_five_percent() {
        assert_eq!(cell_text(&counts(95, 5, 0, 0)), "5.0% (5/100)");
        assert_eq!(cell_text(&counts(94, 3, 2, 1)), "6.0% (6/100)*");
        assert_eq!(cell_text(&counts(0, 0, 0, 0)), "0.0% (0/0)");
    }

    #[test]
    fn counts_come_from_a_tally() {
        let record = crate::check::RunRecord::for_test;
        let tally = Tally::of(&[
            record(0, Outcome::Pass),
            record(1, Outcome::Crash),
            record(2, Outcome::Fail),
            record(3, Outcome::Pass),
        ]);
        assert_eq!(Counts::from(&tally), counts(2, 1, 0, 1));
    }

    #[test]
    fn lists_read_all_or_names_in_order_without_repeats() {
        assert_eq!(parse_envs("all").unwrap(), Environment::all());
        assert_eq!(
            parse_envs("sys-str+, no-str-,sys-str+").unwrap(),
            [env("sys-str+"), env("no-str-")]
        );
        assert!(matches!(
            parse_envs("sys-str"),
            Err(CampaignError::UnknownEnv { .. })
        ));
        assert_eq!(
            parse_envs(" , "),
            Err(CampaignError::EmptyList("environment"))
        );
        assert_eq!(parse_apps("all", &["a", "b"]).unwrap(), ["a", "b"]);
        assert_eq!(parse_apps("b,a,b", &["a", "b"]).unwrap(), ["b", "a"]);
        let unknown = parse_apps("a,nope", &["a", "b"]).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unknown application 'nope' (known: a, b)"
        );
        assert_eq!(parse_apps("", &["a"]), Err(CampaignError::EmptyList("app")));
    }
}
