//! The registry of built-in case studies, their `-nf` variants, and bring-your-own app folders.
//!
//! The built-in apps' sources (`apps/<name>/kernel.cu`, and `app.toml` for manifest apps) are
//! compiled into the binary, so `gpuwmm check sdk-red` works from any directory; their paths
//! still point into the repository so reports can show `file:line`. A `-nf` variant is the same
//! app with the strip-fences pass applied to its module ([`StrippedVariant`]), never a second
//! copy of the source.

use super::cbe::{CbeDot, CbeHt};
use super::manifest::Manifest;
use super::manifest_app::ManifestApp;
use super::{builtin_apps_dir, App, AppError, KernelSource, RunContext, Size, Unpatchable};
use super::{PatchedFile, Verdict};
use crate::ptx::passes::fences::{relax_orderings, strip_fences_except};
use crate::ptx::Module;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Names of the built-in apps, in the order of the paper's table 4.
/// `cccl-scan` (not in the paper) closes the list: its inter-block code is CUB's, not ours.
pub const BUILTIN_APP_NAMES: [&str; 13] = [
    "cbe-ht",
    "cbe-dot",
    "ct-octree",
    "tpo-tm",
    "ls-bh",
    "ls-bh-nf",
    "sdk-red",
    "sdk-red-nf",
    "cub-scan",
    "cub-scan-nf",
    "cccl-scan",
    "cccl-scan-nf",
    "cccl-scan-rlx",
];

fn source(name: &str, text: &str) -> KernelSource {
    KernelSource::single(
        builtin_apps_dir().join(name).join("kernel.cu"),
        text.to_string(),
    )
}

fn manifest_app(name: &str, manifest: &str, kernel: &str) -> Result<Arc<dyn App>, AppError> {
    let file = builtin_apps_dir().join(name).join("app.toml");
    let manifest = Manifest::parse(&file, manifest)?;
    Ok(Arc::new(ManifestApp::new(manifest, source(name, kernel))))
}

/// The manifest app of `apps/<name>/`, its manifest and kernel compiled into the binary.
macro_rules! manifest_app {
    ($name:literal) => {
        manifest_app(
            $name,
            include_str!(concat!("../../apps/", $name, "/app.toml")),
            include_str!(concat!("../../apps/", $name, "/kernel.cu")),
        )
    };
}

/// The built-in app called `name`.
fn builtin(name: &str) -> Option<Result<Arc<dyn App>, AppError>> {
    Some(match name {
        "cbe-dot" => Ok(Arc::new(CbeDot::new(source(
            "cbe-dot",
            include_str!("../../apps/cbe-dot/kernel.cu"),
        )))),
        "cbe-ht" => Ok(Arc::new(CbeHt::new(source(
            "cbe-ht",
            include_str!("../../apps/cbe-ht/kernel.cu"),
        )))),
        "ct-octree" => manifest_app!("ct-octree"),
        "tpo-tm" => manifest_app!("tpo-tm"),
        "ls-bh" => manifest_app!("ls-bh"),
        "ls-bh-nf" => manifest_app!("ls-bh").map(|a| StrippedVariant::arc(a, "ls-bh-nf")),
        "sdk-red" => manifest_app!("sdk-red"),
        "sdk-red-nf" => manifest_app!("sdk-red").map(|a| StrippedVariant::arc(a, "sdk-red-nf")),
        "cub-scan" => manifest_app!("cub-scan"),
        "cub-scan-nf" => manifest_app!("cub-scan").map(|a| StrippedVariant::arc(a, "cub-scan-nf")),
        "cccl-scan" => manifest_app!("cccl-scan"),
        "cccl-scan-nf" => {
            manifest_app!("cccl-scan").map(|a| StrippedVariant::arc(a, "cccl-scan-nf"))
        }
        "cccl-scan-rlx" => manifest_app!("cccl-scan")
            .map(|a| Arc::new(StrippedVariant::relaxed(a, "cccl-scan-rlx")) as _),
        _ => return None,
    })
}

/// Every built-in app, in the order of [`BUILTIN_APP_NAMES`].
pub fn builtin_apps() -> Result<Vec<Arc<dyn App>>, AppError> {
    BUILTIN_APP_NAMES
        .iter()
        .filter_map(|name| builtin(name))
        .collect()
}

/// The built-in app called `name`; an unknown name is an error listing the known ones.
pub fn find_app(name: &str) -> Result<Arc<dyn App>, AppError> {
    builtin(name).unwrap_or_else(|| {
        Err(AppError::UnknownApp {
            name: name.to_string(),
            known: BUILTIN_APP_NAMES.join(", "),
        })
    })
}

/// A bring-your-own app: a folder with `kernel.cu` and `app.toml`.
///
/// An app named like a built-in one is refused: it would stand in for the built-in app in every
/// list, journal and report that names apps, and nothing would tell the two apart.
pub fn load_app_dir(dir: &Path) -> Result<Arc<dyn App>, AppError> {
    let app = ManifestApp::load_dir(dir)?;
    if BUILTIN_APP_NAMES.contains(&app.name()) {
        return Err(AppError::Invalid {
            app: app.name().to_string(),
            message: format!(
                "{}: `name` is a built-in app's name; give the app in {} a name of its own",
                App::manifest(&app)
                    .map_or(dir.join("app.toml"), |m| m.file.clone())
                    .display(),
                dir.display()
            ),
        });
    }
    Ok(Arc::new(app))
}

/// The app in `dir` ([`load_app_dir`]), which must be the one named `name` on the command line,
/// or its `-nf` variant (`NAME-nf`: the app with its own fences stripped from the PTX, as the
/// built-in variants are): a folder whose manifest names another app is an error naming both
/// (the runs, journal and report would otherwise carry one name for another app).
pub fn load_named_app_dir(dir: &Path, name: &str) -> Result<Arc<dyn App>, AppError> {
    let app = load_app_dir(dir)?;
    if app.name() == name {
        return Ok(app);
    }
    if name.strip_suffix("-nf") == Some(app.name()) {
        return Ok(StrippedVariant::arc(app, name));
    }
    Err(AppError::Invalid {
        app: name.to_string(),
        message: format!(
            "--app-dir {} holds the app '{}' (its app.toml's `name`), not '{name}'; give '{}' as \
             the app's name (or '{}-nf' for it without its own fences), or the folder of \
             '{name}'",
            dir.display(),
            app.name(),
            app.name(),
            app.name(),
        ),
    })
}

/// An app with every fence of its module removed by the strip-fences pass (the paper's `-nf`
/// variants), or with its release/acquire accesses weakened to relaxed ([`Self::relaxed`], for
/// code whose ordering lives in its accesses): same source, same inputs, same post-condition.
pub struct StrippedVariant {
    base: Arc<dyn App>,
    name: String,
    description: String,
    weakening: Weakening,
    /// Lines of the base's files whose fences the strip-fences pass leaves (a patch's, see
    /// [`App::patched`]); none for the variant itself.
    patch_lines: Vec<(PathBuf, BTreeSet<u32>)>,
}

/// What a variant removes from its base's module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weakening {
    /// Every fence (strip-fences pass).
    Fences,
    /// Release and acquire semantics of accesses (relax-orderings pass); fences stay.
    Orderings,
}

impl Weakening {
    /// How a variant's description says what was weakened.
    fn described(self) -> &'static str {
        match self {
            Weakening::Fences => "the app's own fences removed by the strip-fences pass",
            Weakening::Orderings => {
                "its release/acquire accesses weakened to relaxed by the relax-orderings pass; \
                 fences kept"
            }
        }
    }
}

impl StrippedVariant {
    pub fn new(base: Arc<dyn App>, name: &str) -> StrippedVariant {
        StrippedVariant::weakened(base, name, Weakening::Fences)
    }

    /// The variant with every release, acquire and acq_rel access of the module weakened to
    /// relaxed by the relax-orderings pass; the app's fences stay.
    pub fn relaxed(base: Arc<dyn App>, name: &str) -> StrippedVariant {
        StrippedVariant::weakened(base, name, Weakening::Orderings)
    }

    /// `base` with `weakening` applied, called `name`.
    fn weakened(base: Arc<dyn App>, name: &str, weakening: Weakening) -> StrippedVariant {
        let description = format!(
            "{} (variant: {})",
            base.description(),
            weakening.described()
        );
        StrippedVariant {
            base,
            name: name.to_string(),
            description,
            weakening,
            patch_lines: Vec::new(),
        }
    }

    fn arc(base: Arc<dyn App>, name: &str) -> Arc<dyn App> {
        Arc::new(StrippedVariant::new(base, name))
    }

    /// The app this variant strips.
    pub fn base(&self) -> &Arc<dyn App> {
        &self.base
    }
}

impl App for StrippedVariant {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn postcondition(&self) -> &str {
        self.base.postcondition()
    }

    fn source(&self) -> &KernelSource {
        self.base.source()
    }

    fn kernels(&self, size: Size) -> Vec<String> {
        self.base.kernels(size)
    }

    fn parameters(&self, size: Size) -> Vec<(String, i64)> {
        self.base.parameters(size)
    }

    fn module(&self, arch: &str, size: Size) -> Result<Module, AppError> {
        let module = self.base.module(arch, size)?;
        Ok(match self.weakening {
            Weakening::Fences => strip_fences_except(&module, &self.patch_lines).0,
            Weakening::Orderings => relax_orderings(&module).0,
        })
    }

    fn check_module(&self, arch: &str, size: Size) -> Result<Option<Module>, AppError> {
        self.base.check_module(arch, size)
    }

    fn unstripped(&self) -> Option<&dyn App> {
        Some(self.base.as_ref())
    }

    fn manifest(&self) -> Option<&Manifest> {
        self.base.manifest()
    }

    fn resolved_kernel(&self, size: Size, kernel: &str) -> String {
        self.base.resolved_kernel(size, kernel)
    }

    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        self.base.run(ctx)
    }

    /// The base built from `files`, weakened as this variant weakens it, except for the fences
    /// on the lines the patch changed: the program harden checked, the app's own fences
    /// stripped and the patch's in.
    fn patched(&self, files: &[PatchedFile]) -> Result<Arc<dyn App>, Unpatchable> {
        let patch_lines = files
            .iter()
            .map(|f| (f.path.clone(), f.changed_lines.clone()))
            .collect();
        Ok(Arc::new(StrippedVariant {
            base: self.base.patched(files)?,
            name: self.name.clone(),
            description: self.description.clone(),
            weakening: self.weakening,
            patch_lines,
        }))
    }
}
