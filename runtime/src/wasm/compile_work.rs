//! What compiling a component will take: its functions' sizes, read with wasmparser before any
//! compile, and the memory budget every compile of the engine goes through.

use std::path::Path;

use tokio::sync::{Semaphore, SemaphorePermit};
use wasmparser::{FunctionBody, Operator, Parser, Payload};

use crate::error::PluginError;

/// The code a component asks Cranelift to compile: every core function body of every core
/// module it holds (nested components included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileWork {
    /// Core function bodies.
    pub functions: usize,
    /// Their bytes, added up.
    pub body_bytes: usize,
    /// The largest body's bytes.
    pub largest_body: usize,
    /// The largest product, over the functions, of a function's locals and its control blocks
    /// (`block`, `loop`, `if`). Cranelift turns each local into SSA values with a block
    /// parameter wherever control flow joins, so a function with many locals and many blocks
    /// has up to this many values live across blocks, and regalloc2's backtracking allocator
    /// needs memory in proportion: the 80 KB function of the Rust sample-controller (440 locals,
    /// 1,593 blocks) alone took 530 MiB, where the 427 KB straight-line function of the Python
    /// one (no locals, no blocks) took little.
    pub largest_locals_by_blocks: u64,
}

impl CompileWork {
    /// Reads the function bodies of `bytes` (a component or a core module) without validating
    /// them; `file` names it in the error of bytes that do not parse.
    pub fn of(file: &Path, bytes: &[u8]) -> Result<CompileWork, PluginError> {
        let mut work = CompileWork::default();
        for payload in Parser::new(0).parse_all(bytes) {
            let payload = payload.map_err(|e| PluginError::Invalid {
                file: file.to_owned(),
                reason: e.to_string(),
            })?;
            if let Payload::CodeSectionEntry(body) = payload {
                let len = body.range().len();
                work.functions += 1;
                work.body_bytes += len;
                work.largest_body = work.largest_body.max(len);
                let product = locals_by_blocks(&body).map_err(|e| PluginError::Invalid {
                    file: file.to_owned(),
                    reason: e.to_string(),
                })?;
                work.largest_locals_by_blocks = work.largest_locals_by_blocks.max(product);
            }
        }
        Ok(work)
    }
}

/// From this [`CompileWork::largest_locals_by_blocks`] on, a component compiles its functions
/// one at a time instead of one per core: such a function's compile alone takes hundreds of
/// MiB (the Rust sample-controller, 700,920: 741 MiB with two at once, 536 MiB one at a time).
/// The largest product among the other examples is 194,228 (the JavaScript ones, whose peak
/// comes from their volume, not one function). regalloc2's single-pass allocator would bring
/// the sample-controller to 151 MiB, but its code for that function needs a 1.6 MiB stack frame,
/// over wasmtime's 512 KiB `max_wasm_stack` (every reconcile trapped with "call stack
/// exhausted"); with the stack raised it runs, but wasmtime calls that allocator not
/// production-ready and outside its security advisories, so it is not used (BENCHMARKS.md).
pub const SERIAL_LOCALS_BY_BLOCKS: u64 = 250_000;

/// From this many bytes of function bodies ([`CompileWork::body_bytes`]) on, a component's
/// compile is bound by its volume: wasmtime holds every function's compiled output (about
/// 4 KiB of fixed size each, plus its code and address map), the memory image of its data and,
/// per compiling thread, Cranelift's context at the size of the largest function, all until the
/// object is linked. Such a component compiles one function at a time and without the address
/// map (the Python examples, 6.3 MiB of bodies: 285 MiB with the host's defaults, 253 without
/// both). Only the Python and JavaScript examples (6.3 and 8.8 MiB) are past it; the Go ones
/// (2.9 MiB) are not.
pub const VOLUME_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How a component will be compiled, and the memory that is expected to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompilePlan {
    /// Compile one function at a time ([`SERIAL_LOCALS_BY_BLOCKS`], [`VOLUME_BODY_BYTES`]).
    pub serial: bool,
    /// Keep the map from machine code back to wasm offsets, which only traps' backtraces
    /// read (their frames' offsets; the functions' names stay). Dropped past
    /// [`VOLUME_BODY_BYTES`]: the functions there are an interpreter's (CPython,
    /// SpiderMonkey), whose wasm offsets mean nothing to the plugin's author, and the map was
    /// 10 MiB of the Python examples' peak. The code is the same either way, and wasmtime
    /// loads it into an engine that keeps the map (the setting is not part of its
    /// compatibility check).
    pub address_map: bool,
    /// The compile's expected peak, MiB: what it reserves of the [`CompileBudget`].
    pub estimate_mib: u32,
}

impl CompileWork {
    /// The plan for compiling this work with up to `threads` compiling functions in parallel.
    ///
    /// The estimate is fitted to the example plugins (BENCHMARKS.md, "Compile memory"), on
    /// the side of too much, in both builds the project ships (glibc, and the static musl image
    /// with mimalloc, which takes memory in larger steps: its compiles of components under 1 MiB
    /// peaked at 41-65 MiB where glibc's took 14-40): a fixed 36 MiB, 48 MiB per MiB of function
    /// bodies (the compiled code, its metadata and the artefact, each held at once: the Python
    /// examples' 6.3 MiB of bodies make a 46 MiB artefact and peak at about 300 MiB), and per
    /// compiling thread the largest function's transient, 800 bytes per unit of locals x blocks
    /// (regalloc2's backtracking allocator: 530 MiB for the LTO sample-controller's 700,920).
    pub fn plan(&self, threads: usize) -> CompilePlan {
        const MIB: f64 = 1024.0 * 1024.0;
        let volume = self.body_bytes >= VOLUME_BODY_BYTES;
        let serial = volume || self.largest_locals_by_blocks >= SERIAL_LOCALS_BY_BLOCKS;
        let threads = if serial { 1 } else { threads.max(1) };
        let transient = self.largest_locals_by_blocks as f64 * 800.0 / MIB;
        let estimate = 36.0 + 48.0 * self.body_bytes as f64 / MIB + threads as f64 * transient;
        CompilePlan {
            serial,
            address_map: !volume,
            estimate_mib: estimate.ceil().min(f64::from(u32::MAX)) as u32,
        }
    }
}

impl CompilePlan {
    /// Applies the plan to a compiler's configuration (the host's, [`crate::engine_config`]).
    pub fn configure(&self, config: &mut wasmtime::Config) {
        if self.serial {
            config.parallel_compilation(false);
        }
        if !self.address_map {
            config.generate_address_map(false);
        }
    }
}

/// The memory all compiles in progress share, in MiB of their [`CompilePlan::estimate_mib`]:
/// a compile waits until its estimate is free, so loads at once (a start, a deploy of several
/// plugins) cannot add up past the budget. A compile estimated at more than the whole budget
/// waits for all of it and runs alone.
pub(crate) struct CompileBudget {
    free: Semaphore,
    mib: u32,
}

impl CompileBudget {
    pub(crate) fn new(mib: u32) -> CompileBudget {
        CompileBudget {
            free: Semaphore::new(mib as usize),
            mib,
        }
    }

    /// Waits until `estimate_mib` (at most the whole budget) is free and holds it until the
    /// reservation is dropped.
    pub(crate) async fn reserve(&self, estimate_mib: u32) -> Reservation<'_> {
        let mib = estimate_mib.clamp(1, self.mib);
        // The semaphore is never closed: acquiring fails only when it is.
        Reservation(self.free.acquire_many(mib).await.ok())
    }
}

/// Memory of the [`CompileBudget`] held by one compile; returned when dropped.
pub(crate) struct Reservation<'a>(#[allow(dead_code)] Option<SemaphorePermit<'a>>);

/// A function's declared locals times its control blocks ([`CompileWork::largest_locals_by_blocks`]).
fn locals_by_blocks(body: &FunctionBody<'_>) -> wasmparser::Result<u64> {
    let mut locals = 0u64;
    for group in body.get_locals_reader()? {
        locals += u64::from(group?.0);
    }
    if locals == 0 {
        return Ok(0);
    }
    let mut blocks = 0u64;
    let mut operators = body.get_operators_reader()?;
    while !operators.eof() {
        if matches!(
            operators.read()?,
            Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. }
        ) {
            blocks += 1;
        }
    }
    Ok(locals * blocks)
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    #[test]
    fn counts_the_bodies_of_the_core_modules_inside_a_component() {
        let bytes = kubewasm_tests::guest_bytes("probe");
        let work = CompileWork::of(Path::new("probe.wasm"), &bytes).unwrap();
        assert!(work.functions > 10, "{work:?}");
        assert!(work.largest_body > 0 && work.largest_body <= work.body_bytes);
        assert!(work.body_bytes < bytes.len(), "{work:?}");
    }

    #[test]
    fn only_a_function_of_many_locals_and_blocks_compiles_one_function_at_a_time() {
        let small = CompileWork {
            functions: 300,
            body_bytes: 100_000,
            largest_body: 6_000,
            largest_locals_by_blocks: 5_000,
        };
        let huge = CompileWork {
            largest_locals_by_blocks: 700_920,
            ..small
        };
        assert!(!small.plan(2).serial);
        assert!(huge.plan(2).serial);
        assert!(huge.plan(2).estimate_mib > small.plan(2).estimate_mib);
        assert_eq!(
            huge.plan(2),
            huge.plan(1),
            "serial: the cores do not matter"
        );
        assert!(small.plan(2).estimate_mib > small.plan(1).estimate_mib);
    }

    #[test]
    fn only_a_component_of_many_function_bytes_drops_the_address_map() {
        let go = CompileWork {
            functions: 2_700,
            body_bytes: 3_046_223,
            largest_body: 29_319,
            largest_locals_by_blocks: 10_710,
        };
        let python = CompileWork {
            functions: 13_387,
            body_bytes: 6_560_318,
            largest_body: 426_843,
            largest_locals_by_blocks: 67_479,
        };
        let lto_rust = CompileWork {
            functions: 1_143,
            body_bytes: 756_667,
            largest_body: 79_748,
            largest_locals_by_blocks: 700_920,
        };
        assert!(!go.plan(2).serial && go.plan(2).address_map);
        assert!(python.plan(2).serial && !python.plan(2).address_map);
        assert!(lto_rust.plan(2).serial && lto_rust.plan(2).address_map);
        let mut config = crate::engine_config();
        python.plan(2).configure(&mut config);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let probe = kubewasm_tests::guest_bytes("probe");
        let code = engine.precompile_component(&probe).unwrap();
        let host = wasmtime::Engine::new(&crate::engine_config()).unwrap();
        // SAFETY: compiled just now by an engine of the host's configuration but for the plan.
        unsafe { wasmtime::component::Component::deserialize(&host, &code) }
            .expect("code compiled without the address map loads into the host's engine");
    }

    /// Compile peaks measured above the resident set before the compile (MiB), with the
    /// host's settings on the two-core machine of BENCHMARKS.md ("Compile memory"): the
    /// component's work, and the peak in the glibc build or the static musl build.
    const MEASURED: &[(&str, CompileWork, &str, u32)] = &[
        ("configmap-counter-c", work(38_094, 9_804), "musl", 41),
        ("configmap-propagator-c", work(46_159, 9_804), "musl", 50),
        ("custom-resource-log", work(319_844, 4_760), "musl", 52),
        (
            "custom-resource-log (LTO)",
            work(286_278, 32_742),
            "glibc",
            30,
        ),
        ("default-requests", work(157_891, 5_635), "musl", 41),
        ("pod-diff", work(145_023, 4_760), "musl", 44),
        ("ready-pods", work(145_084, 4_760), "musl", 43),
        ("unique-ingress-host", work(139_441, 5_635), "musl", 47),
        ("sample-controller", work(854_801, 4_760), "musl", 65),
        ("sample-controller", work(854_801, 4_760), "glibc", 40),
        (
            "sample-controller (LTO)",
            work(756_667, 700_920),
            "glibc",
            500,
        ),
        (
            "sample-controller (LTO)",
            work(756_667, 700_920),
            "musl",
            530,
        ),
        ("sample-controller-go", work(3_046_223, 10_710), "musl", 126),
        ("configmap-counter-go", work(3_003_764, 10_710), "musl", 125),
        ("allowed-registries", work(6_567_513, 67_479), "musl", 372),
        (
            "sample-controller-python",
            work(6_560_318, 67_479),
            "musl",
            366,
        ),
        (
            "configmap-counter-js",
            work(9_210_582, 194_228),
            "musl",
            389,
        ),
        (
            "configmap-counter-js",
            work(9_210_582, 194_228),
            "glibc",
            306,
        ),
    ];

    const fn work(body_bytes: usize, largest_locals_by_blocks: u64) -> CompileWork {
        CompileWork {
            functions: 0,
            body_bytes,
            largest_body: 0,
            largest_locals_by_blocks,
        }
    }

    #[test]
    fn no_estimate_is_under_a_measured_peak_in_either_build() {
        for (name, work, build, peak) in MEASURED {
            let estimate = work.plan(2).estimate_mib;
            assert!(
                estimate >= *peak,
                "{name}: estimated {estimate} MiB, measured {peak} MiB in the {build} build"
            );
        }
    }

    #[tokio::test]
    async fn reservations_past_the_budget_wait_until_memory_is_returned() {
        let budget = CompileBudget::new(256);
        let first = budget.reserve(200).await;
        let mut second = std::pin::pin!(budget.reserve(100));
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "200 + 100 MiB exceed a 256 MiB budget"
        );
        let small = budget.reserve(50).now_or_never();
        assert!(
            small.is_none(),
            "a later reservation does not overtake the waiting one"
        );
        drop(first);
        let _second = second.await;
        let _third = budget.reserve(100).now_or_never().expect("100 + 100 fit");
    }

    #[tokio::test]
    async fn a_compile_larger_than_the_budget_runs_alone() {
        let budget = CompileBudget::new(256);
        let whole = budget.reserve(900).await;
        assert!(budget.reserve(1).now_or_never().is_none());
        drop(whole);
        assert!(budget.reserve(256).now_or_never().is_some());
    }

    #[test]
    fn a_truncated_component_is_invalid() {
        let mut bytes = kubewasm_tests::guest_bytes("probe");
        bytes.truncate(bytes.len() / 2);
        let err = CompileWork::of(Path::new("half.wasm"), &bytes).unwrap_err();
        assert!(matches!(err, PluginError::Invalid { .. }), "{err}");
    }
}
