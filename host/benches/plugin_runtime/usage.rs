//! Where a measurement window's CPU went: the process's user and system time, page faults and
//! context switches (`getrusage`), CPU per thread (`/proc/self/task/*/schedstat`), and
//! what the rest of the machine ran over the same window (`/proc/stat`). The per-event figure
//! is whole-process CPU; this says which threads spent it and whether the machine was busy.

use std::collections::BTreeMap;
use std::fmt;

/// Counters at one instant.
#[derive(Clone, Debug, Default)]
pub struct Usage {
    user_ns: u64,
    system_ns: u64,
    minor_faults: u64,
    major_faults: u64,
    voluntary_switches: u64,
    involuntary_switches: u64,
    /// Run time in nanoseconds by thread id, with the thread's name.
    threads: BTreeMap<u32, (String, u64)>,
    /// The machine's busy and steal time over all CPUs, in clock ticks (`/proc/stat`).
    machine_busy_ticks: u64,
    machine_steal_ticks: u64,
}

impl Usage {
    /// The process's and the machine's counters now. Fields the system does not answer read 0.
    pub fn now() -> Usage {
        // SAFETY: an all-zero `rusage` is a valid value; `getrusage` only writes it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: RUSAGE_SELF with a valid pointer to a `rusage`.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let ns = |tv: libc::timeval| {
            tv.tv_sec.unsigned_abs() * 1_000_000_000 + tv.tv_usec.unsigned_abs() * 1_000
        };
        let (machine_busy_ticks, machine_steal_ticks) = machine_ticks();
        Usage {
            user_ns: ns(ru.ru_utime),
            system_ns: ns(ru.ru_stime),
            minor_faults: ru.ru_minflt.unsigned_abs(),
            major_faults: ru.ru_majflt.unsigned_abs(),
            voluntary_switches: ru.ru_nvcsw.unsigned_abs(),
            involuntary_switches: ru.ru_nivcsw.unsigned_abs(),
            threads: threads(),
            machine_busy_ticks,
            machine_steal_ticks,
        }
    }

    /// What changed from `self` to `later`.
    pub fn until(&self, later: &Usage) -> Window {
        let mut by_thread: BTreeMap<String, u64> = BTreeMap::new();
        let mut counted = 0u64;
        for (tid, (name, ran)) in &later.threads {
            let before = self.threads.get(tid).map_or(0, |(_, r)| *r);
            let delta = ran.saturating_sub(before);
            counted += delta;
            *by_thread.entry(format!("{name}/{tid}")).or_default() += delta;
        }
        let process_ns =
            (later.user_ns + later.system_ns).saturating_sub(self.user_ns + self.system_ns);
        let ticks_ns = 1_000_000_000 / clock_ticks_per_second();
        Window {
            user_ns: later.user_ns.saturating_sub(self.user_ns),
            system_ns: later.system_ns.saturating_sub(self.system_ns),
            minor_faults: later.minor_faults.saturating_sub(self.minor_faults),
            major_faults: later.major_faults.saturating_sub(self.major_faults),
            voluntary_switches: later
                .voluntary_switches
                .saturating_sub(self.voluntary_switches),
            involuntary_switches: later
                .involuntary_switches
                .saturating_sub(self.involuntary_switches),
            by_thread,
            exited_ns: process_ns.saturating_sub(counted),
            machine_busy_ns: later
                .machine_busy_ticks
                .saturating_sub(self.machine_busy_ticks)
                * ticks_ns,
            machine_steal_ns: later
                .machine_steal_ticks
                .saturating_sub(self.machine_steal_ticks)
                * ticks_ns,
        }
    }
}

/// The change in [`Usage`] over a measurement window.
#[derive(Clone, Debug, Default)]
pub struct Window {
    pub user_ns: u64,
    pub system_ns: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Run time by thread (`name/tid`).
    pub by_thread: BTreeMap<String, u64>,
    /// Process CPU not found on a live thread: threads that ended within the window (and the
    /// difference between the two clocks' granularity).
    pub exited_ns: u64,
    /// Every CPU's busy time on the machine (this process included), at clock-tick resolution.
    pub machine_busy_ns: u64,
    pub machine_steal_ns: u64,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |ns: u64| ns as f64 / 1e6;
        write!(
            f,
            "user {:.1} ms, sys {:.1} ms, minflt {}, majflt {}, vcsw {}, ivcsw {}; threads:",
            ms(self.user_ns),
            ms(self.system_ns),
            self.minor_faults,
            self.major_faults,
            self.voluntary_switches,
            self.involuntary_switches
        )?;
        for (thread, ns) in &self.by_thread {
            if *ns >= 500_000 {
                write!(f, " {thread} {:.1}", ms(*ns))?;
            }
        }
        let own = self.user_ns + self.system_ns;
        write!(
            f,
            ", exited {:.1} ms; machine busy {:.0} ms (others {:.0}), steal {:.0} ms",
            ms(self.exited_ns),
            ms(self.machine_busy_ns),
            ms(self.machine_busy_ns.saturating_sub(own)),
            ms(self.machine_steal_ns)
        )
    }
}

/// Every live thread's name and run time (`schedstat`'s first field, nanoseconds on a CPU).
fn threads() -> BTreeMap<u32, (String, u64)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let path = task.path();
        let ran = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if let Some(ran) = ran {
            out.insert(tid, (name.trim().to_owned(), ran));
        }
    }
    out
}

/// The machine's busy (every state but idle, iowait and steal) and steal ticks over all CPUs.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let ticks: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (busy, at(7))
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: `sysconf` reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}
