//! `gpuwmm apps`: every application with its idiom and post-condition, or one as a check reads
//! it ([`gpuwmm::apps::describe`]).

use super::{CmdResult, Failure};
use crate::cli::AppsArgs;
use gpuwmm::apps::describe::describe;
use gpuwmm::apps::{builtin_apps, find_app, load_app_dir, load_named_app_dir, App};
use std::io::Write;
use std::sync::Arc;

pub fn run(args: &AppsArgs) -> CmdResult {
    let app: Arc<dyn App> = match (&args.name, &args.app_dir) {
        (None, None) => return list(),
        (Some(name), None) => find_app(name),
        (None, Some(dir)) => load_app_dir(dir),
        (Some(name), Some(dir)) => load_named_app_dir(dir, name),
    }
    .map_err(Failure::bad_input)?;
    let description = describe(&*app).map_err(Failure::bad_input)?;
    write!(std::io::stdout().lock(), "{description}")?;
    Ok(())
}

/// Every built-in app, without compiling any.
fn list() -> CmdResult {
    let mut out = std::io::stdout().lock();
    for app in &builtin_apps()? {
        writeln!(out, "{}", app.name())?;
        writeln!(out, "    idiom:          {}", one_line(app.description()))?;
        writeln!(out, "    post-condition: {}", one_line(app.postcondition()))?;
        writeln!(out, "    source:         {}", app.source().path.display())?;
    }
    Ok(())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
