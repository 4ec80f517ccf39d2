//! Pure rules of the agent side of registration: what the registration agent in
//! `flotilla klusterlet` decides, kept apart from the API calls that act on it
//! (`flotilla_registration::agent`).
//!
//! ```text
//!  names ──▶ cluster / agent name, validated        csr ──▶ may we ask? what did the hub say?
//!  identity ─▶ is the stored certificate usable?    rotation ─▶ when to renew (20–25 % left)
//!  cluster ──▶ accepted? which annotations?         lease ──▶ renew period with jitter
//!  health ──▶ Available after 20 s of failures      resources / claims ─▶ status contents
//!  backoff ─▶ how long to wait after an error      join ──▶ may this agent namespace take this hub?
//!  proxy ──▶ which leg to the hub failed
//! ```
//!
//! Nothing here reads a clock or a random source: callers pass `now` and uniform random
//! numbers in, so every rule is tested with plain unit tests.

pub mod backoff;
pub mod claims;
pub mod cluster;
pub mod csr;
pub mod health;
pub mod identity;
pub mod join;
pub mod lease;
pub mod names;
pub mod proxy;
pub mod resources;
pub mod rotation;
