//! Pure rules of the agent side of registration.
