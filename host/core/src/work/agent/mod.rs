//! Decisions of the work agent (ocm-reference §3), each a pure function with table-driven
//! tests:
//!
//! ```text
//!  ManifestWork spec ──order──▶ apply in kind rank ──▶ per-manifest Applied (conditions)
//!        │                                                   │
//!        │ deleteOption ──ownership──▶ ownerRef / orphan      ▼
//!        │                                     live object ──▶ Available, feedback, rules
//!        ▼                                                   │
//!  AppliedManifestWork <names> ◀── applied resources ◀──────┘──▶ work conditions (aggregate)
//! ```

pub mod conditions;
pub mod eviction;
pub mod feedback;
pub mod ignore;
pub mod names;
pub mod order;
pub mod ownership;
pub mod rules;
pub mod update;
pub mod watch;
