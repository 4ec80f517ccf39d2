//! Renewal auto-approval against a real apiserver and controller manager: a cluster agent's
//! renewal of its own identity is approved with OCM's reason and signed; requests that claim
//! another identity, use another signer, groups or usages, come from a bootstrap identity or
//! from a requester without the renew right, or name an unaccepted cluster, stay pending; so do
//! renewals whose subject the hub would read otherwise than Go's crypto/x509 (the apiserver and
//! the controller manager's signer) does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use crate::hub_support;

use std::time::Duration;

use flotilla_api::{cluster::v1::ManagedCluster, work::v1::ManifestWork};
use flotilla_core::x509::craft::{self, oid, tag};
use flotilla_registration::names;
use flotilla_testing::{kubeconfig, wait};
use hub_support::*;
use k8s_openapi::{
    ByteString,
    api::{
        certificates::v1::CertificateSigningRequest,
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, PostParams},
};
use serde_json::json;

const CP: &str = "hub-csr";
const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// A cluster CSR as the registration agent makes it.
fn csr(cluster_label: &str, request_pem: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {
            "generateName": format!("{cluster_label}-"),
            "labels": { "open-cluster-management.io/cluster-name": cluster_label },
        },
        "spec": {
            "request": ByteString(request_pem.as_bytes().to_vec()),
            "signerName": signer,
            "usages": usages,
        }
    }))
    .unwrap()
}

/// A fresh key and request for `user` in `groups`.
fn request(user: &str, groups: &[&str]) -> flotilla_core::x509::KeyAndRequest {
    flotilla_core::x509::client_request(user, groups, &[], &[]).unwrap()
}

/// Creates `csr` as `client`, retrying while the requester's RBAC is still propagating.
async fn submit(client: &Client, csr: &CertificateSigningRequest) -> String {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let created = eventually_ok("create CSR", || async {
        api.create(&PostParams::default(), csr).await
    })
    .await;
    created.name_any()
}

fn approval_reason(csr: &CertificateSigningRequest) -> Option<String> {
    csr.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Approved")
        .map(|c| c.reason.clone().unwrap_or_default())
}

async fn grant(admin: &Client, role: serde_json::Value, binding: serde_json::Value) {
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &serde_json::from_value(role).unwrap())
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &serde_json::from_value(binding).unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn only_a_clusters_own_agent_renewing_its_identity_is_approved() {
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    for (name, accepted) in [("csr-c1", true), ("csr-c2", true), ("csr-c3", false)] {
        create_cluster(&admin, &cluster(name, accepted, 60, &[])).await;
    }
    for name in ["csr-c1", "csr-c2"] {
        wait_accepted(&admin, name).await;
    }
    let c1_group = names::cluster_group("csr-c1");
    let c2_group = names::cluster_group("csr-c2");
    let c3_group = names::cluster_group("csr-c3");
    let all = names::MANAGED_CLUSTERS_GROUP;
    let c1_agent = agent_user("csr-c1");
    let c2_agent = agent_user("csr-c2");
    let agent1 = agent(cp, "csr-c1").await;

    // Identities that may create CSRs but must not get a cluster certificate: an agent name of
    // csr-c1 outside its group, csr-c3's (unaccepted) agent, and a bootstrap token user bound
    // to the hub's bootstrap role.
    grant(
        &admin,
        json!({ "metadata": { "name": "csr-test-requesters" }, "rules": [{
            "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
            "verbs": ["create", "get", "list", "watch"] }] }),
        json!({ "metadata": { "name": "csr-test-requesters" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-test-requesters" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "csr-test-requesters" }] }),
    )
    .await;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "csr-test-bootstrap" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "open-cluster-management:bootstrap" },
                "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                    "name": "system:bootstrappers:managedcluster" }] }))
            .unwrap(),
        )
        .await
        .unwrap();
    let c1_agent9 = names::agent_user("csr-c1", "agent9");
    let outsider = cp.client_for(&c1_agent9, &["csr-test-requesters"]).await.unwrap();
    let c3_agent = agent_user("csr-c3");
    let unaccepted = cp
        .client_for(&c3_agent, &[&c3_group, all, "csr-test-requesters"])
        .await
        .unwrap();
    let bootstrap = cp
        .client_for("system:bootstrap:abcdef", &[names::BOOTSTRAP_GROUP])
        .await
        .unwrap();

    let signer = names::KUBE_APISERVER_CLIENT_SIGNER;
    let mut pending = Vec::new();
    // Claims csr-c2's identity (label, CN and O of csr-c2) while being csr-c1's agent.
    let pem = request(&c2_agent, &[&c2_group, all]).request_pem;
    pending.push((
        "another cluster's identity",
        submit(&agent1, &csr("csr-c2", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // csr-c1's own identity, but under csr-c2's label.
    let pem = request(&c1_agent, &[&c1_group, all]).request_pem;
    pending.push((
        "another cluster's label",
        submit(&agent1, &csr("csr-c2", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // Another signer.
    let pem = request(&c1_agent, &[&c1_group, all]).request_pem;
    pending.push((
        "a custom signer",
        submit(
            &agent1,
            &csr("csr-c1", &pem, "example.com/custom", &CLIENT_USAGES),
        )
        .await,
    ));
    // Extra groups.
    let pem = request(&c1_agent, &[&c1_group, "cluster-admins"]).request_pem;
    pending.push((
        "an extra group",
        submit(&agent1, &csr("csr-c1", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // Both clusters' groups.
    let pem = request(&c1_agent, &[&c1_group, &c2_group]).request_pem;
    pending.push((
        "two cluster groups",
        submit(&agent1, &csr("csr-c1", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // Server usage.
    let pem = request(&c1_agent, &[&c1_group, all]).request_pem;
    let usages = [
        "digital signature",
        "key encipherment",
        "client auth",
        "server auth",
    ];
    pending.push((
        "a server usage",
        submit(&agent1, &csr("csr-c1", &pem, signer, &usages)).await,
    ));
    // A well-formed request whose requester lacks the renew right.
    let pem = request(&c1_agent9, &[&c1_group, all]).request_pem;
    pending.push((
        "a requester without renew",
        submit(&outsider, &csr("csr-c1", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // The agent of a cluster that is not accepted.
    let pem = request(&c3_agent, &[&c3_group, all]).request_pem;
    pending.push((
        "an unaccepted cluster",
        submit(&unaccepted, &csr("csr-c3", &pem, signer, &CLIENT_USAGES)).await,
    ));
    // A first-time request from a bootstrap identity: the admin's to approve.
    let pem = request(&c1_agent, &[&c1_group, all]).request_pem;
    pending.push((
        "a bootstrap requester",
        submit(&bootstrap, &csr("csr-c1", &pem, signer, &CLIENT_USAGES)).await,
    ));

    // The real renewal, submitted last: once it is approved, the hub has seen the others.
    let renewal = request(&c1_agent, &[&c1_group, all]);
    let good = submit(
        &agent1,
        &csr("csr-c1", &renewal.request_pem, signer, &CLIENT_USAGES),
    )
    .await;
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let certificate = wait::until("renewal approved and signed", TIMEOUT, || {
        let csrs = csrs.clone();
        let good = good.clone();
        async move {
            let csr = csrs.get(&good).await?;
            let issued = csr.status.as_ref().and_then(|s| s.certificate.clone());
            Ok::<_, kube::Error>(
                issued
                    .filter(|c| !c.0.is_empty())
                    .map(|c| (approval_reason(&csr), c)),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(
        certificate.0.as_deref(),
        Some("AutoApprovedByHubCSRApprovingController")
    );
    let note = wait_event(
        &admin,
        "CertificateSigningRequest",
        &good,
        "ManagedClusterCSRAutoApproved",
    )
    .await;
    assert!(note.contains("auto approved"), "{note}");
    let cert_pem = String::from_utf8(certificate.1.0).unwrap();
    let info = flotilla_core::x509::parse_certificate(cert_pem.as_bytes()).unwrap();
    assert_eq!(info.subject.common_name, c1_agent);

    // The renewed certificate works for the agent.
    let yaml = kubeconfig::render(
        cp.name(),
        cp.server(),
        cp.ca_pem(),
        &c1_agent,
        &cert_pem,
        &renewal.key_pem,
    )
    .unwrap();
    let renewed = kubeconfig::client_from_yaml(&yaml).await.unwrap();
    Api::<ManagedCluster>::all(renewed).get("csr-c1").await.unwrap();

    // Give the hub a few more seconds; none of the others may be approved.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for (what, name) in pending {
        let csr = csrs.get(&name).await.unwrap();
        assert_eq!(approval_reason(&csr), None, "CSR with {what} must stay pending");
        assert!(
            csr.status.and_then(|s| s.certificate).is_none(),
            "{what}: no certificate"
        );
    }
}

#[tokio::test]
async fn the_apiserver_refuses_a_malformed_request_before_the_hub_sees_it() {
    // The hub's own handling of an undecodable request (a warning, no panic, left pending) is
    // a unit test of flotilla_core::registration::hub::csr; this shows why it can only reach
    // the hub through a conversion or a foreign apiserver.
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    let bad = csr(
        "csr-c1",
        "-----BEGIN CERTIFICATE REQUEST-----\nbm90IGEgcmVxdWVzdA==\n-----END CERTIFICATE REQUEST-----\n",
        names::KUBE_APISERVER_CLIENT_SIGNER,
        &CLIENT_USAGES,
    );
    let result = Api::<CertificateSigningRequest>::all(admin)
        .create(&PostParams::default(), &bad)
        .await;
    assert_eq!(status_code(&result), Some(422));
}

/// The certificate a CSR was issued, once it has one.
fn issued(csr: &CertificateSigningRequest) -> Option<String> {
    let certificate = csr.status.as_ref()?.certificate.as_ref()?;
    (!certificate.0.is_empty()).then(|| String::from_utf8_lossy(&certificate.0).into_owned())
}

/// Whether `client` may list the ManifestWorks of cluster namespace `namespace`.
async fn lists_works(client: Client, namespace: &str) -> Result<usize, String> {
    Api::<ManifestWork>::namespaced(client, namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_renewal_smuggling_another_identity_past_the_subject_reader_stays_pending() {
    // Go's crypto/x509 (the controller manager's signer copies the request's subject; the
    // apiserver authenticates CN as the user, each O as a group) reads IA5String, T61String,
    // BMPString and NumericString values too, and the last CN wins. A hub reading only
    // UTF8String and PrintableString (and ignoring the rest) would see cluster s1's agent
    // renewing its own identity in both requests below, while the certificate carries s2's
    // group, or s2's agent as the user.
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    for name in ["csr-s1", "csr-s2"] {
        create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    }
    for name in ["csr-s1", "csr-s2"] {
        wait_accepted(&admin, name).await;
    }
    let s1_group = names::cluster_group("csr-s1");
    let s2_group = names::cluster_group("csr-s2");
    let all = names::MANAGED_CLUSTERS_GROUP;
    let s1_agent = agent_user("csr-s1");
    let s2_agent = agent_user("csr-s2");
    // s1's agent, acting with its real identity: spec.username is its own CN.
    let agent1 = agent(cp, "csr-s1").await;
    let signer = names::KUBE_APISERVER_CLIENT_SIGNER;
    let printable =
        |oid: &[u8], value: &str| craft::rdn(&[craft::atv(oid, tag::PRINTABLE, value.as_bytes())]);
    let ia5 = |oid: &[u8], value: &str| craft::rdn(&[craft::atv(oid, tag::IA5, value.as_bytes())]);

    // s1's agent may not read s2's ManifestWorks (eventually: the hub binds the roles).
    eventually_ok("s2's work role bound", || {
        let admin = admin.clone();
        async move {
            Api::<ManifestWork>::namespaced(admin, "csr-s2")
                .list(&ListParams::default())
                .await
        }
    })
    .await;
    assert!(
        lists_works(agent1.clone(), "csr-s2").await.is_err(),
        "s1's agent must not list s2's ManifestWorks"
    );

    let attacks = [
        (
            "an extra IA5String O naming s2's group",
            craft::name(&[
                printable(oid::O, &s1_group),
                printable(oid::O, all),
                ia5(oid::O, &s2_group),
                printable(oid::CN, &s1_agent),
            ]),
        ),
        (
            "a second, IA5String CN naming s2's agent",
            craft::name(&[
                printable(oid::O, &s1_group),
                printable(oid::O, all),
                printable(oid::CN, &s1_agent),
                ia5(oid::CN, &s2_agent),
            ]),
        ),
    ];
    let mut pending = Vec::new();
    for (what, subject) in attacks {
        let made = craft::signed_request(&subject, &[]).unwrap();
        let name = submit(&agent1, &csr("csr-s1", &made.request_pem, signer, &CLIENT_USAGES)).await;
        pending.push((what, name, made.key_pem));
    }

    // A normal renewal, submitted last: once it is approved, the hub has seen the others.
    let renewal = request(&s1_agent, &[&s1_group, all]);
    let good = submit(
        &agent1,
        &csr("csr-s1", &renewal.request_pem, signer, &CLIENT_USAGES),
    )
    .await;
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    wait::until("renewal approved and signed", TIMEOUT, || {
        let csrs = csrs.clone();
        let good = good.clone();
        async move { Ok::<_, kube::Error>(issued(&csrs.get(&good).await?)) }
    })
    .await
    .unwrap();

    // Give the hub a few more seconds; the smuggling requests must stay pending.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut approved = Vec::new();
    for (what, name, key_pem) in pending {
        let csr = csrs.get(&name).await.unwrap();
        let reason = approval_reason(&csr);
        let certificate = issued(&csr);
        if reason.is_none() && certificate.is_none() {
            continue;
        }
        // Say what the approval gave away: the identity the apiserver authenticates, and
        // whether it reaches s2's ManifestWorks.
        let reach = match &certificate {
            Some(cert_pem) => {
                let info = flotilla_core::x509::parse_certificate(cert_pem.as_bytes())
                    .map(|i| format!("{:?}", i.subject))
                    .unwrap_or_else(|e| e.to_string());
                let yaml =
                    kubeconfig::render(cp.name(), cp.server(), cp.ca_pem(), &s1_agent, cert_pem, &key_pem)
                        .unwrap();
                let client = kubeconfig::client_from_yaml(&yaml).await.unwrap();
                format!(
                    "certificate {info}; listing s2's ManifestWorks with it: {:?}",
                    lists_works(client, "csr-s2").await
                )
            }
            None => "no certificate yet".to_owned(),
        };
        approved.push(format!("CSR with {what} was approved ({reason:?}): {reach}"));
    }
    assert!(approved.is_empty(), "{}", approved.join("\n"));
}

#[tokio::test]
async fn one_clusters_csr_flood_waits_in_its_own_bucket_while_another_cluster_renews() {
    // A cluster agent may create CSRs as fast as the apiserver takes them. Without a per
    // requester bound every eligible one costs the hub an access review and an approval, and
    // the signer a certificate, in the same queue as every other cluster's renewals.
    let cp = hub(CP).await;
    let admin = cp.admin_client().await.unwrap();
    for name in ["csr-f1", "csr-f2"] {
        create_cluster(&admin, &cluster(name, true, 60, &[])).await;
    }
    for name in ["csr-f1", "csr-f2"] {
        wait_accepted(&admin, name).await;
    }
    let all = names::MANAGED_CLUSTERS_GROUP;
    let (f1_agent, f1_group) = (agent_user("csr-f1"), names::cluster_group("csr-f1"));
    let (f2_agent, f2_group) = (agent_user("csr-f2"), names::cluster_group("csr-f2"));
    let flooder = agent(cp, "csr-f1").await;
    let other = agent(cp, "csr-f2").await;
    let signer = names::KUBE_APISERVER_CLIENT_SIGNER;

    let started = std::time::Instant::now();
    let flood_size = 4 * flotilla_registration::hub::RENEWAL_BURST as usize;
    let mut flood = Vec::new();
    for _ in 0..flood_size {
        // Each one a renewal the hub would approve on its own, with 64 KiB of annotations.
        let mut renewal = csr(
            "csr-f1",
            &request(&f1_agent, &[&f1_group, all]).request_pem,
            signer,
            &CLIENT_USAGES,
        );
        renewal
            .annotations_mut()
            .insert("flood".into(), "x".repeat(64 * 1024));
        flood.push(submit(&flooder, &renewal).await);
    }
    let good = submit(
        &other,
        &csr(
            "csr-f2",
            &request(&f2_agent, &[&f2_group, all]).request_pem,
            signer,
            &CLIENT_USAGES,
        ),
    )
    .await;
    let csrs: Api<CertificateSigningRequest> = Api::all(admin.clone());
    wait::until("the other cluster's renewal approved", TIMEOUT, || {
        let csrs = csrs.clone();
        let good = good.clone();
        async move { Ok::<_, kube::Error>(approval_reason(&csrs.get(&good).await?).map(|_| ())) }
    })
    .await
    .unwrap();

    // Give the hub a moment more, then count: the flood got its burst and a token per refill
    // since it began, no more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let elapsed = started.elapsed();
    let mut approved = 0;
    for name in &flood {
        if approval_reason(&csrs.get(name).await.unwrap()).is_some() {
            approved += 1;
        }
    }
    let refills = (elapsed.as_secs_f64() / flotilla_registration::hub::RENEWAL_REFILL.as_secs_f64()).ceil();
    let allowed = flotilla_registration::hub::RENEWAL_BURST as usize + refills as usize;
    assert!(
        approved >= flotilla_registration::hub::RENEWAL_BURST as usize,
        "the flooding cluster still gets its burst: {approved} approved"
    );
    assert!(
        approved <= allowed,
        "{approved} of {flood_size} flood CSRs approved in {elapsed:?}; at most {allowed} allowed"
    );
}
