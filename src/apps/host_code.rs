//! Host code in an app's source files, found when NVRTC refuses them.
//!
//! A CUDA file taken as it is from a project often holds its `main` too: `#include <iostream>`,
//! `cudaMalloc`, a `<<<...>>>` launch. NVRTC compiles device code only and answers such a file
//! with a wall of errors that do not say why. When a compilation fails, this file looks for the
//! first host line the preprocessor would keep (outside `#ifndef __CUDACC_RTC__` and the like),
//! so that the error can name it and say how to fix it. It runs only on failure: a host line
//! NVRTC happens to accept (a plain host function) is never reported.

use std::path::PathBuf;

/// A host line: where, and its text (trimmed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLine {
    /// 1-based.
    pub line: usize,
    pub text: String,
}

/// The first host line of `text` that NVRTC would see; `unopened` lists the include names
/// NVRTC said it cannot open (an `#include` of one of them is a host line).
pub fn first_host_line(text: &str, unopened: &[String]) -> Option<HostLine> {
    first_kept_line(text, |line| is_host(line, unopened))
}

/// The first `#include` of `text` that NVRTC would see naming one of `names`.
pub fn first_include_of(text: &str, names: &[String]) -> Option<HostLine> {
    first_kept_line(text, |line| {
        included_name(line).is_some_and(|n| names.iter().any(|u| u == n))
    })
}

/// The first line the preprocessor keeps (outside excluded conditional parts) for which `wanted`
/// holds, given the trimmed line.
fn first_kept_line(text: &str, wanted: impl Fn(&str) -> bool) -> Option<HostLine> {
    let mut conditions = Conditions::default();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(directive) = trimmed.strip_prefix('#') {
            conditions.see(directive.trim_start());
        }
        if conditions.excluded() || !wanted(trimmed) {
            continue;
        }
        return Some(HostLine {
            line: i + 1,
            text: trimmed.to_string(),
        });
    }
    None
}

/// The include names an NVRTC log says it cannot open (`cannot open source file "iostream"`).
pub fn unopened_includes(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("cannot open source file \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// Where an NVRTC log says an include could not be opened: the including file, the line
/// (1-based) and the name, from `/app/util.cuh(3): catastrophic error: cannot open source file
/// "cstdio"`.
pub fn unopened_include_sites(log: &str) -> Vec<(PathBuf, usize, String)> {
    log.lines()
        .filter_map(|l| {
            let (place, rest) = l.split_once(": catastrophic error: cannot open source file \"")?;
            let name = rest.split('"').next()?;
            let (file, line) = place.strip_suffix(')')?.rsplit_once('(')?;
            Some((PathBuf::from(file), line.parse().ok()?, name.to_string()))
        })
        .collect()
}

/// Whether a (trimmed) line is host code.
fn is_host(line: &str, unopened: &[String]) -> bool {
    if let Some(name) = included_name(line) {
        return unopened.iter().any(|u| u == name);
    }
    let code = line.split("//").next().unwrap_or(line);
    code.contains("<<<")
        || code.starts_with("using namespace std")
        || code.contains("std::cout")
        || code.contains("std::cerr")
        || is_main(code)
        || calls_runtime_api(code)
}

pub fn included_name(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix('#')?
        .trim_start()
        .strip_prefix("include")?;
    let rest = rest.trim_start();
    let close = match rest.chars().next()? {
        '"' => '"',
        '<' => '>',
        _ => return None,
    };
    rest[1..].split(close).next()
}

/// `int main(`, `void main (`: a definition of `main`.
fn is_main(code: &str) -> bool {
    let mut words = code.split(|c: char| !(c.is_alphanumeric() || c == '_'));
    let first = words.next().unwrap_or("");
    matches!(first, "int" | "void" | "auto")
        && code[first.len()..].trim_start().starts_with("main")
        && code[first.len()..].trim_start()[4..]
            .trim_start()
            .starts_with('(')
}

/// A call of the CUDA runtime's host API: `cudaMalloc(`, `cudaMemcpy (`, ...
fn calls_runtime_api(code: &str) -> bool {
    code.match_indices("cuda").any(|(at, _)| {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return false;
        }
        let rest = &code[at + 4..];
        let name_end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        rest.starts_with(|c: char| c.is_ascii_uppercase())
            && rest[name_end..].trim_start().starts_with('(')
    })
}

/// The preprocessor conditionals around a line, as far as they decide whether NVRTC sees it:
/// one entry per open `#if`, true where that branch is skipped under NVRTC.
#[derive(Debug, Default)]
struct Conditions {
    skipped: Vec<bool>,
}

impl Conditions {
    fn see(&mut self, directive: &str) {
        let word = directive.split_whitespace().next().unwrap_or("");
        let rest = directive[word.len()..].trim();
        match word {
            // NVRTC defines both: code under either `#ifndef` is host code it never sees.
            "ifndef" => self
                .skipped
                .push(rest.starts_with("__CUDACC_RTC__") || rest.starts_with("__CUDA_ARCH__")),
            "if" => self
                .skipped
                .push(["__CUDACC_RTC__", "__CUDA_ARCH__"].iter().any(|m| {
                    rest.starts_with(&format!("!defined({m})"))
                        || rest.starts_with(&format!("!defined {m}"))
                })),
            "ifdef" => self.skipped.push(false),
            "else" | "elif" => {
                // The other branch of a guard is what NVRTC sees; of any other, either may be.
                if let Some(top) = self.skipped.last_mut() {
                    *top = false;
                }
            }
            "endif" => {
                self.skipped.pop();
            }
            _ => {}
        }
    }

    fn excluded(&self) -> bool {
        self.skipped.iter().any(|s| *s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_unguarded_host_line_is_found() {
        let text = "#include \"own.cuh\"\n__global__ void k() {}\n#ifndef __CUDACC_RTC__\n\
                    int main() { cudaMalloc(&p, 4); }\n#endif\n#if !defined(__CUDA_ARCH__)\n\
                    void host() { cudaFree(p); }\n#endif\nvoid run() { k<<<1, 1>>>(); }\n";
        let host = first_host_line(text, &[]).unwrap();
        assert_eq!(host.line, 9);
        assert_eq!(host.text, "void run() { k<<<1, 1>>>(); }");
    }

    #[test]
    fn host_markers_are_recognised_and_device_code_is_not() {
        for host in [
            "int main(int argc, char **argv) {",
            "using namespace std;",
            "  cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);",
            "std::cout << x;",
        ] {
            assert!(first_host_line(host, &[]).is_some(), "{host}");
        }
        for device in [
            "__global__ void maintain(int *cudaX) { x = remain(); }",
            "int domain(int x);",
            "// int main() {",
            "atomicAdd(&cudaCounter, 1);",
        ] {
            assert_eq!(first_host_line(device, &[]), None, "{device}");
        }
    }

    #[test]
    fn the_file_and_line_of_an_unopened_include_are_read_from_the_log() {
        let log = "nvrtc: warning: old arch\n/app/src/util.cuh(3): catastrophic error: cannot \
                   open source file \"vector\"\n  #include <vector>\n";
        assert_eq!(
            unopened_include_sites(log),
            [(PathBuf::from("/app/src/util.cuh"), 3, "vector".to_string())]
        );
    }

    #[test]
    fn an_include_nvrtc_cannot_open_is_host_code() {
        let log = "k.cu(1): catastrophic error: cannot open source file \"iostream\"\n";
        let unopened = unopened_includes(log);
        assert_eq!(unopened, ["iostream"]);
        let text = "#include <cstdint>\n#include <iostream>\n";
        assert_eq!(first_host_line(text, &unopened).unwrap().line, 2);
    }
}
