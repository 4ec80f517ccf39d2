//! Pure decisions of the hub's add-on manager, kept apart from the controllers that read and
//! write the objects so that each rule is tested on its own and the controllers stay thin I/O.
//!
//! ```text
//! ClusterManagementAddOn ──install (Placements)──▶ which ManagedClusterAddOns exist   install
//!     │ defaults ← placement configs ← MCA spec.configs                              configs
//!     ▼                                                                               spec_hash
//! desired configs + spec hashes ──▶ plugin manifests() ──▶ addon-<name>-deploy-<i>     works
//!                                                       └─▶ addon-<name>-pre-delete
//! works' conditions ──▶ ManifestApplied, Progressing, Configured, installProgressions  status
//! plugin revision (digest) released and applied per add-on, like a config            revision
//! plugin describe() answer checked at load                              plugin_options
//! plugin hook outputs checked after each call                           plugin_output
//! ```
//!
//! Every rule follows OCM's add-on manager and addon-framework (see
//! `shared/design/ocm-reference.md` §1 and §5), so Go add-on agents and tools see the same
//! names, labels, annotations, hashes, condition reasons and messages.

pub mod configs;
pub mod go_json;
pub mod health;
pub mod install;
pub mod permissions;
pub mod plugin_options;
pub mod plugin_output;
pub mod registration;
pub mod revision;
pub mod rollout;
pub mod spec_hash;
pub mod status;
pub mod works;
