//! A PTX function's name as its C++ source spells it: NVRTC gives every kernel and device
//! function that is not `extern "C"` an Itanium-mangled name (`_Z4pipeILi4EEvP4SlotPi`), which
//! says little to the person who wrote `pipe<4>`. Reports show the demangled name, and PTX and
//! journals keep the mangled one.

/// `name` demangled (`void pipe<4>(Slot*, int*)`), or `name` itself where it is not a mangled
/// C++ name (an `extern "C"` kernel) or cannot be demangled.
pub fn source_name(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|symbol| symbol.demangle().ok())
        .unwrap_or_else(|| name.to_string())
}

/// `name` as C++ code names the function (a manifest's `kernel = ...`): demangled without
/// parameters or return type (`pipe<4>`, `checkChain`), or `name` itself where it is not a
/// mangled C++ name or cannot be demangled.
pub fn call_name(name: &str) -> String {
    let options = cpp_demangle::DemangleOptions::new()
        .no_params()
        .no_return_type();
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|symbol| symbol.demangle_with_options(&options).ok())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_kernels_show_as_the_source_spells_them_and_extern_c_ones_as_they_are() {
        assert_eq!(
            source_name("_Z4pipeILi4EEvP4SlotPi"),
            "void pipe<4>(Slot*, int*)"
        );
        assert_eq!(source_name("_Z3fooi"), "foo(int)");
        assert_eq!(source_name("handoff"), "handoff");
        assert_eq!(source_name("_Zbroken"), "_Zbroken");
    }

    #[test]
    fn call_names_have_no_parameters_or_return_type() {
        assert_eq!(call_name("_Z10checkChainPKfS0_iiPi"), "checkChain");
        assert_eq!(
            call_name("_Z9chainStepIfLi256EEvPfi"),
            "chainStep<float, 256>"
        );
        assert_eq!(call_name("handoff_check"), "handoff_check");
    }
}
