//! The managed-cluster side of registration: the agent in `flotilla klusterlet`.
