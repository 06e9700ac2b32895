//! What a plugin is and declares, in the host's own types, and the checked names every guest
//! string crosses into before it reaches the API server, a metric or a log line.

pub mod declared;
pub mod grants;
pub mod identity;
pub mod names;
pub mod resources;
