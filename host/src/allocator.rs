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
/// mimalloc (musl): freed memory is purged at once instead of after a second, and arenas are
/// committed as they are used: the compile of the Rust sample-controller peaked at 242 MiB
/// and kept 64 MiB with mimalloc's defaults, 125 and 33 MiB with these (measured with its
/// environment variables `MIMALLOC_PURGE_DELAY=0 MIMALLOC_ARENA_EAGER_COMMIT=0`). Set here
/// they miss the arena mimalloc committed before `main`, so the image sets the same two
/// variables in its environment as well (xtask's image config), which mimalloc reads at start.
pub fn limit_retained_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes the allocator's parameters; it is called before the
        // compile threads start.
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        }
        #[cfg(target_env = "musl")]
        // SAFETY: mi_option_set only changes the allocator's parameters.
        unsafe {
            // `mi_option_e` of the mimalloc v3 that libmimalloc-sys builds (its header,
            // `include/mimalloc.h`); the Rust crate names only the older options.
            const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
            const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        }
    });
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
    // SAFETY: mi_collect only frees the allocator's own unused memory; it takes no pointers
    // and is thread-safe.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
}

/// Sets the allocator up ([`limit_retained_memory`]) and hands the plugin runtime
/// [`return_freed_memory`] to call after each compile: once, at the start of the process.
pub fn install() {
    limit_retained_memory();
    kubewasm_runtime::set_memory_release(return_freed_memory);
}
