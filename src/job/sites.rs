//! What `ptx sites` lists: an app's fence sites numbered as `check --fences` and `harden`
//! number them, or the sites of a kernel file as it is. One place decides which, so the
//! command only prints.

use crate::apps::{
    app_sites, find_app, load_app_dir, load_named_app_dir, AppError, KernelSource, Size,
};
use crate::input::{load_kernel_file, InputError, SourceLines};
use crate::ptx::demangle::source_name;
use crate::ptx::passes::fences::{fence_sites, FenceSite, Granularity};
use std::path::Path;
use thiserror::Error;

/// Why the sites cannot be listed; all of it is bad input.
#[derive(Debug, Error)]
pub enum SitesError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    App(#[from] AppError),
}

/// A `.cu` file's sites (every function of the file, check kernels included, listed kernel by
/// kernel), or the sites of an app or a PTX file, as they are numbered when it runs.
pub enum Listed {
    Cuda(Vec<FenceSite>),
    /// An app's sites with its source (whose lines are shown from it), or a PTX file's.
    App(Vec<FenceSite>, Option<KernelSource>),
}

impl Listed {
    /// The sites, in id order.
    pub fn sites(&self) -> &[FenceSite] {
        match self {
            Listed::Cuda(sites) | Listed::App(sites, _) => sites,
        }
    }

    /// The heading before site `i` of a `.cu` listing when it starts another kernel.
    pub fn heading(&self, i: usize) -> Option<String> {
        let Listed::Cuda(sites) = self else {
            return None;
        };
        let starts = i == 0 || sites[i - 1].function != sites[i].function;
        starts.then(|| format!("kernel {}:", sites[i].function))
    }

    /// The count line that ends a listing.
    pub fn summary(&self) -> String {
        let sites = self.sites();
        let accesses: usize = sites.iter().map(|s| s.accesses.len()).sum();
        format!(
            "{} fence sites, {accesses} access instructions",
            sites.len()
        )
    }

    /// The listing as text (each site with its place, source line and PTX accesses, then the
    /// count and any note), and warnings about source files whose lines are not shown.
    pub fn render(&self) -> (String, Vec<String>) {
        let mut sources = match self {
            Listed::App(_, Some(source)) => SourceLines::of_app(source),
            _ => SourceLines::default(),
        };
        let mut text = String::new();
        for (i, site) in self.sites().iter().enumerate() {
            if let Some(heading) = self.heading(i) {
                text += &format!("{heading}\n");
            }
            site_text(&mut text, site, &mut sources);
        }
        text += &format!("{}\n", self.summary());
        if let Some(note) = self.note() {
            text += &format!("{note}\n");
        }
        (text, sources.take_warnings())
    }

    /// What a `.cu` listing's numbering is not: the one check and harden use.
    pub fn note(&self) -> Option<&'static str> {
        matches!(self, Listed::Cuda(_)).then_some(
            "note: numbered over every function of the file, check kernels included; for the \
             ids check --fences and harden use, name the app (`ptx sites APP` or --app-dir DIR)",
        )
    }
}

/// The sites of `input` (an app name or a kernel file) or of the app in `app_dir`; `arch` is
/// the NVRTC architecture for a kernel file (an app uses the one check uses, at the simulator's
/// input size).
pub fn list_sites(
    input: Option<&Path>,
    app_dir: Option<&Path>,
    arch: &str,
    granularity: Granularity,
) -> Result<Listed, SitesError> {
    if let (Some(input), None) = (input, app_dir) {
        if is_kernel_file(input) {
            let sites = fence_sites(&load_kernel_file(input, arch)?.module, granularity);
            return Ok(match input.extension().is_some_and(|e| e == "cu") {
                true => Listed::Cuda(sites),
                false => Listed::App(sites, None),
            });
        }
    }
    let app = match (app_dir, input) {
        (Some(dir), Some(name)) => load_named_app_dir(dir, &name.to_string_lossy())?,
        (Some(dir), None) => load_app_dir(dir)?,
        (None, Some(name)) => find_app(&name.to_string_lossy())?,
        (None, None) => find_app("")?,
    };
    let sites = app_sites(&*app, Size::Sim, granularity)?;
    Ok(Listed::App(sites, Some(app.source().clone())))
}

/// Whether `path` names a file rather than an app: it exists, or has an extension or a folder.
fn is_kernel_file(path: &Path) -> bool {
    path.exists() || path.extension().is_some() || path.components().count() > 1
}

/// Appends `site` to `text`: id, place and function, the source line when it can be read, and
/// each PTX access (with where it was inlined from).
fn site_text(text: &mut String, site: &FenceSite, sources: &mut SourceLines) {
    use std::fmt::Write;
    let place = site
        .source
        .as_ref()
        .map_or_else(|| "(no line info)".to_string(), |s| s.to_string());
    let function = source_name(&site.function);
    let _ = writeln!(text, "#{:<3} {place}  [{function}]", site.id);
    if let Some(line) = site
        .source
        .as_ref()
        .and_then(|s| sources.line(&s.file, s.line))
    {
        let _ = writeln!(text, "       | {}", line.trim());
    }
    for access in &site.accesses {
        let inner = match &access.inner {
            Some(inner) if Some(inner) != site.source.as_ref() => {
                format!("   (inlined from {inner})")
            }
            _ => String::new(),
        };
        let _ = writeln!(text, "       > {}{inner}", access.ptx.replace('\t', " "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::passes::fences::SourceLine;
    use std::path::PathBuf;

    /// Bug: `ptx sites cbe-dot` from an installed binary warned "source lines not shown: cannot
    /// read it" for `/built-in/gpuwmm/apps/cbe-dot/kernel.cu`, while harden showed the lines: an
    /// app's lines now come from its source, as harden takes them, never from the disk.
    #[test]
    fn an_apps_site_lines_come_from_its_source_not_the_disk() {
        let file = "/built-in/gpuwmm/apps/nowhere/kernel.cu";
        assert!(!Path::new(file).exists());
        let source = KernelSource::single(PathBuf::from(file), "a();\nb = 1;\n".into());
        let site = FenceSite {
            id: 0,
            function: "k".into(),
            source: Some(SourceLine {
                file: file.into(),
                line: 2,
            }),
            accesses: Vec::new(),
        };
        let listed = Listed::App(vec![site.clone()], Some(source));
        let (text, warnings) = listed.render();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(
            text.contains(&format!("#0   {file}:2  [k]\n       | b = 1;\n")),
            "{text}"
        );
        // A PTX file's sites (no app) still read the disk, and say why a line is missing.
        let (text, warnings) = Listed::App(vec![site], None).render();
        assert!(!text.contains("b = 1;"), "{text}");
        assert!(
            warnings[0].contains("source lines not shown"),
            "{warnings:?}"
        );
    }
}
