//! ManifestWork on Flotilla: the hub's work controllers ([`hub`]), beside the klusterlet's work
//! agent.

#![deny(missing_docs)]

pub mod hub;
