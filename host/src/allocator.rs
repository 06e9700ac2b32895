//! The memory allocator of each build, and handing the memory a compile freed back to the
//! system.
//!
//! Compiling a component allocates hundreds of MiB for a few seconds; a long-running host must
//! not keep that as resident memory after the compile. glibc (the development and test builds)
//! keeps freed memory in its arenas until `malloc_trim` is called. musl's allocator (the static
//! image) cannot be told to return it, so the musl build uses mimalloc, which returns freed
//! pages to the system on its own and on `mi_collect`, with blocks of 1 MiB and more mapped on
//! their own ([`LargeMapped`]).

use std::alloc::{GlobalAlloc, Layout};

/// mimalloc in the static (musl) build: musl's own allocator never hands freed memory back,
/// which left the image's host at its compile peak for good (BENCHMARKS.md, "Compile memory").
/// Blocks of [`MAPPED_FROM`] and more are mapped on their own ([`LargeMapped`]).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: LargeMapped<mimalloc::MiMalloc> = LargeMapped(mimalloc::MiMalloc);

/// From this size on, [`LargeMapped`] maps a block from the system on its own.
pub const MAPPED_FROM: usize = 1024 * 1024;

/// The page size every Linux target of the host has at least; blocks aligned to more than
/// this go to the inner allocator.
const PAGE: usize = 4096;

/// An allocator that maps blocks of [`MAPPED_FROM`] bytes and more from the system one by
/// one, and leaves the rest to `A`: what glibc does from 128 KiB on.
///
/// A compile grows a few buffers to tens of MiB by doubling (the object's code section, the
/// serialized artefact's pieces). mimalloc grows a large block by allocating the new size,
/// copying and freeing the old, so each doubling holds both at once; a mapped block grows with
/// `mremap`, which moves page tables, not bytes, and never holds two copies. A freed mapped
/// block goes back to the system at once.
pub struct LargeMapped<A>(pub A);

fn is_mapped(layout: Layout) -> bool {
    layout.size() >= MAPPED_FROM && layout.align() <= PAGE
}

/// An anonymous private mapping of `size` bytes (zeroed), or null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: a new anonymous mapping at an address of the kernel's choosing touches no
    // existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every block is either `A`'s or a mapping of its own, decided by its layout alone
// (`is_mapped`), which the caller passes unchanged to `dealloc` and `realloc`; mappings are
// page-aligned, so every alignment up to `PAGE` holds.
unsafe impl<A: GlobalAlloc> GlobalAlloc for LargeMapped<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout) {
            map(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.0.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_mapped(layout) {
            // Anonymous mappings are zeroed.
            map(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.0.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_mapped(layout) {
            // SAFETY: `ptr` is a mapping of `layout.size()` bytes made by `map` or `mremap`.
            unsafe {
                libc::munmap(ptr.cast(), layout.size());
            }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.0.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to `layout.align()`, does not
        // overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_mapped(layout), is_mapped(new_layout)) {
            (false, false) => {
                // SAFETY: the caller's contract, passed on.
                unsafe { self.0.realloc(ptr, layout, new_size) }
            }
            (true, true) => {
                // SAFETY: `ptr` is a mapping of `layout.size()` bytes of ours; MREMAP_MAYMOVE
                // lets the kernel move it, and the old address is not used after.
                let p = unsafe {
                    libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE)
                };
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                // SAFETY: `new_layout` is valid (above) and not zero-sized (one of the two
                // sizes is at least MAPPED_FROM and the other is the caller's non-zero size).
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    // SAFETY: both blocks are live, distinct, and at least this long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

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
/// environment variables `MIMALLOC_PURGE_DELAY=0 MIMALLOC_ARENA_EAGER_COMMIT=0`).
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

#[cfg(test)]
mod tests {
    use std::alloc::System;

    use super::*;

    /// Grows a block from small to mapped to larger, shrinks it back, and checks the bytes
    /// survive each step.
    #[test]
    fn a_block_keeps_its_bytes_across_the_mapped_threshold() {
        let a = LargeMapped(System);
        let small = Layout::from_size_align(1000, 8).unwrap();
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..1000 {
                *p.add(i) = (i % 251) as u8;
            }
            let big = MAPPED_FROM * 3;
            let p = a.realloc(p, small, big);
            assert!(!p.is_null());
            assert_eq!(p as usize % PAGE, 0, "a mapped block is page-aligned");
            *p.add(big - 1) = 7;
            let bigger = MAPPED_FROM * 40;
            let big_layout = Layout::from_size_align(big, 8).unwrap();
            let p = a.realloc(p, big_layout, bigger);
            assert!(!p.is_null());
            assert_eq!(*p.add(big - 1), 7);
            let bigger_layout = Layout::from_size_align(bigger, 8).unwrap();
            let p = a.realloc(p, bigger_layout, 500);
            assert!(!p.is_null());
            for i in 0..500 {
                assert_eq!(*p.add(i), (i % 251) as u8, "byte {i}");
            }
            a.dealloc(p, Layout::from_size_align(500, 8).unwrap());
        }
    }

    #[test]
    fn a_mapped_block_is_zeroed_and_over_aligned_blocks_stay_with_the_inner_allocator() {
        let a = LargeMapped(System);
        let layout = Layout::from_size_align(MAPPED_FROM, 8).unwrap();
        let over = Layout::from_size_align(MAPPED_FROM, 2 * PAGE).unwrap();
        assert!(is_mapped(layout));
        assert!(!is_mapped(over));
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null());
            assert!((0..MAPPED_FROM).step_by(4096).all(|i| *p.add(i) == 0));
            a.dealloc(p, layout);
            let q = a.alloc(over);
            assert_eq!(q as usize % (2 * PAGE), 0);
            a.dealloc(q, over);
        }
    }
}
