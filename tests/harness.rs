//! The harness pass on fixture kernels: snapshots, special-register virtualisation, errors.

mod common;

use common::{ptx_fixture, PTX_FIXTURES};

use gpuwmm::ptx::passes::harness::{harness, HarnessError, HarnessOptions, APP_LABEL};
use gpuwmm::ptx::passes::stress::{parse_sequence, StressStrategy};
use gpuwmm::ptx::{parse, print, Function, Module, Statement};

fn strategies() -> Vec<StressStrategy> {
    vec![
        StressStrategy::None,
        StressStrategy::Sys {
            sequence: parse_sequence("ld st").unwrap(),
        },
        StressStrategy::Rand,
        StressStrategy::Cache,
    ]
}

fn options(stress: StressStrategy) -> HarnessOptions {
    HarnessOptions { stress }
}

fn kernel<'m>(module: &'m Module, name: &str) -> &'m Function {
    module.kernels().find(|f| f.name == name).unwrap()
}

/// Every register named by the operands of the instructions in `statements`.
fn registers(statements: &[Statement]) -> Vec<String> {
    let mut names = Vec::new();
    for statement in statements {
        if let Statement::Instruction(i) = statement {
            for operand in &i.operands {
                let mut operand = operand.clone();
                operand.for_each_register_mut(&mut |r| names.push(r.clone()));
            }
        }
    }
    names
}

fn is_virtualised(register: &str) -> bool {
    ["%tid", "%ntid", "%ctaid", "%nctaid"]
        .iter()
        .any(|f| register == *f || register.starts_with(&format!("{f}.")))
}

#[test]
fn snapshot_small_kernel_with_sys_stress() {
    let stress = StressStrategy::Sys {
        sequence: parse_sequence("ld st").unwrap(),
    };
    let out = harness(&ptx_fixture("harness_small.ptx"), "small", &options(stress)).unwrap();
    insta::assert_snapshot!(print(&out));
}

/// Kernel `kernel` of PTX fixture `file`, harnessed without stress.
fn harness_fixture(file: &str, kernel: &str) -> Module {
    harness(&ptx_fixture(file), kernel, &HarnessOptions::default()).unwrap()
}

#[test]
fn snapshot_shapes_kernel_without_stress() {
    let out = harness_fixture("shapes.ptx", "shapes");
    insta::assert_snapshot!(print(&out));
}

#[test]
fn special_registers_are_read_only_before_the_application_label() {
    for (file, name) in PTX_FIXTURES {
        for stress in strategies() {
            let out = harness(&ptx_fixture(file), name, &options(stress.clone())).unwrap();
            let body = kernel(&out, name).body.as_ref().unwrap();
            let app = body
                .iter()
                .position(|s| *s == Statement::Label(APP_LABEL.to_string()))
                .unwrap();
            let after: Vec<_> = registers(&body[app..])
                .into_iter()
                .filter(|r| is_virtualised(r))
                .collect();
            assert!(after.is_empty(), "{file} {stress}: {after:?}");
            let before = registers(&body[..app]);
            assert!(before.contains(&"%ctaid.x".to_string()), "{file} {stress}");
        }
    }
}

#[test]
fn the_application_part_reads_real_tid_x_once_and_keeps_laneid() {
    let original = ptx_fixture("harness_small.ptx");
    let out = harness(&original, "small", &HarnessOptions::default()).unwrap();
    let regs = registers(kernel(&out, "small").body.as_ref().unwrap());
    assert_eq!(regs.iter().filter(|r| *r == "%tid.x").count(), 1);
    assert_eq!(regs.iter().filter(|r| *r == "%laneid").count(), 1);
    for special in ["%tid.y", "%tid.z", "%ntid.y", "%ctaid.y", "%nctaid.z"] {
        assert!(!regs.contains(&special.to_string()), "{special}");
    }
    for virtual_register in [
        "%gwmm_tid_y",
        "%gwmm_ctaid_z",
        "%gwmm_nctaid_z",
        "%gwmm_ntid_x",
    ] {
        assert!(
            regs.contains(&virtual_register.to_string()),
            "{virtual_register}"
        );
    }
}

#[test]
fn appends_the_control_parameter_and_flattens_reqntid() {
    let out = harness_fixture("harness_small.ptx", "small");
    let k = kernel(&out, "small");
    assert_eq!(k.params.len(), 2);
    assert_eq!(k.params[1].decl, ".param .u64 small_gpuwmm_ctrl");
    assert_eq!(k.directives, vec![".reqntid 64, 1, 1".to_string()]);
    let twice = out.function("twice").unwrap();
    assert_eq!(
        Some(twice),
        ptx_fixture("harness_small.ptx").function("twice")
    );
}

#[test]
fn maxntid_with_other_directives_on_one_line() {
    let text = ".version 8.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n.maxntid 16, 16 .minnctapersm 2\n{\n\tret;\n}\n";
    let out = harness(&parse(text).unwrap(), "k", &HarnessOptions::default()).unwrap();
    assert_eq!(
        kernel(&out, "k").directives,
        vec![".maxntid 256, 1, 1 .minnctapersm 2".to_string()]
    );
}

#[test]
fn output_parses_back_to_the_same_module() {
    for (file, name) in PTX_FIXTURES {
        let out = harness(&ptx_fixture(file), name, &options(StressStrategy::Rand)).unwrap();
        let text = print(&out);
        assert_eq!(print(&parse(&text).unwrap()), text, "{file}");
    }
}

#[test]
fn other_kernels_are_untouched() {
    let mut module = ptx_fixture("cbe_dot.ptx");
    let mut other = kernel(&module, "dot").clone();
    other.name = "other".into();
    module
        .items
        .push(gpuwmm::ptx::Item::Function(other.clone()));
    let out = harness(&module, "dot", &HarnessOptions::default()).unwrap();
    assert_eq!(kernel(&out, "other"), &other);
}

const WITH_FUNC: &str = "\
.version 8.8
.target sm_70
.address_size 64
.func (.param .b32 r) where()
{
	.reg .b32 %r<2>;
	mov.u32 %r1, %tid.x;
	st.param.b32 [r], %r1;
	ret;
}
.func (.param .b32 r) outer()
{
	.reg .b32 %r<2>;
	{
	.param .b32 retval0;
	call.uni (retval0), where, ();
	ld.param.b32 %r1, [retval0];
	}
	st.param.b32 [r], %r1;
	ret;
}
.visible .entry k()
{
	.reg .b32 %r<2>;
	{
	.param .b32 retval0;
	call.uni (retval0), outer, ();
	ld.param.b32 %r1, [retval0];
	}
	ret;
}
.visible .entry plain()
{
	ret;
}
";

#[test]
fn device_function_reading_special_registers_is_an_error() {
    let module = parse(WITH_FUNC).unwrap();
    let error = harness(&module, "k", &HarnessOptions::default()).unwrap_err();
    assert_eq!(
        error,
        HarnessError::SpecialRegisterInFunction {
            kernel: "k".into(),
            function: "where".into(),
            register: "%tid.x".into(),
        }
    );
    assert!(error.to_string().contains("'where'"), "{error}");
    assert!(harness(&module, "plain", &HarnessOptions::default()).is_ok());
}

#[test]
fn errors() {
    let small = ptx_fixture("harness_small.ptx");
    let none = HarnessOptions::default();
    assert_eq!(
        harness(&small, "nope", &none).unwrap_err(),
        HarnessError::KernelNotFound("nope".into())
    );
    assert_eq!(
        harness(&small, "twice", &none).unwrap_err(),
        HarnessError::KernelNotFound("twice".into())
    );
    let once = harness(&small, "small", &none).unwrap();
    assert_eq!(
        harness(&once, "small", &none).unwrap_err(),
        HarnessError::AlreadyInstrumented("small".into())
    );
    let empty_sigma = options(StressStrategy::Sys { sequence: vec![] });
    assert!(matches!(
        harness(&small, "small", &empty_sigma),
        Err(HarnessError::Stress(_))
    ));
}

fn one_kernel(header_directive: &str, body: &str) -> Module {
    parse(&format!(
        ".version 8.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{header_directive}\n{{\n{body}\n}}\n"
    ))
    .unwrap()
}

#[test]
fn unsupported_kernels_are_errors() {
    let none = HarnessOptions::default();
    let reserved = one_kernel("", ".reg .b32 %gwmm_x;\nmov.u32 %gwmm_x, 1;\nret;");
    assert!(
        matches!(harness(&reserved, "k", &none), Err(HarnessError::ReservedName { name, .. }) if name == "%gwmm_x")
    );
    let label = one_kernel("", "$gwmm_app:\nret;");
    assert!(matches!(
        harness(&label, "k", &none),
        Err(HarnessError::ReservedName { .. })
    ));
    let vector = one_kernel(
        "",
        ".reg .b32 %r<5>;\nmov.v4.u32 {%r1, %r2, %r3, %r4}, %tid;\nret;",
    );
    let error = harness(&vector, "k", &none).unwrap_err();
    assert!(error.to_string().contains("%tid"), "{error}");
    let cluster = one_kernel(".reqnctapercluster 2, 1, 1", "ret;");
    assert!(matches!(
        harness(&cluster, "k", &none),
        Err(HarnessError::Unsupported { .. })
    ));
    let bad = one_kernel(".maxntid 16, x", "ret;");
    assert!(matches!(
        harness(&bad, "k", &none),
        Err(HarnessError::Unsupported { .. })
    ));
}

#[test]
fn operands_of_every_shape_are_rewritten() {
    let module = one_kernel(
        "",
        ".reg .b32 %r<5>;\n.reg .pred %p<2>;\n@%p1 add.u32 %r1, %ctaid.y, %tid.z;\nmov.b32 {%r2, %r3}, {%ntid.y, %nctaid.x};\nret;",
    );
    let out = harness(&module, "k", &HarnessOptions::default()).unwrap();
    let text = print(&out);
    assert!(
        text.contains("@%p1 add.u32 \t%r1, %gwmm_ctaid_y, %gwmm_tid_z;"),
        "{text}"
    );
    assert!(text.contains("{%gwmm_ntid_y, %gwmm_nctaid_x}"), "{text}");
}
