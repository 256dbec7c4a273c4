//! `gpuwmm apps`: every application with its idiom and post-condition.

use super::{CmdResult, Failure};
use crate::cli::AppsArgs;
use gpuwmm::apps::{builtin_apps, load_app_dir, App};
use std::io::Write;
use std::sync::Arc;

pub fn run(args: &AppsArgs) -> CmdResult {
    let mut apps: Vec<Arc<dyn App>> = builtin_apps()?;
    if let Some(dir) = &args.app_dir {
        apps.push(load_app_dir(dir).map_err(Failure::bad_input)?);
    }
    let mut out = std::io::stdout().lock();
    for app in &apps {
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
