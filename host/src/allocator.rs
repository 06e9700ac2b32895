//! The memory allocator of each build, and handing the memory a compile freed back to the
//! system.
//!
//! Compiling a component allocates hundreds of MiB for a few seconds; a long-running host must
//! not keep that as resident memory after the compile. glibc (the development and test builds)
//! keeps freed memory in its arenas until `malloc_trim` is called. musl's allocator (the static
//! image) cannot be told to return it, so the musl build uses mimalloc, which returns freed
//! pages to the system on its own and on `mi_collect`.

/// mimalloc in the static (musl) build: musl's own allocator never hands freed memory back,
/// which left the image's host at its compile peak for good (BENCHMARKS.md, "Compile memory").
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sets the allocator up to hand memory back (once per process; [`install`] calls it).
///
/// glibc: a fixed trim threshold of 128 KiB. By default glibc raises its trim threshold up to
/// 64 MiB after large blocks are freed, and each thread's arena then keeps that much free
/// memory at its top, which `malloc_trim` does not return: the compile threads' arenas held
/// 70 MiB after a compile of the Rust sample-controller; with the fixed threshold, 3 MiB (and
/// the compile's peak fell from 159 to 121 MiB; BENCHMARKS.md, "Compile memory").
///
/// mimalloc (musl) needs nothing here: its options must be in place before its first
/// allocation, which comes before `main`: musl's start code sets them (`MIMALLOC_DEFAULTS`).
pub fn limit_retained_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes the allocator's parameters; it is called before the
        // compile threads start.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        }
    });
}

/// mimalloc's defaults for a host, set by musl's start code before anything allocates.
///
/// Freed memory is purged at once instead of after 10 ms, and arenas are committed as they
/// are used instead of whole: with mimalloc's defaults a compile peaked 20-50 MiB higher and
/// kept more (BENCHMARKS.md, "The musl build after this stop's changes"). mimalloc reads its
/// options once, at its first allocation or its own constructor, whichever comes first; Rust's
/// runtime allocates before `main`, so set from `main` they miss the first arena. This entry of
/// `.init_array` has priority 100, which musl's start code runs before mimalloc's constructor
/// (priority 101 or none) and before every constructor that could allocate. It changes the
/// defaults only: `MIMALLOC_PURGE_DELAY` or `MIMALLOC_ARENA_EAGER_COMMIT` in the environment
/// still win.
#[cfg(target_env = "musl")]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static MIMALLOC_DEFAULTS: extern "C" fn() = set_mimalloc_defaults;

/// The numbers of the options the host sets, in the header libmimalloc-sys compiles
/// (`build.rs`).
#[cfg(target_env = "musl")]
mod mimalloc_option {
    include!(concat!(env!("OUT_DIR"), "/mimalloc_options.rs"));
}

#[cfg(target_env = "musl")]
extern "C" fn set_mimalloc_defaults() {
    use mimalloc_option::{MI_OPTION_ARENA_EAGER_COMMIT, MI_OPTION_PURGE_DELAY};
    // SAFETY: mi_option_set_default only writes mimalloc's static table of options (no
    // allocation, no initialisation needed); nothing else runs this early.
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, 0);
        libmimalloc_sys::mi_option_set_default(MI_OPTION_ARENA_EAGER_COMMIT, 0);
    }
}

/// Hands the memory freed since the last call back to the system, as far as the allocator
/// can: called after each compile.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own; it takes no
    // pointers and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_env = "musl")]
    {
        // mimalloc collects only the calling thread's pages: those of wasmtime's parallel
        // compile threads (rayon's global pool), where most of a compile was allocated, stay
        // theirs until each thread collects its own. (After a serial compile, the first
        // broadcast starts the pool's threads: idle, a few KiB each.)
        mimalloc_collect();
        rayon::broadcast(|_| mimalloc_collect());
    }
}

/// mimalloc's collection of the calling thread's free pages, purged at once.
#[cfg(target_env = "musl")]
fn mimalloc_collect() {
    // SAFETY: mi_collect only frees the allocator's own unused memory; it takes no pointers
    // and is thread-safe.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Sets the allocator up ([`limit_retained_memory`]) and hands the plugin runtime
/// [`return_freed_memory`] to call after each compile: once, at the start of the process.
pub fn install() {
    limit_retained_memory();
    kubewasm_runtime::set_memory_release(return_freed_memory);
}

/// The build script's reader of mimalloc's option numbers.
#[cfg(test)]
#[path = "../build/mimalloc_options.rs"]
mod mimalloc_options;

#[cfg(test)]
mod tests {
    use super::mimalloc_options::{number, parse};

    /// The shape of v3's `mimalloc.h`: comments with commas, a member written after another
    /// on one line, and legacy aliases after `_mi_option_last`.
    const HEADER: &str = "
typedef enum mi_option_e {
  // stable options
  mi_option_show_errors,                // print error messages, once
  mi_option_show_stats,
  mi_option_deprecated_eager_commit,
  mi_option_arena_eager_commit, mi_option_purge_decommits, // two on a line
  mi_option_purge_delay,                // delay (=10), in ms
  _mi_option_last,
  mi_option_reset_delay = mi_option_purge_delay
} mi_option_t;
";

    #[test]
    fn options_are_numbered_by_position_up_to_the_last() {
        let options = parse(HEADER).unwrap();
        assert_eq!(number(&options, "mi_option_arena_eager_commit"), Ok(3));
        assert_eq!(number(&options, "mi_option_purge_delay"), Ok(5));
        assert!(number(&options, "mi_option_reset_delay").is_err());
        assert_eq!(options.len(), 6);
    }

    #[test]
    fn a_member_with_a_value_or_a_missing_end_is_refused() {
        let valued = HEADER.replace("mi_option_show_stats,", "mi_option_show_stats = 4,");
        assert!(
            parse(&valued)
                .unwrap_err()
                .contains("mi_option_show_stats = 4")
        );
        let unended = HEADER.replace("_mi_option_last,", "");
        assert!(parse(&unended).is_err());
        assert!(parse("typedef enum other { a, b } other;").is_err());
    }

    /// The static build starts with its defaults set (unless the environment sets them).
    #[cfg(target_env = "musl")]
    #[test]
    fn mimalloc_starts_with_the_host_defaults() {
        use super::mimalloc_option::{MI_OPTION_ARENA_EAGER_COMMIT, MI_OPTION_PURGE_DELAY};
        for (option, variable) in [
            (MI_OPTION_PURGE_DELAY, "MIMALLOC_PURGE_DELAY"),
            (MI_OPTION_ARENA_EAGER_COMMIT, "MIMALLOC_ARENA_EAGER_COMMIT"),
        ] {
            if std::env::var_os(variable).is_none() {
                // SAFETY: reads mimalloc's option table.
                assert_eq!(
                    unsafe { libmimalloc_sys::mi_option_get(option) },
                    0,
                    "{variable}"
                );
            }
        }
    }
}
