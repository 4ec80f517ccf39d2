//! Auto-approval of a cluster agent's certificate renewal, as OCM's CSR renewal approver
//! decides it. The hub approves a CertificateSigningRequest only when all of these hold:
//!
//! ```text
//!  label open-cluster-management.io/cluster-name=<c>      names the cluster
//!  signer kubernetes.io/kube-apiserver-client             a client certificate for this apiserver
//!  O = {system:open-cluster-management:<c>}               the per-cluster group, and optionally
//!      (+ system:open-cluster-management:managed-clusters) the common group, nothing else
//!  CN = system:open-cluster-management:<c>:<agent>        an agent of that cluster
//!  usages ⊆ {digital signature, key encipherment, client auth}, client auth included
//!  spec.username == CN                                    the agent renews its own identity
//!  cluster <c> exists and is accepted
//!  SubjectAccessReview(requester) renew register.open-cluster-management.io
//!      managedclusters/clientcertificates <c>             checked by the controller (I/O)
//! ```
//!
//! First-time (bootstrap) requests come from a bootstrap identity, so `spec.username` differs
//! from the CN and they are left to the admin (`flotilla accept`). Anything else stays pending.
//!
//! `flotilla accept` decides on those first-time requests with [`check_bootstrap`]: the same
//! signer, subject and usage rules, without the requester and standing rules (the requester
//! is a bootstrap identity, and accepting the cluster is what the admin is doing). Whoever
//! holds the shared bootstrap token can file a request under any cluster's label, so the
//! subject must still be that cluster's own agent: otherwise accepting one cluster would hand
//! out another cluster's identity.

use std::fmt;

use crate::x509;

pub use flotilla_api::addon::consts::KUBE_APISERVER_CLIENT_SIGNER;
/// Key usages a cluster client certificate may ask for.
pub const ALLOWED_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
/// The usage a client certificate needs.
pub const CLIENT_AUTH_USAGE: &str = "client auth";

/// The cluster a request names, as the hub sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterStanding {
    /// No ManagedCluster of that name.
    NotFound,
    /// The cluster exists but is not (or no longer) accepted, or is being deleted.
    NotAccepted,
    /// The cluster is accepted.
    Accepted,
}

/// What the hub knows about one CSR when deciding on it.
#[derive(Clone, Copy, Debug)]
pub struct RenewalRequest<'a> {
    /// `spec.signerName`.
    pub signer_name: &'a str,
    /// The value of the `open-cluster-management.io/cluster-name` label, if any.
    pub cluster_label: Option<&'a str>,
    /// `spec.request`: the PKCS#10 request, PEM.
    pub request: &'a [u8],
    /// `spec.username`: who created the CSR (set by the apiserver).
    pub username: &'a str,
    /// `spec.usages`.
    pub usages: &'a [String],
    /// The labelled cluster's standing.
    pub cluster: ClusterStanding,
}

/// What `flotilla accept` knows about one first-time CSR of the cluster it accepts.
#[derive(Clone, Copy, Debug)]
pub struct BootstrapRequest<'a> {
    /// `spec.signerName`.
    pub signer_name: &'a str,
    /// The cluster being accepted, whose label the request carries.
    pub cluster: &'a str,
    /// `spec.request`: the PKCS#10 request, PEM.
    pub request: &'a [u8],
    /// `spec.usages`.
    pub usages: &'a [String],
}

/// The groups a cluster's agent must carry; built by the caller from the shared OCM names.
#[derive(Clone, Copy, Debug)]
pub struct ExpectedGroups<'a> {
    /// `system:open-cluster-management:<cluster>`.
    pub cluster_group: &'a str,
    /// `system:open-cluster-management:managed-clusters` (optional in a request).
    pub managed_clusters_group: &'a str,
}

/// A request that passed every static check and now needs the access review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eligible {
    /// The cluster whose agent asks.
    pub cluster: String,
    /// The requested user (CN): an agent of that cluster (and, for a renewal, the requester).
    pub common_name: String,
}

/// Why a request is not auto-approved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No cluster-name label: not a cluster CSR.
    #[error("no cluster-name label")]
    NotAClusterRequest,
    /// Signed by another signer.
    #[error("signer {0:?} is not {KUBE_APISERVER_CLIENT_SIGNER}")]
    WrongSigner(String),
    /// The request cannot be decoded, or is refused because the hub cannot be sure to read
    /// its subject as Go's crypto/x509 (the signer, the apiserver) does ([`x509::Refusal`]).
    #[error("malformed certificate request: {0}")]
    MalformedRequest(String),
    /// The subject's organizations are not exactly the cluster's groups.
    #[error("organizations {found:?} are not [{expected:?}] (+ the managed-clusters group)")]
    WrongOrganizations {
        /// The organizations requested.
        found: Vec<String>,
        /// The per-cluster group expected.
        expected: String,
    },
    /// The common name is not an agent of the labelled cluster.
    #[error("common name {found:?} is not {expected_prefix}<agent>")]
    WrongCommonName {
        /// The CN requested.
        found: String,
        /// `<cluster group>:`.
        expected_prefix: String,
    },
    /// A usage outside the client usages was requested.
    #[error("usage {0:?} is not allowed for a cluster client certificate")]
    DisallowedUsage(String),
    /// `client auth` was not requested.
    #[error("usage \"client auth\" is missing")]
    MissingClientAuth,
    /// Someone other than the named agent created the request (e.g. a bootstrap identity).
    #[error("requester {requester:?} is not the requested user {common_name:?}")]
    RequesterIsNotSubject {
        /// `spec.username`.
        requester: String,
        /// The CN requested.
        common_name: String,
    },
    /// The labelled cluster does not exist.
    #[error("cluster {0:?} not found")]
    ClusterNotFound(String),
    /// The labelled cluster is not accepted.
    #[error("cluster {0:?} is not accepted")]
    ClusterNotAccepted(String),
}

impl Rejection {
    /// Whether the same CSR could pass later (its cluster may appear or be accepted); the
    /// other rejections depend only on the immutable CSR.
    pub fn may_change(&self) -> bool {
        matches!(self, Self::ClusterNotFound(_) | Self::ClusterNotAccepted(_))
    }
}

/// Runs every static check of a renewal request. `Ok` means the controller should now ask
/// the apiserver whether the requester may `renew` the cluster's client certificates.
pub fn check(request: &RenewalRequest<'_>, expected: ExpectedGroups<'_>) -> Result<Eligible, Rejection> {
    let cluster = request.cluster_label.ok_or(Rejection::NotAClusterRequest)?;
    let common_name = agent_identity(request.signer_name, request.request, request.usages, expected)?;

    if request.username != common_name {
        return Err(Rejection::RequesterIsNotSubject {
            requester: request.username.to_owned(),
            common_name,
        });
    }

    match request.cluster {
        ClusterStanding::NotFound => Err(Rejection::ClusterNotFound(cluster.to_owned())),
        ClusterStanding::NotAccepted => Err(Rejection::ClusterNotAccepted(cluster.to_owned())),
        ClusterStanding::Accepted => Ok(Eligible {
            cluster: cluster.to_owned(),
            common_name,
        }),
    }
}

/// Decides whether accepting `request.cluster` may approve this first-time request: only when
/// it asks for that cluster's own agent identity, with the renewal's signer, subject and usage
/// rules. Who filed it (a bootstrap identity) is the caller's to check.
pub fn check_bootstrap(
    request: &BootstrapRequest<'_>,
    expected: ExpectedGroups<'_>,
) -> Result<Eligible, Rejection> {
    let common_name = agent_identity(request.signer_name, request.request, request.usages, expected)?;
    Ok(Eligible {
        cluster: request.cluster.to_owned(),
        common_name,
    })
}

/// The checks every cluster client certificate passes, renewal or first request: the
/// kube-apiserver-client signer, a subject that is an agent of the expected cluster in exactly
/// its groups, and client usages. Returns the requested user (CN).
fn agent_identity(
    signer_name: &str,
    request: &[u8],
    usages: &[String],
    expected: ExpectedGroups<'_>,
) -> Result<String, Rejection> {
    if signer_name != KUBE_APISERVER_CLIENT_SIGNER {
        return Err(Rejection::WrongSigner(signer_name.to_owned()));
    }
    let info = x509::parse_request(request).map_err(|e| Rejection::MalformedRequest(e.to_string()))?;
    let subject = info.subject;

    let organizations_ok = !subject.organizations.is_empty()
        && subject.organizations.iter().any(|o| o == expected.cluster_group)
        && subject
            .organizations
            .iter()
            .all(|o| o == expected.cluster_group || o == expected.managed_clusters_group);
    if !organizations_ok {
        return Err(Rejection::WrongOrganizations {
            found: subject.organizations,
            expected: expected.cluster_group.to_owned(),
        });
    }

    let prefix = format!("{}:", expected.cluster_group);
    let agent_ok = subject
        .common_name
        .strip_prefix(&prefix)
        .is_some_and(|agent| !agent.is_empty() && !agent.contains(':'));
    if !agent_ok {
        return Err(Rejection::WrongCommonName {
            found: subject.common_name,
            expected_prefix: prefix,
        });
    }

    if let Some(bad) = usages.iter().find(|u| !ALLOWED_USAGES.contains(&u.as_str())) {
        return Err(Rejection::DisallowedUsage(bad.clone()));
    }
    if !usages.iter().any(|u| u == CLIENT_AUTH_USAGE) {
        return Err(Rejection::MissingClientAuth);
    }
    Ok(subject.common_name)
}

impl fmt::Display for Eligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of cluster {}", self.common_name, self.cluster)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const C1_GROUP: &str = "system:open-cluster-management:cluster1";
    const C2_GROUP: &str = "system:open-cluster-management:cluster2";
    const ALL: &str = "system:open-cluster-management:managed-clusters";
    const C1_AGENT: &str = "system:open-cluster-management:cluster1:agent1";
    const C2_AGENT: &str = "system:open-cluster-management:cluster2:agent1";

    fn expected() -> ExpectedGroups<'static> {
        ExpectedGroups {
            cluster_group: C1_GROUP,
            managed_clusters_group: ALL,
        }
    }

    fn pem(user: &str, groups: &[&str]) -> Vec<u8> {
        x509::client_request(user, groups, &[], &[])
            .unwrap()
            .request_pem
            .into_bytes()
    }

    fn printable(oid: &[u8], value: &str) -> Vec<u8> {
        use x509::craft::{atv, rdn, tag};
        rdn(&[atv(oid, tag::PRINTABLE, value.as_bytes())])
    }

    fn ia5(oid: &[u8], value: &str) -> Vec<u8> {
        use x509::craft::{atv, rdn, tag};
        rdn(&[atv(oid, tag::IA5, value.as_bytes())])
    }

    /// A request whose subject a reader of only UTF8String and PrintableString would take for
    /// cluster1's agent, while Go reads another group or user.
    fn smuggled(rdns: &[Vec<u8>]) -> Vec<u8> {
        x509::craft::signed_request(&x509::craft::name(rdns), &[])
            .unwrap()
            .request_pem
            .into_bytes()
    }

    fn usages(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| (*u).to_owned()).collect()
    }

    /// A fixture: a correct renewal by cluster1's agent, changed by the case.
    struct Case {
        signer: &'static str,
        label: Option<&'static str>,
        request: Vec<u8>,
        username: &'static str,
        usages: Vec<String>,
        cluster: ClusterStanding,
    }

    impl Case {
        fn renewal() -> Self {
            Self {
                signer: KUBE_APISERVER_CLIENT_SIGNER,
                label: Some("cluster1"),
                request: pem(C1_AGENT, &[C1_GROUP, ALL]),
                username: C1_AGENT,
                usages: usages(&ALLOWED_USAGES),
                cluster: ClusterStanding::Accepted,
            }
        }

        fn check(&self) -> Result<Eligible, Rejection> {
            check(
                &RenewalRequest {
                    signer_name: self.signer,
                    cluster_label: self.label,
                    request: &self.request,
                    username: self.username,
                    usages: &self.usages,
                    cluster: self.cluster,
                },
                expected(),
            )
        }
    }

    #[test]
    fn a_renewal_by_the_clusters_own_agent_is_eligible() {
        assert_eq!(
            Case::renewal().check(),
            Ok(Eligible {
                cluster: "cluster1".into(),
                common_name: C1_AGENT.into(),
            })
        );
    }

    #[test]
    fn the_common_managed_clusters_group_is_optional() {
        let case = Case {
            request: pem(C1_AGENT, &[C1_GROUP]),
            ..Case::renewal()
        };
        assert!(case.check().is_ok());
    }

    #[test]
    fn client_auth_alone_is_enough() {
        let case = Case {
            usages: usages(&["client auth"]),
            ..Case::renewal()
        };
        assert!(case.check().is_ok());
    }

    #[rstest]
    #[case::no_cluster_label(Case { label: None, ..Case::renewal() })]
    #[case::wrong_signer(Case { signer: "kubernetes.io/kubelet-serving", ..Case::renewal() })]
    #[case::custom_signer(Case { signer: "example.com/signer", ..Case::renewal() })]
    #[case::malformed_pem(Case { request: b"-----BEGIN CERTIFICATE REQUEST-----\nnope\n".to_vec(), ..Case::renewal() })]
    #[case::another_clusters_identity_under_this_label(Case {
        request: pem(C2_AGENT, &[C2_GROUP, ALL]), username: C2_AGENT, ..Case::renewal()
    })]
    #[case::another_clusters_group_with_this_cn(Case { request: pem(C1_AGENT, &[C2_GROUP]), ..Case::renewal() })]
    #[case::both_clusters_groups(Case { request: pem(C1_AGENT, &[C1_GROUP, C2_GROUP]), ..Case::renewal() })]
    #[case::extra_group(Case { request: pem(C1_AGENT, &[C1_GROUP, "system:masters"]), ..Case::renewal() })]
    #[case::only_the_common_group(Case { request: pem(C1_AGENT, &[ALL]), ..Case::renewal() })]
    #[case::no_group(Case { request: pem(C1_AGENT, &[]), ..Case::renewal() })]
    #[case::cn_of_another_cluster(Case {
        request: pem(C2_AGENT, &[C1_GROUP]), username: C2_AGENT, ..Case::renewal()
    })]
    #[case::cn_sharing_a_prefix(Case {
        request: pem("system:open-cluster-management:cluster10:agent1", &[C1_GROUP]),
        username: "system:open-cluster-management:cluster10:agent1", ..Case::renewal()
    })]
    #[case::cn_without_agent(Case {
        request: pem("system:open-cluster-management:cluster1:", &[C1_GROUP]),
        username: "system:open-cluster-management:cluster1:", ..Case::renewal()
    })]
    #[case::cn_is_the_group(Case { request: pem(C1_GROUP, &[C1_GROUP]), username: C1_GROUP, ..Case::renewal() })]
    #[case::server_auth_usage(Case { usages: usages(&["digital signature", "client auth", "server auth"]), ..Case::renewal() })]
    #[case::no_client_auth(Case { usages: usages(&["digital signature", "key encipherment"]), ..Case::renewal() })]
    #[case::bootstrap_requester(Case { username: "system:bootstrap:abcdef", ..Case::renewal() })]
    #[case::service_account_requester(Case {
        username: "system:serviceaccount:open-cluster-management:agent-registration-bootstrap", ..Case::renewal()
    })]
    #[case::other_agent_of_the_same_cluster(Case {
        username: "system:open-cluster-management:cluster1:agent2", ..Case::renewal()
    })]
    #[case::smuggled_ia5_group(Case { request: smuggled(&[
        printable(x509::craft::oid::O, C1_GROUP),
        ia5(x509::craft::oid::O, C2_GROUP),
        printable(x509::craft::oid::CN, C1_AGENT),
    ]), ..Case::renewal() })]
    #[case::smuggled_second_cn(Case { request: smuggled(&[
        printable(x509::craft::oid::O, C1_GROUP),
        printable(x509::craft::oid::CN, C1_AGENT),
        ia5(x509::craft::oid::CN, C2_AGENT),
    ]), ..Case::renewal() })]
    #[case::unaccepted_cluster(Case { cluster: ClusterStanding::NotAccepted, ..Case::renewal() })]
    #[case::unknown_cluster(Case { cluster: ClusterStanding::NotFound, ..Case::renewal() })]
    fn anything_else_is_rejected(#[case] case: Case) {
        let result = case.check();
        assert!(result.is_err(), "{result:?}");
    }

    #[test]
    fn a_smuggled_identity_is_a_malformed_request() {
        let case = Case {
            request: smuggled(&[
                printable(x509::craft::oid::O, C1_GROUP),
                ia5(x509::craft::oid::O, C2_GROUP),
                printable(x509::craft::oid::CN, C1_AGENT),
            ]),
            ..Case::renewal()
        };
        let rejection = case.check().unwrap_err();
        assert!(matches!(rejection, Rejection::MalformedRequest(_)), "{rejection}");
        assert!(rejection.to_string().contains("IA5String"), "{rejection}");
    }

    #[test]
    fn only_cluster_standing_can_change_a_rejection() {
        let unaccepted = Case {
            cluster: ClusterStanding::NotAccepted,
            ..Case::renewal()
        };
        assert!(unaccepted.check().unwrap_err().may_change());
        let bootstrap = Case {
            username: "system:bootstrap:abcdef",
            ..Case::renewal()
        };
        let rejection = bootstrap.check().unwrap_err();
        assert!(!rejection.may_change());
        assert!(matches!(rejection, Rejection::RequesterIsNotSubject { .. }));
    }

    /// A fixture: cluster1's klusterlet asking for its first certificate, changed by the case.
    struct First {
        signer: &'static str,
        request: Vec<u8>,
        usages: Vec<String>,
    }

    impl First {
        fn request() -> Self {
            Self {
                signer: KUBE_APISERVER_CLIENT_SIGNER,
                request: pem(C1_AGENT, &[C1_GROUP, ALL]),
                usages: usages(&ALLOWED_USAGES),
            }
        }

        fn check(&self) -> Result<Eligible, Rejection> {
            check_bootstrap(
                &BootstrapRequest {
                    signer_name: self.signer,
                    cluster: "cluster1",
                    request: &self.request,
                    usages: &self.usages,
                },
                expected(),
            )
        }
    }

    #[test]
    fn accepting_a_cluster_approves_a_first_request_for_its_own_agent() {
        assert_eq!(
            First::request().check(),
            Ok(Eligible {
                cluster: "cluster1".into(),
                common_name: C1_AGENT.into(),
            })
        );
        let without_common_group = First {
            request: pem(C1_AGENT, &[C1_GROUP]),
            ..First::request()
        };
        assert!(without_common_group.check().is_ok());
        let client_auth_only = First {
            usages: usages(&["client auth"]),
            ..First::request()
        };
        assert!(client_auth_only.check().is_ok());
    }

    #[rstest]
    #[case::another_clusters_identity(First { request: pem(C2_AGENT, &[C2_GROUP, ALL]), ..First::request() })]
    #[case::another_clusters_cn_in_this_group(First { request: pem(C2_AGENT, &[C1_GROUP]), ..First::request() })]
    #[case::another_clusters_group(First { request: pem(C1_AGENT, &[C2_GROUP]), ..First::request() })]
    #[case::both_clusters_groups(First { request: pem(C1_AGENT, &[C1_GROUP, C2_GROUP]), ..First::request() })]
    #[case::system_masters(First { request: pem(C1_AGENT, &[C1_GROUP, "system:masters"]), ..First::request() })]
    #[case::only_the_common_group(First { request: pem(C1_AGENT, &[ALL]), ..First::request() })]
    #[case::cn_sharing_a_prefix(First {
        request: pem("system:open-cluster-management:cluster10:agent1", &[C1_GROUP]), ..First::request()
    })]
    #[case::cn_is_the_group(First { request: pem(C1_GROUP, &[C1_GROUP]), ..First::request() })]
    #[case::an_admin_cn(First { request: pem("admin", &[C1_GROUP]), ..First::request() })]
    #[case::wrong_signer(First { signer: "kubernetes.io/kubelet-serving", ..First::request() })]
    #[case::server_auth_usage(First { usages: usages(&["client auth", "server auth"]), ..First::request() })]
    #[case::no_client_auth(First { usages: usages(&["digital signature"]), ..First::request() })]
    #[case::malformed(First { request: b"garbage".to_vec(), ..First::request() })]
    fn accepting_a_cluster_approves_no_other_first_request(#[case] case: First) {
        let result = case.check();
        assert!(result.is_err(), "{result:?}");
    }

    #[test]
    fn a_first_request_is_judged_by_the_same_rules_as_a_renewal() {
        let forged = pem(C2_AGENT, &[C2_GROUP, ALL]);
        let first = First {
            request: forged.clone(),
            ..First::request()
        }
        .check()
        .unwrap_err();
        let renewal = Case {
            request: forged,
            username: C2_AGENT,
            ..Case::renewal()
        }
        .check()
        .unwrap_err();
        assert_eq!(first, renewal);
        assert!(matches!(first, Rejection::WrongOrganizations { .. }));
    }

    #[test]
    fn a_malformed_request_is_a_rejection_not_a_panic() {
        let case = Case {
            request: b"garbage".to_vec(),
            ..Case::renewal()
        };
        assert!(matches!(case.check(), Err(Rejection::MalformedRequest(_))));
    }
}
