//! Pure logic shared by Flotilla's controllers. Nothing here performs I/O or talks to a
//! cluster, so every function is tested with plain unit tests.

#![deny(missing_docs)]

pub mod conditions;
pub mod names;
pub mod placement;
pub mod registration;
pub mod selector;
pub mod x509;
