//! In-memory stand-ins for the C and C++ standard headers that CUDA code includes routinely.
//!
//! nvcc compiles a `.cu` file against the host's C++ library, so a header shared by host and
//! device code (`util.cuh`) freely includes `<cstdio>`, `<cstdint>`, `<cmath>`, `<climits>`.
//! NVRTC has no host library: it builds in what device code can call (`printf`, `malloc`,
//! `memcpy`, the math functions, `size_t`) but opens none of those headers, and stops at the
//! first `#include` with "cannot open source file". This file supplies each such header as an
//! NVRTC in-memory header holding only what device code can use and NVRTC lacks: the `std::`
//! names of the built-ins, the fixed-width integer types and the `<climits>` limits (as CUDA's
//! 64-bit data model has them, `long` and pointers of 8 bytes), `EXIT_SUCCESS`, `M_PI`. Host-only
//! declarations (`FILE`, `fopen`, `exit`) are left out: code that uses them must be guarded with
//! `#ifndef __CUDACC_RTC__` (or `#ifndef __CUDA_ARCH__`) and NVRTC never sees it.
//!
//! Where the CCCL headers are at hand, the integer headers forward to libcu++'s NVRTC versions
//! (so an app that also includes `<cuda/std/cstdint>` or CUB sees one set of definitions), and
//! `<type_traits>`, `<limits>` and `<utility>` are libcu++'s, visible in `namespace std`;
//! without CCCL the integer headers define the same types themselves and the three C++ headers
//! are not supplied. NVRTC finds in-memory headers before any folder, so the caller leaves out a
//! stand-in where the app has a file of that name ([`without_shadowing`]).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The math functions of `<cmath>` that NVRTC builds in, declared in `namespace std` by the
/// stand-in (each checked against NVRTC 12.9: `using ::name;` compiles).
const MATH_FUNCTIONS: &[&str] = &[
    "acos",
    "asin",
    "atan",
    "atan2",
    "cos",
    "sin",
    "tan",
    "cosh",
    "sinh",
    "tanh",
    "acosh",
    "asinh",
    "atanh",
    "exp",
    "exp2",
    "expm1",
    "frexp",
    "ilogb",
    "ldexp",
    "log",
    "log10",
    "log1p",
    "log2",
    "logb",
    "modf",
    "scalbn",
    "scalbln",
    "cbrt",
    "fabs",
    "abs",
    "hypot",
    "pow",
    "sqrt",
    "erf",
    "erfc",
    "lgamma",
    "tgamma",
    "ceil",
    "floor",
    "nearbyint",
    "rint",
    "lrint",
    "llrint",
    "round",
    "lround",
    "llround",
    "trunc",
    "fmod",
    "remainder",
    "remquo",
    "copysign",
    "nan",
    "nextafter",
    "fdim",
    "fmax",
    "fmin",
    "fma",
    "isfinite",
    "isinf",
    "isnan",
    "signbit",
    "acosf",
    "asinf",
    "atanf",
    "atan2f",
    "cosf",
    "sinf",
    "tanf",
    "coshf",
    "sinhf",
    "tanhf",
    "expf",
    "exp2f",
    "expm1f",
    "logf",
    "log10f",
    "log1pf",
    "log2f",
    "powf",
    "sqrtf",
    "cbrtf",
    "fabsf",
    "hypotf",
    "ceilf",
    "floorf",
    "roundf",
    "truncf",
    "fmodf",
    "fminf",
    "fmaxf",
    "fmaf",
    "copysignf",
    "erff",
    "erfcf",
    "lgammaf",
    "tgammaf",
    "ldexpf",
    "frexpf",
    "modff",
    "rintf",
    "lrintf",
    "llrintf",
    "lroundf",
    "llroundf",
    "nearbyintf",
    "remainderf",
    "remquof",
    "nextafterf",
    "fdimf",
    "scalbnf",
    "scalblnf",
    "ilogbf",
    "logbf",
    "nanf",
];

/// The POSIX constants glibc's `<math.h>` defines for g++ (and so for nvcc's host pass).
const MATH_CONSTANTS: &[(&str, &str)] = &[
    ("M_E", "2.7182818284590452354"),
    ("M_LOG2E", "1.4426950408889634074"),
    ("M_LOG10E", "0.43429448190325182765"),
    ("M_LN2", "0.69314718055994530942"),
    ("M_LN10", "2.30258509299404568402"),
    ("M_PI", "3.14159265358979323846"),
    ("M_PI_2", "1.57079632679489661923"),
    ("M_PI_4", "0.78539816339744830962"),
    ("M_1_PI", "0.31830988618379067154"),
    ("M_2_PI", "0.63661977236758134308"),
    ("M_2_SQRTPI", "1.12837916709551257390"),
    ("M_SQRT2", "1.41421356237309504880"),
    ("M_SQRT1_2", "0.70710678118654752440"),
];

/// The integer types of `<cstdint>`, as libcu++ defines them under NVRTC (`int64_t` is
/// `long long`: 8 bytes, as `long` also is in CUDA's LP64 data model).
const INTEGER_TYPES: &str = "\
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef signed short int16_t;
typedef unsigned short uint16_t;
typedef signed int int32_t;
typedef unsigned int uint32_t;
typedef signed long long int64_t;
typedef unsigned long long uint64_t;
typedef int8_t int_least8_t;
typedef uint8_t uint_least8_t;
typedef int16_t int_least16_t;
typedef uint16_t uint_least16_t;
typedef int32_t int_least32_t;
typedef uint32_t uint_least32_t;
typedef int64_t int_least64_t;
typedef uint64_t uint_least64_t;
typedef int8_t int_fast8_t;
typedef uint8_t uint_fast8_t;
typedef int16_t int_fast16_t;
typedef uint16_t uint_fast16_t;
typedef int32_t int_fast32_t;
typedef uint32_t uint_fast32_t;
typedef int64_t int_fast64_t;
typedef uint64_t uint_fast64_t;
typedef int64_t intptr_t;
typedef uint64_t uintptr_t;
typedef int64_t intmax_t;
typedef uint64_t uintmax_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32767 - 1)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL
#define INTPTR_MIN INT64_MIN
#define INTPTR_MAX INT64_MAX
#define UINTPTR_MAX UINT64_MAX
#define INTMAX_MIN INT64_MIN
#define INTMAX_MAX INT64_MAX
#define UINTMAX_MAX UINT64_MAX
#define SIZE_MAX UINT64_MAX
#define PTRDIFF_MIN INT64_MIN
#define PTRDIFF_MAX INT64_MAX
#define INT8_C(x) x
#define INT16_C(x) x
#define INT32_C(x) x
#define INT64_C(x) x##LL
#define UINT8_C(x) x
#define UINT16_C(x) x
#define UINT32_C(x) x##U
#define UINT64_C(x) x##ULL
#define INTMAX_C(x) x##LL
#define UINTMAX_C(x) x##ULL
";

/// The names [`INTEGER_TYPES`] declares, for `namespace std`.
const INTEGER_TYPE_NAMES: &[&str] = &[
    "int8_t",
    "uint8_t",
    "int16_t",
    "uint16_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "int_least8_t",
    "uint_least8_t",
    "int_least16_t",
    "uint_least16_t",
    "int_least32_t",
    "uint_least32_t",
    "int_least64_t",
    "uint_least64_t",
    "int_fast8_t",
    "uint_fast8_t",
    "int_fast16_t",
    "uint_fast16_t",
    "int_fast32_t",
    "uint_fast32_t",
    "int_fast64_t",
    "uint_fast64_t",
    "intptr_t",
    "uintptr_t",
    "intmax_t",
    "uintmax_t",
];

/// The limits of `<climits>` for CUDA's data model (8-bit `char`, signed as on x86-64 and
/// AArch64 Linux; 32-bit `int`; 64-bit `long` and `long long`).
const LIMITS: &str = "\
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN SCHAR_MIN
#define CHAR_MAX SCHAR_MAX
#define MB_LEN_MAX 16
#define SHRT_MIN (-32767 - 1)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
";

/// The first line of every stand-in, so that a reader of NVRTC's log knows where it came from.
const BANNER: &str =
    "// gpuwmm: NVRTC has no host C++ library; this stand-in holds what device code uses.\n\
                      #pragma once\n";

/// The texts of a C header's two spellings: `<x.h>` holds `body`; `<cx>` holds it too and
/// declares `std_names` (global names) in `namespace std`.
fn c_header(body: &str, std_names: &[&str]) -> (String, String) {
    let c = format!("{BANNER}{body}");
    let names: String = std_names
        .iter()
        .map(|n| format!("using ::{n};\n"))
        .collect();
    let cxx = format!("{c}namespace std {{\n{names}}}\n");
    (c, cxx)
}

/// The in-memory headers (include name, text) that stand in for the standard headers NVRTC
/// cannot open; `cccl` says whether the CCCL headers are on the include path (see the module
/// documentation). `<assert.h>` and `<cassert>` are among them: NVRTC builds `assert` in.
pub fn nvrtc_std_headers(cccl: bool) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    let mut both = |c_name: &str, cxx_name: &str, body: &str, std_names: &[&str]| {
        let (c, cxx) = c_header(body, std_names);
        headers.push((c_name.to_string(), c));
        headers.push((cxx_name.to_string(), cxx));
    };
    both("assert.h", "cassert", "", &[]);
    both(
        "stdio.h",
        "cstdio",
        "// printf is built in; FILE, fopen and the other host I/O are not for device code.\n",
        &["size_t", "printf"],
    );
    let stdlib = "#ifndef EXIT_SUCCESS\n#define EXIT_SUCCESS 0\n#endif\n\
                  #ifndef EXIT_FAILURE\n#define EXIT_FAILURE 1\n#endif\n";
    both(
        "stdlib.h",
        "cstdlib",
        stdlib,
        &["size_t", "abs", "labs", "llabs", "malloc", "free"],
    );
    both(
        "string.h",
        "cstring",
        "// memcpy and memset are built in.\n",
        &["size_t", "memcpy", "memset"],
    );
    both("stddef.h", "cstddef", "", &["size_t", "ptrdiff_t"]);
    let constants: String = MATH_CONSTANTS
        .iter()
        .map(|(name, value)| format!("#ifndef {name}\n#define {name} {value}\n#endif\n"))
        .collect();
    both("math.h", "cmath", &constants, MATH_FUNCTIONS);
    let (integers, limits) = if cccl {
        (
            "#include <cuda/std/cstdint>\n".to_string(),
            "#include <cuda/std/climits>\n".to_string(),
        )
    } else {
        (INTEGER_TYPES.to_string(), LIMITS.to_string())
    };
    both("stdint.h", "cstdint", &integers, INTEGER_TYPE_NAMES);
    both("limits.h", "climits", &limits, &[]);
    if cccl {
        for name in ["type_traits", "limits", "utility"] {
            let text = format!(
                "{BANNER}#include <cuda/std/{name}>\nnamespace std {{\nusing namespace ::cuda::std;\n}}\n"
            );
            headers.push((name.to_string(), text));
        }
    }
    headers
}

/// The include names [`nvrtc_std_headers`] supplies, for messages.
pub fn std_header_names(cccl: bool) -> Vec<String> {
    nvrtc_std_headers(cccl)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// `headers` less those an app's own file would be found for: NVRTC looks among its in-memory
/// headers before any folder, even before the includer's own folder for a quoted name, so a
/// stand-in named like a file in one of `folders` (the include folders, and the folders of the
/// files the source includes) would hide that file.
pub fn without_shadowing(
    headers: Vec<(String, String)>,
    folders: &[PathBuf],
) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter(|(name, _)| {
            !folders
                .iter()
                .any(|dir| dir.join(Path::new(name)).is_file())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_comes_in_its_c_and_cxx_spelling() {
        let names = std_header_names(false);
        for (c, cxx) in [
            ("assert.h", "cassert"),
            ("stdio.h", "cstdio"),
            ("stdlib.h", "cstdlib"),
            ("stdint.h", "cstdint"),
            ("math.h", "cmath"),
            ("limits.h", "climits"),
            ("string.h", "cstring"),
        ] {
            assert!(names.iter().any(|n| n == c), "{c}");
            assert!(names.iter().any(|n| n == cxx), "{cxx}");
        }
        assert!(!names.iter().any(|n| n == "type_traits"));
        let with_cccl = std_header_names(true);
        for name in ["type_traits", "limits", "utility"] {
            assert!(with_cccl.iter().any(|n| n == name), "{name}");
        }
    }

    #[test]
    fn a_file_of_the_app_named_like_a_stand_in_is_not_hidden() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stdint.h"), "// the app's own\n").unwrap();
        let kept = without_shadowing(nvrtc_std_headers(false), &[dir.path().to_path_buf()]);
        assert!(!kept.iter().any(|(n, _)| n == "stdint.h"));
        assert!(kept.iter().any(|(n, _)| n == "cstdint"));
    }

    /// The stand-ins compile under NVRTC, with and without CCCL, and give what they promise:
    /// the sizes of CUDA's data model, the limits, the `std::` names.
    #[test]
    fn standard_headers_compile_under_nvrtc_with_cuda_sizes() {
        use crate::toolchain::{cccl_compile_args, tools_for_tests, CompileOptions, Nvrtc};
        let Some(tools) = tools_for_tests() else {
            return;
        };
        let nvrtc = Nvrtc::shared(tools.require_nvrtc().unwrap()).unwrap();
        let source = STD_HEADERS_PROBE;
        let mut variants = vec![CompileOptions {
            headers: nvrtc_std_headers(false),
            ..CompileOptions::default()
        }];
        if let Some(include) = &tools.cccl_include {
            variants.push(CompileOptions {
                headers: nvrtc_std_headers(true),
                extra: cccl_compile_args(include),
                ..CompileOptions::default()
            });
            // libcu++ included beside the stand-ins: one set of definitions.
            variants.push(CompileOptions {
                headers: nvrtc_std_headers(false),
                extra: [
                    cccl_compile_args(include),
                    vec!["-DGPUWMM_PROBE_LIBCUXX".into()],
                ]
                .concat(),
                ..CompileOptions::default()
            });
        }
        if tools.cccl_include.is_some() {
            let source = format!("{source}{CXX_HEADERS_PROBE}");
            let compiled = nvrtc.compile(&source, "probe.cu", &variants[1]);
            assert!(compiled.is_ok(), "{}", compiled.err().unwrap());
        }
        for (i, options) in variants.iter().enumerate() {
            let compiled = nvrtc.compile(source, "probe.cu", options);
            let ptx = match compiled {
                Ok(compiled) => compiled.ptx,
                Err(e) => panic!("variant {i}: {e}"),
            };
            assert!(ptx.contains(".entry probe"), "variant {i}");
        }
    }

    const CXX_HEADERS_PROBE: &str = r#"
#include <type_traits>
#include <limits>
#include <utility>
static_assert(std::is_same<std::int64_t, int64_t>::value, "");
static_assert(std::numeric_limits<int>::max() == INT_MAX, "");
__device__ void swapped(int &a, int &b) { std::swap(a, b); auto p = std::make_pair(a, b); a = p.second; }
"#;

    const STD_HEADERS_PROBE: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cstddef>
#include <cmath>
#include <climits>
#include <cassert>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <limits.h>
#include <assert.h>
#ifdef GPUWMM_PROBE_LIBCUXX
#include <cuda/std/cstdint>
#include <cuda/std/climits>
#endif
static_assert(sizeof(int8_t) == 1 && sizeof(std::uint16_t) == 2, "");
static_assert(sizeof(int32_t) == 4 && sizeof(std::uint64_t) == 8, "");
static_assert(sizeof(intptr_t) == sizeof(void *) && sizeof(std::size_t) == 8, "");
static_assert(INT_MAX == 2147483647 && INT_MIN == -INT_MAX - 1, "");
static_assert(UINT_MAX == 4294967295u && LONG_MAX == 9223372036854775807L, "");
static_assert(LLONG_MAX == INT64_MAX && UINT32_MAX == UINT_MAX && CHAR_BIT == 8, "");
static_assert(INT64_C(1) << 40 == 1099511627776LL, "");
static_assert(EXIT_SUCCESS == 0, "");
extern "C" __global__ void probe(float *x, int64_t *y, char *s) {
  x[0] = std::sqrt(x[1]) + std::fabs(x[2]) + std::pow(x[3], 2.0f) + sqrtf(x[4]) + (float)M_PI;
  y[0] = std::abs(-3) + std::llabs(y[1]) + INT64_MAX;
  std::memcpy(s, s + 1, 1);
  std::printf("%d\n", (int)std::isnan(x[0]));
  assert(x != nullptr);
}
"#;
}
