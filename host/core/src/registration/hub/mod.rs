//! Pure rules of the hub side of registration.
