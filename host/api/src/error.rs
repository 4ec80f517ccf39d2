//! Errors of CRD generation, named by the operation that failed.

/// Why the CRDs could not be generated. Every variant is a bug in this crate's types (the tests
/// generate every CRD), never a runtime condition.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The generated schema of a kind is not a valid `JSONSchemaProps`.
    #[error("schema of {kind} is not a valid JSONSchemaProps")]
    Schema {
        /// `group/version/Kind` of the offending version.
        kind: String,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },

    /// The versions of a multi-version kind could not be merged into one CRD.
    #[error("merging the versions of {kind}")]
    Merge {
        /// The kind.
        kind: String,
        /// kube's merge error.
        #[source]
        source: kube::core::crd::MergeError,
    },

    /// A CRD could not be written as YAML.
    #[error("rendering CRD {name} as YAML")]
    Render {
        /// Name of the CRD.
        name: String,
        /// The YAML error.
        #[source]
        source: serde_yaml::Error,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
