//! A server process the harness owns: its own process group, killed with it on drop and killed by
//! the kernel if the test process dies first.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// A running child process, alone in its process group, with its output in a log file.
///
/// Dropping it kills the whole group (SIGKILL) and reaps it. If the test process itself dies
/// without unwinding (aborted, killed by a test runner's timeout), the kernel kills the child
/// (`PR_SET_PDEATHSIG`), so no server outlives the tests that started it.
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, stdout and stderr appended to `log`.
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: Vec<String>,
        log: PathBuf,
    ) -> io::Result<Process> {
        let out = File::options().create(true).append(true).open(&log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and the closure touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = spawn_from_lasting_thread(command)?;
        Ok(Process { name, child, log })
    }

    /// The process's id, also its process group's.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` when the process has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown state: {e}")),
        }
    }

    /// The last lines the process wrote, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(20);
        format!(
            "last lines of {} ({}):\n{}",
            self.name,
            self.log.display(),
            lines[from..].join("\n")
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let Ok(group) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: plain syscall; the group is the child's own (process_group(0)) and the child
        // is not reaped yet, so the id cannot have been reused.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends, not the process. Test
/// threads end with their test while the servers they started may be shared, so every child is
/// forked by one thread that lives as long as the process.
fn spawn_from_lasting_thread(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("envtest-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("starting the envtest spawner thread");
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply))
        .map_err(|_| io::Error::other("the envtest spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the envtest spawner thread did not answer"))?
}
