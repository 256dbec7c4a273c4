//! Planned faults and hangs: `GPUWMM_STANDIN_INJECT=fault@N,hang@M` makes the N-th kernel launch
//! fault (as an illegal address) and the M-th never end, counting from 1.
//!
//! Why this module exists: a correct application never faults or hangs on the simulator, yet CI
//! must show that `gpuwmm check --backend cuda` records both and goes on. Launches are counted per
//! process, or, when `GPUWMM_STANDIN_COUNTER` names a file, across every process that shares it
//! (the check's workers are replaced after a crash, so a per-process count would start again).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// What happens to one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planned {
    Run,
    Fault,
    Hang,
}

/// The parsed `GPUWMM_STANDIN_INJECT`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    faults: Vec<u64>,
    hangs: Vec<u64>,
}

impl Plan {
    /// Parses `fault@3,hang@7` (either list may be empty). The error names the bad item.
    pub fn parse(spec: &str) -> Result<Plan, String> {
        let mut plan = Plan::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (kind, number) = item
                .split_once('@')
                .ok_or_else(|| format!("'{item}' is not KIND@LAUNCH"))?;
            let number: u64 = number
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("'{item}': the launch number must be 1 or more"))?;
            match kind {
                "fault" => plan.faults.push(number),
                "hang" => plan.hangs.push(number),
                _ => return Err(format!("'{item}': KIND is fault or hang")),
            }
        }
        Ok(plan)
    }

    /// What to do with launch number `n` (counting from 1).
    pub fn decide(&self, n: u64) -> Planned {
        if self.faults.contains(&n) {
            Planned::Fault
        } else if self.hangs.contains(&n) {
            Planned::Hang
        } else {
            Planned::Run
        }
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.hangs.is_empty()
    }
}

/// Launches counted in this process (when no counter file is shared).
static LOCAL_LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// The number of this launch: one more than the count so far, in the shared counter file when
/// one is named, else in this process.
pub fn next_launch_number(counter_file: Option<&str>) -> u64 {
    match counter_file.and_then(|path| bump_file(path).ok()) {
        Some(n) => n,
        None => LOCAL_LAUNCHES.fetch_add(1, Ordering::SeqCst) + 1,
    }
}

/// Adds one to the decimal count in `path` under an exclusive lock, and returns the new count.
fn bump_file(path: &str) -> std::io::Result<u64> {
    let mut file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let n = text.trim().parse::<u64>().unwrap_or(0) + 1;
    file.seek(SeekFrom::Start(0))?;
    file.set_len(0)?;
    write!(file, "{n}")?;
    file.flush()?;
    file.unlock()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_decide() {
        let plan = Plan::parse("fault@3, hang@7").unwrap();
        assert_eq!(plan.decide(3), Planned::Fault);
        assert_eq!(plan.decide(7), Planned::Hang);
        assert_eq!(plan.decide(4), Planned::Run);
        assert!(Plan::parse("").unwrap().is_empty());
        assert!(Plan::parse("crash@3").unwrap_err().contains("crash@3"));
        assert!(Plan::parse("fault@0").is_err());
        assert!(Plan::parse("fault").is_err());
    }

    #[test]
    fn a_counter_file_counts_across_calls() {
        let dir = std::env::temp_dir().join(format!("gpuwmm-standin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("count");
        let path = path.to_str().unwrap();
        assert_eq!(next_launch_number(Some(path)), 1);
        assert_eq!(next_launch_number(Some(path)), 2);
        assert_eq!(std::fs::read_to_string(path).unwrap(), "2");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
