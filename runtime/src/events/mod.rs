//! From the shared informers to a guest: a plugin's handlers on the informers, the inbox they
//! fill, batches, and the one event loop that calls the guest for every contract version.

pub(crate) mod batch;
pub(crate) mod event_loop;
pub(crate) mod inbox;
pub(crate) mod informers;
