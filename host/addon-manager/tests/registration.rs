//! Add-on registration on a real hub: `status.registrations`/`status.namespace` and hub
//! permissions from the plugin, add-on CSRs approved only through the host's checks and the
//! plugin's `approve-csr` (forged ones never, each with its reason in an Event), and
//! custom-signer certificates signed with the CA the AddOnPlugin names.
//!
//! CSRs are created with client certificates of the identities they claim (a cluster's
//! registration agent, a bootstrap token user), so `spec.username` is what the apiserver says.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests fail loudly")]

mod support;

use std::collections::BTreeMap;

use flotilla_api::addon::v1alpha1::ManagedClusterAddOn;
use flotilla_testing::wait;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use k8s_openapi::api::core::v1::{Event, Secret};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::{TIMEOUT, client, hub};

const KUBE_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
const CUSTOM_SIGNER: &str = "example.com/custom-signer";

/// Lets every authenticated identity create and read CSRs (the registration hub grants cluster
/// agents and bootstrap users this; here the test stands in for it).
async fn allow_csr_creation(client: &Client) {
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "test-csr-creator"},
               "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                          "verbs": ["create", "get", "list", "watch"]}]}),
    )
    .await;
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "test-csr-creator"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test-csr-creator"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]}),
    )
    .await;
}

/// A client with cluster `cluster`'s registration agent identity.
async fn agent(cluster: &str) -> Client {
    let group = format!("system:open-cluster-management:{cluster}");
    hub()
        .await
        .client_for(
            &format!("{group}:agent1"),
            &[&group, "system:open-cluster-management:managed-clusters"],
        )
        .await
        .expect("agent client")
}

/// What a CSR asks for.
struct Ask<'a> {
    cluster_label: &'a str,
    addon: &'a str,
    signer: &'a str,
    cn: String,
    orgs: Vec<String>,
    units: Vec<String>,
    dns: Vec<String>,
}

/// Creates the CSR with `requester`; returns its name.
async fn request(requester: &Client, ask: &Ask<'_>) -> String {
    let orgs: Vec<&str> = ask.orgs.iter().map(String::as_str).collect();
    let units: Vec<&str> = ask.units.iter().map(String::as_str).collect();
    let dns: Vec<&str> = ask.dns.iter().map(String::as_str).collect();
    let made = flotilla_core::x509::client_request(&ask.cn, &orgs, &units, &dns).expect("request");
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(format!("addon-{}-{}-", ask.cluster_label, ask.addon)),
            labels: Some(BTreeMap::from([
                (
                    "open-cluster-management.io/cluster-name".to_owned(),
                    ask.cluster_label.to_owned(),
                ),
                (
                    "open-cluster-management.io/addon-name".to_owned(),
                    ask.addon.to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(made.request_pem.into_bytes()),
            signer_name: ask.signer.to_owned(),
            usages: Some(vec![
                "digital signature".into(),
                "key encipherment".into(),
                "client auth".into(),
            ]),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    Api::<CertificateSigningRequest>::all(requester.clone())
        .create(&PostParams::default(), &csr)
        .await
        .expect("create CSR")
        .name_any()
}

fn default_ask<'a>(cluster: &'a str, addon: &'a str) -> Ask<'a> {
    let group = format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}");
    Ask {
        cluster_label: cluster,
        addon,
        signer: KUBE_SIGNER,
        cn: format!("{group}:agent:{addon}"),
        orgs: vec![group, format!("system:open-cluster-management:addon:{addon}")],
        units: Vec::new(),
        dns: vec![format!("{addon}.addon.open-cluster-management.io")],
    }
}

/// Waits for CSR `name` to satisfy `check`.
async fn await_csr(
    client: &Client,
    name: &str,
    what: &str,
    check: impl Fn(&CertificateSigningRequest) -> bool,
) -> CertificateSigningRequest {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    wait::until(what, TIMEOUT, || {
        let api = api.clone();
        let check = &check;
        async move { Ok::<_, kube::Error>(api.get_opt(name).await?.filter(|c| check(c))) }
    })
    .await
    .expect(what)
}

/// Waits for an Event about CSR `name` with `reason`; returns its message.
async fn await_event(client: &Client, name: &str, reason: &str) -> String {
    let api: Api<Event> = Api::all(client.clone());
    let what = format!("{reason} Event on CSR {name}");
    wait::until(&what, TIMEOUT, || {
        let api = api.clone();
        async move {
            let list = api
                .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
                .await?;
            Ok::<_, kube::Error>(
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some(reason))
                    .map(|e| e.message.unwrap_or_default()),
            )
        }
    })
    .await
    .expect(&what)
}

fn approved(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Approved"))
}

fn issued(csr: &CertificateSigningRequest) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|c| !c.0.is_empty())
}

/// Registers helloworld once for the binary and enables it on `cluster`; waits for its
/// registrations.
async fn helloworld_on(client: &Client, cluster: &str) -> ManagedClusterAddOn {
    support::register_plugin(client, "helloworld", flotilla_test_plugins::HELLOWORLD).await;
    support::await_cma(client, "helloworld").await;
    support::cluster(client, cluster).await;
    support::enable(client, "helloworld", cluster, json!([])).await;
    await_registered(client, cluster, "helloworld").await
}

async fn await_registered(client: &Client, cluster: &str, addon: &str) -> ManagedClusterAddOn {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
    let what = format!("registrations of {cluster}/{addon}");
    wait::until(&what, TIMEOUT, || {
        let api = api.clone();
        async move {
            Ok::<_, kube::Error>(
                api.get_opt(addon)
                    .await?
                    .filter(|a| a.status.as_ref().is_some_and(|s| !s.registrations.is_empty())),
            )
        }
    })
    .await
    .expect(&what)
}

#[tokio::test]
async fn helloworld_registers_with_the_default_subject_and_its_hub_role_goes_with_it() {
    let client = client().await;
    let addon = helloworld_on(&client, "reg-a").await;
    let status = addon.status.unwrap();
    assert_eq!(status.namespace, "open-cluster-management-agent-addon");
    assert_eq!(status.registrations.len(), 1);
    assert_eq!(status.registrations[0].signer_name, KUBE_SIGNER);
    assert_eq!(
        status.registrations[0].subject.user,
        "system:open-cluster-management:cluster:reg-a:addon:helloworld:agent:helloworld"
    );
    assert_eq!(
        status.registrations[0].subject.groups,
        [
            "system:open-cluster-management:cluster:reg-a:addon:helloworld",
            "system:open-cluster-management:addon:helloworld"
        ]
    );
    let applied = support::await_condition(&client, "reg-a", "helloworld", "RegistrationApplied", |c| {
        c.status == "True"
    })
    .await;
    assert_eq!(applied.reason, "SetPermissionApplied");

    let name = "open-cluster-management:helloworld:agent";
    let role = Api::<Role>::namespaced(client.clone(), "reg-a")
        .get(name)
        .await
        .expect("Role applied");
    let binding = Api::<RoleBinding>::namespaced(client.clone(), "reg-a")
        .get(name)
        .await
        .expect("RoleBinding applied");
    for (owners, labels) in [
        (role.owner_references(), role.labels()),
        (binding.owner_references(), binding.labels()),
    ] {
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "ManagedClusterAddOn");
        assert_eq!(Some(&owners[0].uid), addon.metadata.uid.as_ref());
        assert_eq!(
            labels
                .get("open-cluster-management.io/addon-name")
                .map(String::as_str),
            Some("helloworld")
        );
    }

    Api::<ManagedClusterAddOn>::namespaced(client.clone(), "reg-a")
        .delete("helloworld", &DeleteParams::default())
        .await
        .expect("delete the add-on");
    wait::until("hub permissions removed with the add-on", TIMEOUT, || {
        let client = client.clone();
        async move {
            let role = Api::<Role>::namespaced(client.clone(), "reg-a")
                .get_opt(name)
                .await?;
            let binding = Api::<RoleBinding>::namespaced(client, "reg-a")
                .get_opt(name)
                .await?;
            Ok::<_, kube::Error>((role.is_none() && binding.is_none()).then_some(()))
        }
    })
    .await
    .expect("Role and RoleBinding garbage-collected");
}

#[tokio::test]
async fn the_agents_addon_csr_is_approved_through_the_plugin_and_issued() {
    let client = client().await;
    allow_csr_creation(&client).await;
    helloworld_on(&client, "reg-b").await;
    let name = request(&agent("reg-b").await, &default_ask("reg-b", "helloworld")).await;
    let csr = await_csr(&client, &name, "add-on CSR issued", issued).await;
    let condition = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Approved"))
        .cloned()
        .expect("approved");
    assert_eq!(
        condition.reason.as_deref(),
        Some("AutoApprovedByHubCSRApprovingController")
    );
    let message = await_event(&client, &name, "AddOnCSRApproved").await;
    assert!(message.contains("plugin approved"), "{message}");
}

#[tokio::test]
async fn forged_addon_csrs_are_never_approved_and_an_event_says_why() {
    let client = client().await;
    allow_csr_creation(&client).await;
    helloworld_on(&client, "reg-c").await;
    // custom-signer declares a custom registration: its subject under a kube signer is forged.
    support::register_plugin(&client, "custom-signer", flotilla_test_plugins::CUSTOM_SIGNER).await;
    support::await_cma(&client, "custom-signer").await;
    support::enable(&client, "custom-signer", "reg-c", json!([])).await;
    await_registered(&client, "reg-c", "custom-signer").await;

    let reg_c = agent("reg-c").await;
    let bootstrap = hub()
        .await
        .client_for(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:bootstrappers:managedcluster"],
        )
        .await
        .expect("bootstrap client");
    let other_addon = default_ask("reg-c", "other");
    let cases: Vec<(&str, &Client, Ask<'_>, &str)> = vec![
        (
            "another cluster's label",
            &reg_c,
            Ask {
                cluster_label: "reg-z",
                ..default_ask("reg-c", "helloworld")
            },
            "not by cluster reg-z's registration agent",
        ),
        (
            "another add-on's subject",
            &reg_c,
            Ask {
                cn: other_addon.cn.clone(),
                orgs: other_addon.orgs.clone(),
                ..default_ask("reg-c", "helloworld")
            },
            "is not the registration's",
        ),
        (
            "a bootstrap requester",
            &bootstrap,
            default_ask("reg-c", "helloworld"),
            "bootstrap identity",
        ),
        (
            "a kubernetes.io signer for a custom registration",
            &reg_c,
            Ask {
                cn: "custom-signer-agent:reg-c".into(),
                orgs: vec!["custom-signer:reg-c".into(), "custom-signer:agents".into()],
                units: vec!["flotilla".into()],
                dns: Vec::new(),
                ..default_ask("reg-c", "custom-signer")
            },
            "Kubernetes signer",
        ),
        (
            "a signer the add-on did not declare",
            &reg_c,
            Ask {
                signer: "example.com/undeclared",
                ..default_ask("reg-c", "helloworld")
            },
            "registered no credential for signer",
        ),
        (
            "an add-on not enabled on the cluster",
            &reg_c,
            default_ask("reg-c", "not-enabled"),
            "is not enabled on cluster reg-c",
        ),
    ];
    for (case, requester, ask, reason) in cases {
        let name = request(requester, &ask).await;
        let message = await_event(&client, &name, "AddOnCSRRefusedByHost").await;
        assert!(message.contains(reason), "{case}: {message}");
        let csr = Api::<CertificateSigningRequest>::all(client.clone())
            .get(&name)
            .await
            .expect("CSR");
        assert!(
            !approved(&csr) && !issued(&csr),
            "{case}: CSR {name} was approved or issued"
        );
    }
}

#[tokio::test]
async fn custom_signer_csrs_are_signed_with_the_ca_the_addon_plugin_names() {
    let client = client().await;
    allow_csr_creation(&client).await;
    let ca = flotilla_testing::pki::CertificateAuthority::new("custom-signer test CA").expect("CA");
    support::namespace(&client, "signer-cas").await;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("custom-signer-ca".into()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_owned(),
                ByteString(ca.cert_pem().as_bytes().to_vec()),
            ),
            ("tls.key".to_owned(), ByteString(ca.key_pem().as_bytes().to_vec())),
        ])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), "signer-cas")
        .patch(
            "custom-signer-ca",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("CA secret");
    support::register_plugin(&client, "custom-signer", flotilla_test_plugins::CUSTOM_SIGNER).await;
    Api::<flotilla_api::plugins::v1alpha1::AddOnPlugin>::all(client.clone())
        .patch(
            "custom-signer",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"signers": [{"signerName": CUSTOM_SIGNER,
                "caSecretRef": {"namespace": "signer-cas", "name": "custom-signer-ca"}}]}})),
        )
        .await
        .expect("declare the signer's CA");
    support::await_cma(&client, "custom-signer").await;
    support::namespace(&client, "reg-d").await;
    support::apply_json(
        &client,
        "cluster.open-cluster-management.io/v1",
        "ManagedCluster",
        None,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": "reg-d", "labels": {"custom-signer.example.com/enabled": "true"}},
               "spec": {"hubAcceptsClient": true}}),
    )
    .await;
    support::enable(&client, "custom-signer", "reg-d", json!([])).await;
    let addon = await_registered(&client, "reg-d", "custom-signer").await;
    let custom = addon
        .status
        .unwrap()
        .registrations
        .into_iter()
        .find(|r| r.signer_name == CUSTOM_SIGNER)
        .expect("the custom registration");
    assert_eq!(custom.subject.user, "custom-signer-agent:reg-d");

    let ask = Ask {
        cluster_label: "reg-d",
        addon: "custom-signer",
        signer: CUSTOM_SIGNER,
        cn: custom.subject.user.clone(),
        orgs: custom.subject.groups.clone(),
        units: custom.subject.organization_units.clone(),
        dns: Vec::new(),
    };
    let name = request(&agent("reg-d").await, &ask).await;
    let csr = await_csr(&client, &name, "custom-signer CSR signed", issued).await;
    let pem = csr.status.unwrap().certificate.unwrap().0;
    use der::DecodePem;
    let certificate = x509_cert::Certificate::from_pem(&pem).expect("a PEM certificate");
    assert_eq!(
        certificate.tbs_certificate().issuer().to_string(),
        "CN=custom-signer test CA"
    );
    let info = flotilla_core::x509::parse_certificate(&pem).expect("certificate");
    assert_eq!(info.subject.common_name, "custom-signer-agent:reg-d");
    let life = info.not_after.duration_since(info.not_before).unwrap().as_secs();
    assert_eq!(
        life,
        24 * 3600 + 300,
        "24 h from signing, issued 5 minutes back for clock skew"
    );

    // The AddOnPlugin now names a CA outside the plugins' namespace. The plugin host refuses
    // the new spec while the last good revision keeps serving (and approving); the signer,
    // which reads the spec's signers itself, must not sign with that CA either.
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .patch(
            "custom-signer-ca",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("CA secret elsewhere");
    Api::<flotilla_api::plugins::v1alpha1::AddOnPlugin>::all(client.clone())
        .patch(
            "custom-signer",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"signers": [{"signerName": CUSTOM_SIGNER,
                "caSecretRef": {"namespace": "kube-system", "name": "custom-signer-ca"}}]}})),
        )
        .await
        .expect("move the signer's CA");
    let name = request(&agent("reg-d").await, &ask).await;
    let message = await_event(&client, &name, "AddOnCSRNotSigned").await;
    assert!(
        message.contains("\"kube-system\"") && message.contains(&format!("{:?}", support::PLUGIN_SECRETS)),
        "{message}"
    );
    let unsigned = Api::<CertificateSigningRequest>::all(client.clone())
        .get(&name)
        .await
        .expect("CSR");
    assert!(
        unsigned.status.and_then(|s| s.certificate).is_none(),
        "signed with a CA outside the plugins' namespace"
    );
}

#[tokio::test]
async fn an_addon_without_registrations_reports_nil_registration_and_gets_no_hub_permissions() {
    let client = client().await;
    support::register_plugin(&client, "reg-nil", flotilla_test_plugins::PRE_DELETE).await;
    support::await_cma(&client, "reg-nil").await;
    support::cluster(&client, "reg-e").await;
    support::enable(&client, "reg-nil", "reg-e", json!([])).await;
    let applied = support::await_condition(&client, "reg-e", "reg-nil", "RegistrationApplied", |c| {
        c.status == "True"
    })
    .await;
    assert_eq!(applied.reason, "NilRegistration");
    let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), "reg-e")
        .get("reg-nil")
        .await
        .expect("add-on");
    let status = addon.status.expect("status");
    assert!(status.registrations.is_empty());
    assert_eq!(status.namespace, "open-cluster-management-agent-addon");
    let selector = ListParams::default().labels("open-cluster-management.io/addon-name=reg-nil");
    let roles = Api::<Role>::namespaced(client.clone(), "reg-e")
        .list(&selector)
        .await
        .expect("roles");
    assert!(roles.items.is_empty());
}

#[tokio::test]
async fn hub_permissions_beyond_the_cluster_namespace_are_refused_in_a_condition_and_none_is_written() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let client = client().await;
    support::register_plugin(&client, "reg-grabby", flotilla_test_plugins::HOSTILE_GRABBY).await;
    support::await_cma(&client, "reg-grabby").await;
    support::cluster(&client, "reg-f").await;
    support::enable(&client, "reg-grabby", "reg-f", json!([])).await;
    let refused = support::await_condition(&client, "reg-f", "reg-grabby", "RegistrationApplied", |c| {
        c.status == "False"
    })
    .await;
    assert_eq!(refused.reason, "SetPermissionFailed");
    assert!(
        refused.message.contains("ClusterRole"),
        "the message names what was refused: {}",
        refused.message
    );
    // Nothing of the answer was written, not even its Role in the cluster namespace.
    let name = "grabby";
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterRoleBinding>::all(client.clone())
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Role>::namespaced(client.clone(), "kube-system")
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Role>::namespaced(client.clone(), "reg-f")
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
    );
}
