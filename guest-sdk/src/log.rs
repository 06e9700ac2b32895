//! Logging into the host's log, tagged there with the plugin's name: [`write`] and the macros
//! [`trace!`](crate::trace), [`debug!`](crate::debug), [`info!`](crate::info),
//! [`warn!`](crate::warn) and [`error!`](crate::error), which take `format!` arguments.

use std::fmt;

/// How important a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Step-by-step detail, off by default.
    Trace,
    /// Detail for debugging, off by default.
    Debug,
    /// What the plugin did.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// Something the plugin could not handle.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        })
    }
}

/// Writes one line to the host's log (to stderr in native builds).
pub fn write(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::kubewasm::controller::log as wit;
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{level} {message}");
}

/// Logs at a level given at run time: `log!(Level::Info, "{} pods", n)`.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log::write($level, &::std::format!($($arg)+))
    };
}

/// Logs at trace level, with `format!` arguments.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Trace, $($arg)+) };
}

/// Logs at debug level, with `format!` arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Debug, $($arg)+) };
}

/// Logs at info level, with `format!` arguments.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Info, $($arg)+) };
}

/// Logs at warn level, with `format!` arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Warn, $($arg)+) };
}

/// Logs at error level, with `format!` arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log!($crate::log::Level::Error, $($arg)+) };
}
