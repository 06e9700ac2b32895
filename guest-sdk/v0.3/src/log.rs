//! Log lines in the host's log, under the plugin's name: `info!("denied {name}")` and its
//! siblings, formatted as `format!` does. The host limits how much a plugin may log.

pub use crate::bindings::kubewasm::controller0_2_0::log::Level;

/// Logs `message` at `level`.
pub fn log(level: Level, message: &str) {
    crate::bindings::kubewasm::controller0_2_0::log::log(level, message);
}

/// Logs at trace level, formatted as `format!`.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Trace, &::std::format!($($arg)*)) };
}

/// Logs at debug level, formatted as `format!`.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($arg)*)) };
}

/// Logs at info level, formatted as `format!`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($arg)*)) };
}

/// Logs at warn level, formatted as `format!`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($arg)*)) };
}

/// Logs at error level, formatted as `format!`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($arg)*)) };
}
