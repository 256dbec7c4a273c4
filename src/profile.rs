//! Stress profiles: the tuned `sys` stress parameters of one chip, `tuning/<chip>.toml`.
//!
//! `gpuwmm tune` finds a chip's critical patch size, its most effective access sequence and its
//! best spread, and writes them with their provenance. `check` and `harden` read them. Until a
//! chip has been tuned, a default profile per backend is used (`tuning/default-cuda.toml`,
//! `tuning/sim.toml`), and the run says so. The defaults are also compiled into the binary, so a
//! missing `tuning/` folder never stops a check.

use crate::backend::{BackendKind, DeviceInfo};
use crate::ptx::passes::stress::parse_sequence;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The built-in default for GPUs without a profile of their own.
pub const DEFAULT_CUDA: &str = include_str!("../tuning/default-cuda.toml");
/// The simulator's profile.
pub const DEFAULT_SIM: &str = include_str!("../tuning/sim.toml");

/// The `sys` stress parameters of a chip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StressProfile {
    /// The chip this profile is for (`sim`, `default-cuda`, or a slug of the device name).
    pub chip: String,
    /// Critical patch size in 32-bit words.
    pub patch_words: u32,
    /// The access sequence σ, e.g. `ld st2 ld`.
    pub sequence: String,
    /// Number of stressed patch-sized regions.
    pub spread: u32,
    #[serde(default)]
    pub provenance: Provenance,
}

/// Where a profile's values come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `default` (not tuned) or `tune` (written by `gpuwmm tune`).
    #[serde(default)]
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A profile that cannot be used.
#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("cannot read tuning file {}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bad tuning file {}: {message}", .path.display())]
    Invalid { path: PathBuf, message: String },
}

impl StressProfile {
    /// Parses and validates a profile; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<StressProfile, ProfileError> {
        let invalid = |message: String| ProfileError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let profile: StressProfile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if profile.patch_words == 0 {
            return Err(invalid("patch_words must be at least 1".into()));
        }
        if profile.spread == 0 {
            return Err(invalid("spread must be at least 1".into()));
        }
        parse_sequence(&profile.sequence)
            .map_err(|e| invalid(format!("sequence '{}': {e}", profile.sequence)))?;
        Ok(profile)
    }

    /// Reads and validates a profile file.
    pub fn load(path: &Path) -> Result<StressProfile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        StressProfile::parse(&text, path)
    }

    /// Whether this profile was tuned on its chip (rather than a default).
    pub fn is_tuned(&self) -> bool {
        self.provenance.source == "tune"
    }
}

/// The file name of a chip's profile: the device name in lower case, runs of other characters
/// as one `-` (`NVIDIA H100 80GB HBM3` → `nvidia-h100-80gb-hbm3`).
pub fn chip_slug(device_name: &str) -> String {
    let mut slug = String::new();
    for c in device_name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

/// The folder profiles live in by default ([`crate::places::profile_dir`]): `tuning/` of the
/// source tree for a binary run from it, the user's data folder for an installed one.
pub fn default_dir() -> PathBuf {
    crate::places::profile_dir()
}

/// The chip name a device's profile is filed under: `sim`, or the slug of the GPU's name.
pub fn chip_of(device: &DeviceInfo) -> String {
    match device.backend {
        BackendKind::Sim => "sim".to_string(),
        BackendKind::Cuda => chip_slug(&device.name),
    }
}

/// A warning for a profile tuned on another chip than `device` (stress tuned for one chip
/// may expose little on another); `None` when the chips match or the profile is a default.
pub fn other_chip_warning(profile: &StressProfile, device: &DeviceInfo) -> Option<String> {
    let here = chip_of(device);
    (profile.is_tuned() && profile.chip != here).then(|| {
        format!(
            "warning: the stress profile is for chip '{}', but this is '{here}': stress tuned \
             for one chip may expose little on another (run `gpuwmm tune` here for a profile of \
             its own)",
            profile.chip
        )
    })
}

/// The file name and text of the backend's built-in default profile.
fn builtin_default(device: &DeviceInfo) -> (&'static str, &'static str) {
    match device.backend {
        BackendKind::Sim => ("sim.toml", DEFAULT_SIM),
        BackendKind::Cuda => ("default-cuda.toml", DEFAULT_CUDA),
    }
}

/// The built-in default profile of the device's backend (what a chip without a profile uses).
pub fn default_for(device: &DeviceInfo) -> StressProfile {
    let (name, text) = builtin_default(device);
    StressProfile::parse(text, Path::new(name)).expect("the built-in profiles are valid (tested)")
}

/// The profile for `device`: `<dir>/<chip>.toml` if it exists, else the backend's default (the
/// file in `dir` if present, else the built-in copy). Returns the profile and where it came from.
pub fn resolve(dir: &Path, device: &DeviceInfo) -> Result<(StressProfile, String), ProfileError> {
    let (default_name, _) = builtin_default(device);
    for name in [
        format!("{}.toml", chip_of(device)),
        default_name.to_string(),
    ] {
        let path = dir.join(&name);
        if path.is_file() {
            return Ok((StressProfile::load(&path)?, path.display().to_string()));
        }
    }
    Ok((default_for(device), format!("built-in {default_name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_profiles_are_valid_defaults() {
        for (text, chip) in [(DEFAULT_SIM, "sim"), (DEFAULT_CUDA, "default-cuda")] {
            let profile = StressProfile::parse(text, Path::new(chip)).unwrap();
            assert_eq!(profile.chip, chip);
            assert_eq!(profile.provenance.source, "default");
            assert!(!profile.is_tuned());
        }
    }

    #[test]
    fn a_bad_tuning_file_names_the_file_and_the_problem() {
        let path = Path::new("tuning/x.toml");
        let cases = [
            (
                "chip = 'x'\npatch_words = 0\nsequence = 'ld'\nspread = 2",
                "patch_words",
            ),
            (
                "chip = 'x'\npatch_words = 32\nsequence = 'ld'\nspread = 0",
                "spread",
            ),
            (
                "chip = 'x'\npatch_words = 32\nsequence = 'ld xx'\nspread = 2",
                "sequence",
            ),
            ("chip = 'x'\npatch_words = 32\nspread = 2", "sequence"),
            (
                "chip = 'x'\npatch_words = 32\nsequence = 'ld'\nspread = 2\nspred = 3",
                "spred",
            ),
        ];
        for (text, needle) in cases {
            let error = StressProfile::parse(text, path).unwrap_err().to_string();
            assert!(error.contains("tuning/x.toml"), "{error}");
            assert!(error.contains(needle), "{needle}: {error}");
        }
    }

    #[test]
    fn chip_slugs_are_file_name_safe() {
        assert_eq!(chip_slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
        assert_eq!(chip_slug("  GeForce GTX Titan!! "), "geforce-gtx-titan");
    }

    #[test]
    fn a_chip_file_wins_over_the_default_and_the_default_over_the_built_in() {
        let dir = tempfile::tempdir().unwrap();
        let sim = crate::backend::sim::SimBackend::new(crate::backend::sim::SimConfig::new(
            crate::backend::sim::MemoryModel::Weak,
            1,
        ));
        let info = crate::backend::Device::info(&sim).clone();
        let (profile, from) = resolve(dir.path(), &info).unwrap();
        assert_eq!(
            (profile.chip.as_str(), from.as_str()),
            ("sim", "built-in sim.toml")
        );
        let file = dir.path().join("sim.toml");
        std::fs::write(
            &file,
            "chip = 'sim'\npatch_words = 8\nsequence = 'st'\nspread = 1\n",
        )
        .unwrap();
        let (profile, from) = resolve(dir.path(), &info).unwrap();
        assert_eq!(profile.patch_words, 8);
        assert_eq!(from, file.display().to_string());
    }

    /// QA: a profile tuned on an A100, given to a check on another chip, ran without a word.
    #[test]
    fn a_profile_tuned_on_another_chip_is_warned_about_and_a_default_is_not() {
        let sim = crate::backend::sim::SimBackend::new(crate::backend::sim::SimConfig::new(
            crate::backend::sim::MemoryModel::Ptx,
            1,
        ));
        let info = crate::backend::Device::info(&sim).clone();
        let tuned = |chip: &str| {
            let text = format!(
                "chip = '{chip}'\npatch_words = 8\nsequence = 'st'\nspread = 1\n\
                 [provenance]\nsource = 'tune'\n"
            );
            StressProfile::parse(&text, Path::new("p.toml")).unwrap()
        };
        let warning = other_chip_warning(&tuned("a100"), &info).unwrap();
        assert!(
            warning.contains("for chip 'a100', but this is 'sim'"),
            "{warning}"
        );
        assert_eq!(other_chip_warning(&tuned("sim"), &info), None);
        assert_eq!(other_chip_warning(&default_for(&info), &info), None);
    }
}
