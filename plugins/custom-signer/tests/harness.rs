//! Native tests of the custom-signer approval policy through the SDK harness. (The same plugin
//! runs through the real host in `host/wasm/tests/examples.rs`.)

use custom_signer::{CustomSigner, OPT_IN_LABEL, SIGNER, custom_subject};
use flotilla_addon_sdk::csr::expand_subject;
use flotilla_addon_sdk::testing::{Harness, csr_for};
use flotilla_addon_sdk::{AddOn, Cluster, Csr, CsrDecision, Registration};

fn inputs() -> (Cluster, AddOn) {
    (
        Cluster::new("cluster1").label(OPT_IN_LABEL, "true"),
        AddOn::new("custom-signer", "open-cluster-management-agent-addon"),
    )
}

fn custom_csr(cluster: &Cluster, addon: &AddOn) -> Csr {
    let subject = expand_subject(&custom_subject(), &cluster.name, &addon.name);
    Csr {
        signer_name: SIGNER.into(),
        common_name: subject.user,
        organizations: subject.groups,
        organizational_units: subject.organization_units,
        dns_names: Vec::new(),
        usages: vec!["digital signature".into(), "client auth".into()],
        ..csr_for(cluster, addon)
    }
}

fn denied(decision: CsrDecision, words: &str) {
    match decision {
        CsrDecision::Deny(reason) => assert!(reason.contains(words), "{reason}"),
        CsrDecision::Approve => panic!("approved; expected a denial mentioning {words:?}"),
    }
}

#[test]
fn describe_registers_a_kube_client_and_the_custom_signer() {
    let options = Harness::<CustomSigner>::new().describe();
    assert!(matches!(&options.registrations[1],
        Registration::CustomSigner { signer_name, .. } if signer_name == SIGNER));
}

#[test]
fn an_opted_in_clusters_agent_gets_its_custom_certificate() {
    let (cluster, addon) = inputs();
    let h = Harness::<CustomSigner>::new();
    assert_eq!(
        h.approve_csr(&cluster, &addon, &custom_csr(&cluster, &addon)),
        CsrDecision::Approve
    );
    // The kube-client registration follows OCM's default rules.
    assert_eq!(
        h.approve_csr(&cluster, &addon, &csr_for(&cluster, &addon)),
        CsrDecision::Approve
    );
}

#[test]
fn the_policy_denies_everything_else_with_a_reason() {
    let (cluster, addon) = inputs();
    let h = Harness::<CustomSigner>::new();
    let csr = custom_csr(&cluster, &addon);

    denied(h.approve_csr(&Cluster::new("cluster1"), &addon, &csr), "opted in");
    denied(
        h.approve_csr(&cluster, &addon, &custom_csr(&Cluster::new("cluster2"), &addon)),
        "registration agent",
    );
    let mut extra_group = csr.clone();
    extra_group.organizations.push("system:masters".into());
    denied(h.approve_csr(&cluster, &addon, &extra_group), "organizations");
    let mut dns = csr.clone();
    dns.dns_names = vec!["evil.example.com".into()];
    denied(h.approve_csr(&cluster, &addon, &dns), "DNS");
    let mut agent_san = csr.clone();
    agent_san.dns_names = vec!["custom-signer.addon.open-cluster-management.io".into()];
    assert_eq!(
        h.approve_csr(&cluster, &addon, &agent_san),
        CsrDecision::Approve,
        "the DNS name OCM's registration agent puts in every add-on CSR"
    );
    let mut server = csr.clone();
    server.usages.push("server auth".into());
    denied(h.approve_csr(&cluster, &addon, &server), "server auth");
    let mut other = csr;
    other.signer_name = "example.com/other".into();
    denied(h.approve_csr(&cluster, &addon, &other), "registers no signer");
}
