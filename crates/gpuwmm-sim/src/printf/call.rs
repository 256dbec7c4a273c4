//! A thread's `call vprintf` executed: its format string and argument buffer read from the
//! thread's memory, the text appended to the launch's output and CUDA's return value written
//! back.
//!
//! The reads see memory as it is when the call executes (the newest value of each global
//! location, the block's shared memory, the thread's local memory); they are not accesses of
//! the memory model and race with nothing. Under the store-buffer model a string the thread
//! itself stored to global memory and has not yet drained is not seen.

use super::{format, PrintfSource, STRING_LIMIT};
use crate::device::BackendError;
use crate::memory::{read_le, write_le, MemFault};
use crate::sched::Machine;

impl Machine<'_> {
    /// `call vprintf`: `[format, args]` and `ret` are local-memory slots of the call's
    /// parameters. A null format prints nothing and returns -1, as CUDA's `printf` does.
    #[cold]
    #[inline(never)]
    pub(crate) fn printf(
        &mut self,
        t: usize,
        line: u32,
        [format_slot, args_slot]: [u32; 2],
        ret: Option<u32>,
    ) -> Result<(), BackendError> {
        let frame = t * self.local_size;
        let word = |slot: u32| read_le(&self.local[frame + slot as usize..][..8]);
        let (format_at, args_at) = (word(format_slot), word(args_slot));
        let value = match format_at {
            0 => -1,
            _ => {
                let text = c_string(self, t, format_at, STRING_LIMIT)
                    .map_err(|why| self.printf_fault(line, "format string", format_at, why))?;
                let mut source = ThreadMemory {
                    machine: self,
                    t,
                    line,
                    args: args_at,
                };
                let formatted = format(&text, &mut source)?;
                self.output.print(&formatted.text);
                formatted.arguments as i32
            }
        };
        if let Some(slot) = ret {
            let at = frame + slot as usize;
            write_le(&mut self.local[at..at + 4], u64::from(value as u32));
        }
        Ok(())
    }

    fn printf_fault(&self, line: u32, what: &str, addr: u64, why: MemFault) -> BackendError {
        let why = why.describe();
        self.fault(
            line,
            format_args!("printf: the {what} at {addr:#x} is {why}"),
        )
    }
}

/// The NUL-terminated string at generic address `addr` of thread `t`, without its NUL: at most
/// `limit` bytes. One that runs off its allocation before a NUL or the limit is unmapped.
fn c_string(m: &Machine, t: usize, addr: u64, limit: usize) -> Result<Vec<u8>, MemFault> {
    let bytes = m.generic_bytes(t, addr)?;
    let window = &bytes[..bytes.len().min(limit)];
    match window.iter().position(|&b| b == 0) {
        Some(end) => Ok(window[..end].to_vec()),
        None if window.len() == limit => Ok(window.to_vec()),
        None => Err(MemFault::Unmapped),
    }
}

/// A calling thread's memory as the formatter reads it.
struct ThreadMemory<'m, 'a> {
    machine: &'m Machine<'a>,
    t: usize,
    line: u32,
    /// Generic address of the argument buffer (0 when the call passes none).
    args: u64,
}

impl PrintfSource for ThreadMemory<'_, '_> {
    fn argument(&mut self, offset: u64, size: u64) -> Result<u64, BackendError> {
        let at = self.args.wrapping_add(offset);
        let m = self.machine;
        m.generic_bytes(self.t, at)
            .and_then(|b| b.get(..size as usize).ok_or(MemFault::Unmapped))
            .map(read_le)
            .map_err(|why| m.printf_fault(self.line, "argument", at, why))
    }

    fn string(&mut self, addr: u64, limit: usize) -> Result<Vec<u8>, BackendError> {
        c_string(self.machine, self.t, addr, limit)
            .map_err(|why| self.machine.printf_fault(self.line, "%s string", addr, why))
    }
}
