//! Where the simulator keeps what kernels print until a driver takes it: a bounded buffer, as
//! CUDA's printf FIFO is.
//!
//! A GPU's FIFO holds each launch's records (`cudaLimitPrintfFifoSize`, 1 MiB by default); what
//! does not fit is lost. Here each launch may add [`FIFO_BYTES`] of formatted text (the bound
//! counts text, not CUDA's records); a line that does not fit is dropped whole. Output nobody
//! takes ([`DeviceOutput::take`]) stays up to [`KEPT_BYTES`], so that a driver that never asks
//! for it holds a bounded amount. Dropped bytes are counted and told in one line, at the end of
//! the launch that dropped them (or when the output is taken, if there is no room for the line).

/// Bytes of text one launch may print: CUDA's default `cudaLimitPrintfFifoSize`.
pub const FIFO_BYTES: usize = 1 << 20;

/// Bytes of output kept until they are taken, across launches.
pub const KEPT_BYTES: usize = 16 * FIFO_BYTES;

/// Room kept for the line that tells of dropped bytes.
const NOTE_ROOM: usize = 160;

/// What kernels printed, in the order the simulator executed the `printf` calls.
#[derive(Debug, Default)]
pub struct DeviceOutput {
    text: Vec<u8>,
    /// Bytes the current launch has added.
    launch_bytes: usize,
    /// Bytes dropped and not told yet.
    dropped: u64,
}

impl DeviceOutput {
    /// Starts a launch's share of the buffer.
    pub fn begin_launch(&mut self) {
        self.launch_bytes = 0;
    }

    /// Appends one `printf` call's text, or drops it whole when the launch's share or what is
    /// kept is full.
    pub fn print(&mut self, line: &[u8]) {
        let fits_launch = self.launch_bytes + line.len() <= FIFO_BYTES;
        let fits_kept = self.text.len() + line.len() + NOTE_ROOM <= KEPT_BYTES;
        if fits_launch && fits_kept {
            self.text.extend_from_slice(line);
            self.launch_bytes += line.len();
        } else {
            self.dropped += line.len() as u64;
        }
    }

    /// Ends a launch: tells what it dropped, where there is room for the line.
    pub fn end_launch(&mut self) {
        if self.dropped > 0 && self.text.len() + NOTE_ROOM <= KEPT_BYTES {
            self.tell_dropped();
        }
    }

    /// Everything printed since the last call, with the line telling of dropped bytes if it
    /// is still due.
    pub fn take(&mut self) -> Vec<u8> {
        if self.dropped > 0 {
            self.tell_dropped();
        }
        std::mem::take(&mut self.text)
    }

    fn tell_dropped(&mut self) {
        let line = format!(
            "[gpuwmm sim: printf buffer full ({} KiB per launch, CUDA's default \
             cudaLimitPrintfFifoSize): {} bytes of device output dropped]\n",
            FIFO_BYTES >> 10,
            self.dropped
        );
        self.text.extend_from_slice(line.as_bytes());
        self.dropped = 0;
    }
}
