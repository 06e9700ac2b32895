//! The plugin's workqueue.

use std::time::Duration;

use crate::bindings::kubewasm::controller0_2_0::queue as wit_queue;
use crate::runtime::millis;
use crate::{Error, Key};

/// Queues `key` now.
pub fn add(key: &Key) -> Result<(), Error> {
    wit_queue::add(key).map_err(Error)
}

/// Queues `key` after `delay`.
pub fn add_after(key: &Key, delay: Duration) -> Result<(), Error> {
    wit_queue::add_after(key, millis(delay)).map_err(Error)
}
