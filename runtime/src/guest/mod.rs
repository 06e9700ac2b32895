//! One guest instance of any contract version: its declaration (`init`), its calls and how
//! they ended, and what it may write to the log.

pub(crate) mod calls;
pub(crate) mod declare;
pub(crate) mod escape;
pub(crate) mod instance;
pub(crate) mod log_gate;
pub(crate) mod notices;
