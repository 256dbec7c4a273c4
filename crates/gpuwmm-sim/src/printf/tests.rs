//! The formatter against a table of directives, and the FIFO's bound. The expected texts are
//! what glibc's `printf` prints for the same directives and values.

use super::*;
use std::collections::HashMap;

/// One argument as the caller's buffer holds it.
#[derive(Debug, Clone, Copy)]
enum Arg {
    /// `int`, `unsigned`, `char`, `short`: 4 bytes.
    Int(i64),
    /// `long long`, `size_t`: 8 bytes.
    Long(i64),
    Double(f64),
    /// A pointer: 8 bytes.
    Ptr(u64),
}

/// An argument buffer and the strings `%s` may read, by address.
#[derive(Default)]
struct Memory {
    args: Vec<u8>,
    strings: HashMap<u64, Vec<u8>>,
}

impl Memory {
    /// A buffer laid out as the caller lays it out: each argument at its natural alignment.
    fn with(args: &[Arg]) -> Memory {
        let mut m = Memory::default();
        for a in args {
            let bytes = match *a {
                Arg::Int(v) => (v as i32).to_le_bytes().to_vec(),
                Arg::Long(v) => v.to_le_bytes().to_vec(),
                Arg::Double(v) => v.to_le_bytes().to_vec(),
                Arg::Ptr(v) => v.to_le_bytes().to_vec(),
            };
            let at = m.args.len().next_multiple_of(bytes.len());
            m.args.resize(at, 0xee);
            m.args.extend_from_slice(&bytes);
        }
        m.strings.insert(HELLO, b"hello\0trailing".to_vec());
        m
    }
}

/// Where the test's `hello` string lives.
const HELLO: u64 = 0x7000_0000_0100;

impl PrintfSource for Memory {
    fn argument(&mut self, offset: u64, size: u64) -> Result<u64, BackendError> {
        let range = offset as usize..(offset + size) as usize;
        let bytes = self
            .args
            .get(range)
            .ok_or_else(|| BackendError::Fault(format!("argument at {offset} is past the end")))?;
        let mut v = [0u8; 8];
        v[..bytes.len()].copy_from_slice(bytes);
        Ok(u64::from_le_bytes(v))
    }

    fn string(&mut self, addr: u64, limit: usize) -> Result<Vec<u8>, BackendError> {
        let bytes = self
            .strings
            .get(&addr)
            .ok_or_else(|| BackendError::Fault(format!("no string at {addr:#x}")))?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(bytes[..end.min(limit)].to_vec())
    }
}

fn formatted(fmt: &str, args: &[Arg]) -> Formatted {
    format(fmt.as_bytes(), &mut Memory::with(args)).expect("formats")
}

fn text(fmt: &str, args: &[Arg]) -> String {
    String::from_utf8(formatted(fmt, args).text).expect("ASCII")
}

use Arg::{Double as D, Int as I, Long as L, Ptr as P};

#[test]
fn integer_directives_print_as_c_prints_them() {
    let table: &[(&str, &[Arg], &str)] = &[
        ("%d", &[I(42)], "42"),
        ("%i", &[I(-42)], "-42"),
        ("%5d|", &[I(-42)], "  -42|"),
        ("%-5d|", &[I(42)], "42   |"),
        ("%05d", &[I(-42)], "-0042"),
        ("%+d % d %+ d", &[I(7), I(7), I(7)], "+7  7 +7"),
        ("%.3d", &[I(7)], "007"),
        ("[%.0d]", &[I(0)], "[]"),
        ("%08.3d", &[I(7)], "     007"),
        ("%u", &[I(-1)], "4294967295"),
        ("%x", &[I(0xdead_beef)], "deadbeef"),
        ("%#X %#x %#x", &[I(255), I(0), I(255)], "0XFF 0 0xff"),
        (
            "%#10.4x|%-#10x|",
            &[I(255), I(255)],
            "    0x00ff|0xff      |",
        ),
        (
            "%o %#o %#.3o %#o %#.0o",
            &[I(8), I(8), I(8), I(0), I(0)],
            "10 010 010 0 0",
        ),
        (
            "%hd %hhd %hhu %hx",
            &[I(70000), I(-129), I(257), I(-1)],
            "4464 127 1 ffff",
        ),
        ("%ld", &[L(-1 << 40)], "-1099511627776"),
        ("%lld", &[L(i64::MIN)], "-9223372036854775808"),
        ("%llu %zu", &[L(-1), L(123)], "18446744073709551615 123"),
        ("%lx", &[L(0x1234_5678_9abc_def0)], "123456789abcdef0"),
        ("%c%3c|%-3c|", &[I(65), I(65), I(65)], "A  A|A  |"),
        ("%lc%d", &[I(66), I(7)], "B7"),
        ("%*d|%*d|", &[I(5), I(42), I(-5), I(42)], "   42|42   |"),
    ];
    for (fmt, args, want) in table {
        assert_eq!(text(fmt, args), *want, "{fmt} of {args:?}");
    }
}

#[test]
fn strings_pointers_and_percent_print_as_c_prints_them() {
    let table: &[(&str, &[Arg], &str)] = &[
        ("%s", &[P(HELLO)], "hello"),
        (
            "%.2s|%8s|%-8s|",
            &[P(HELLO), P(HELLO), P(HELLO)],
            "he|   hello|hello   |",
        ),
        ("%05s|", &[P(HELLO)], "hello|"),
        ("%s", &[P(0)], "(null)"),
        ("%p", &[P(0x7000_0000_0100)], "0x700000000100"),
        ("%18p|", &[P(0x7000_0000_0100)], "    0x700000000100|"),
        ("%p", &[P(0)], "(nil)"),
        ("100%% %5%", &[], "100% %"),
    ];
    for (fmt, args, want) in table {
        assert_eq!(text(fmt, args), *want, "{fmt} of {args:?}");
    }
}

#[test]
fn double_directives_print_as_c_prints_them() {
    let table: &[(&str, f64, &str)] = &[
        ("%f", 1.23456, "1.234560"),
        ("%.2f", 2.675, "2.67"),
        ("%.0f", 2.5, "2"),
        ("%#.0f", 2.0, "2."),
        ("%10.3f|", -1.5, "    -1.500|"),
        ("%-10.1f|", 1.25, "1.2       |"),
        ("%010.2f", -1.23456, "-000001.23"),
        ("% 05.1f", 2.25, " 02.2"),
        ("%+f", 0.0, "+0.000000"),
        ("%f", -0.0, "-0.000000"),
        ("%F", f64::INFINITY, "INF"),
        ("%f", f64::NEG_INFINITY, "-inf"),
        ("%5f", f64::NAN, "  nan"),
        ("%05f", f64::INFINITY, "  inf"),
        ("%e", 12345.678, "1.234568e+04"),
        ("%.2E", 0.000123, "1.23E-04"),
        ("%e", 0.0, "0.000000e+00"),
        ("%e", 1e300, "1.000000e+300"),
        ("%#.0e", 5.0, "5.e+00"),
        ("%+.3e", -0.0, "-0.000e+00"),
        ("%-+8.3e|", 1234.5, "+1.234e+03|"),
        ("%g", 100000.0, "100000"),
        ("%g", 1000000.0, "1e+06"),
        ("%g", 0.0001, "0.0001"),
        ("%g", 0.00001, "1e-05"),
        ("%g", 1.5e-5, "1.5e-05"),
        ("%.3g", 1.23456, "1.23"),
        ("%.10g", 1.0 / 3.0, "0.3333333333"),
        ("%#g", 1.0, "1.00000"),
        ("%#g", 123456789.0, "1.23457e+08"),
        ("%G", 1e-10, "1E-10"),
        ("%g", 0.0, "0"),
        ("%.0g", 123.0, "1e+02"),
        ("%a", 1.0, "0x1p+0"),
        ("%a", 1.5, "0x1.8p+0"),
        ("%A", -0.1, "-0X1.999999999999AP-4"),
        ("%a", 0.0, "0x0p+0"),
        ("%a", 5e-324, "0x0.0000000000001p-1022"),
        ("%.0a", 1.5, "0x2p+0"),
        ("%.0a", 2.5, "0x1p+1"),
        ("%.1a", 1.0 / 3.0, "0x1.5p-2"),
        ("%.1a", 1.96875, "0x2.0p+0"),
        ("%.2a", 1.0, "0x1.00p+0"),
        ("%#.0a", 1.0, "0x1.p+0"),
        ("%.15a", 1.0, "0x1.000000000000000p+0"),
        ("%12a|", 1.0, "      0x1p+0|"),
        ("%012a", 1.0, "0x0000001p+0"),
        ("%lf", 0.5, "0.500000"),
    ];
    for (fmt, x, want) in table {
        assert_eq!(text(fmt, &[D(*x)]), *want, "{fmt} of {x:e}");
    }
}

#[test]
fn arguments_sit_at_their_natural_alignment_and_are_counted() {
    let args = [I(1), L(-2), D(3.5), I(4), P(HELLO), I(-6)];
    let out = formatted("%d %lld %.1f %c%s %hhd", &args);
    assert_eq!(
        String::from_utf8(out.text).unwrap(),
        "1 -2 3.5 \u{4}hello -6"
    );
    assert_eq!(out.arguments, 6);
    assert_eq!(formatted("%*d", &[I(3), I(1)]).arguments, 2);
    assert_eq!(formatted("no directives %%", &[]).arguments, 0);
}

#[test]
fn directives_cuda_does_not_take_print_as_written_and_consume_nothing() {
    let out = formatted("%.*d %n %Lf %q %d %5", &[I(9)]);
    assert_eq!(String::from_utf8(out.text).unwrap(), "%.*d %n %Lf %q 9 %5");
    assert_eq!(out.arguments, 1);
    assert_eq!(text("ends in %", &[]), "ends in %");
}

#[test]
fn directives_past_the_32nd_argument_print_as_written() {
    let args: Vec<Arg> = (0..33).map(I).collect();
    let out = formatted(&"%d ".repeat(33), &args);
    let shown = String::from_utf8(out.text).unwrap();
    let want: String = (0..32).map(|i| format!("{i} ")).collect::<String>() + "%d ";
    assert_eq!(shown, want);
    assert_eq!(out.arguments, MAX_ARGUMENTS);
}

#[test]
fn a_missing_argument_or_string_is_the_sources_error() {
    let missing = format(b"%d %d", &mut Memory::with(&[I(1)]));
    assert!(
        matches!(missing, Err(BackendError::Fault(_))),
        "{missing:?}"
    );
    let wild = format(b"%s", &mut Memory::with(&[P(0x1234)]));
    assert!(matches!(wild, Err(BackendError::Fault(_))), "{wild:?}");
}

#[test]
fn a_huge_width_is_clamped_past_the_fifo_not_built_in_full() {
    let out = formatted("%999999999999d", &[I(1)]);
    assert_eq!(out.text.len(), FIFO_BYTES + 1);
}

#[test]
fn a_launch_prints_at_most_the_fifo_and_tells_what_it_dropped() {
    let mut out = DeviceOutput::default();
    out.begin_launch();
    let line = vec![b'x'; 1000];
    for _ in 0..(FIFO_BYTES / 1000 + 5) {
        out.print(&line);
    }
    out.end_launch();
    // The next launch has a FIFO of its own.
    out.begin_launch();
    out.print(b"next launch\n");
    out.end_launch();
    let text = out.take();
    let kept = FIFO_BYTES / 1000 * 1000;
    assert!(text[..kept].iter().all(|&b| b == b'x'));
    let rest = String::from_utf8(text[kept..].to_vec()).unwrap();
    let dropped = FIFO_BYTES / 1000 + 5 - FIFO_BYTES / 1000;
    assert_eq!(
        rest,
        format!(
            "[gpuwmm sim: printf buffer full (1024 KiB per launch, CUDA's default \
             cudaLimitPrintfFifoSize): {} bytes of device output dropped]\nnext launch\n",
            dropped * 1000
        )
    );
    assert!(out.take().is_empty(), "taking empties the buffer");
}

#[test]
fn output_nobody_takes_stays_bounded_and_the_drop_is_told_when_taken() {
    let mut out = DeviceOutput::default();
    let line = vec![b'y'; 4096];
    for _ in 0..(fifo::KEPT_BYTES / FIFO_BYTES + 2) {
        out.begin_launch();
        for _ in 0..FIFO_BYTES / 4096 {
            out.print(&line);
        }
        out.end_launch();
    }
    let text = out.take();
    assert!(text.len() <= fifo::KEPT_BYTES, "{} bytes kept", text.len());
    let tail = String::from_utf8_lossy(&text[text.len() - 200..]);
    assert!(tail.contains("bytes of device output dropped]\n"), "{tail}");
}

mod on_the_simulator {
    use crate::device::{BackendError, Device, KernelArg, LaunchConfig};
    use crate::{SimBackend, SimConfig};
    use std::time::Duration;

    const PRINTF: &str = include_str!("../../../../tests/fixtures/ptx/small/printf.ptx");

    fn threads(n: u32) -> LaunchConfig {
        LaunchConfig::new((1, 1, 1), (n, 1, 1))
    }

    #[test]
    fn vprintf_prints_each_threads_line_and_returns_cudas_value() {
        let mut sim = SimBackend::new(SimConfig::default());
        let module = sim.load_module(PRINTF).unwrap();
        let out = sim.alloc(16).unwrap();
        sim.launch(module, "hello", &threads(2), &[KernelArg::ptr(out)])
            .unwrap();
        let mut results = [0u8; 16];
        sim.copy_out(out, 0, &mut results).unwrap();
        let results: Vec<i32> = results
            .chunks(4)
            .map(|w| i32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        // Two arguments parsed; a null format prints nothing and returns -1.
        assert_eq!(results, [2, 2, -1, -1]);
        let text = String::from_utf8(sim.take_device_output()).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["t=0 hi!", "t=1 hi!"], "{text:?}");
        assert!(sim.take_device_output().is_empty());
    }

    #[test]
    fn a_wild_percent_s_pointer_faults_naming_it() {
        let mut sim = SimBackend::new(SimConfig::default());
        let module = sim.load_module(PRINTF).unwrap();
        sim.launch(module, "wild", &threads(1), &[]).unwrap();
        let err = sim.synchronize(Duration::from_secs(60)).unwrap_err();
        assert!(
            matches!(&err, BackendError::Fault(m) if m.contains("printf: the %s string at 0x1234 is outside every allocation")),
            "{err}"
        );
    }
}
