//! The hub side of registration (see the crate docs).
