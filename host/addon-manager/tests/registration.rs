//! Add-on registration on a real hub: `status.registrations`/`status.namespace` and hub
//! permissions from the plugin, add-on CSRs approved only through the host's checks and the
//! plugin's `approve-csr` (forged ones never, each with its reason in an Event), and
//! custom-signer certificates signed with the CA the AddOnPlugin names; hub permissions that
//! reach another cluster's agent or bind a ClusterRole granting privileges are refused.
//!
//! CSRs are created with client certificates of the identities they claim (a cluster's
//! registration agent, a bootstrap token user), so `spec.username` is what the apiserver says.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests fail loudly")]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

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

/// Stores a new CA called `cn` as the `kubernetes.io/tls` Secret `signer-cas/name`.
async fn ca_secret(client: &Client, name: &str, cn: &str) {
    let ca = flotilla_testing::pki::CertificateAuthority::new(cn).expect("CA");
    support::namespace(client, "signer-cas").await;
    support::apply_json(
        client,
        "v1",
        "Secret",
        Some("signer-cas"),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": name, "namespace": "signer-cas"},
               "stringData": {"tls.crt": ca.cert_pem(), "tls.key": ca.key_pem()}}),
    )
    .await;
}

/// Applies ClusterRole `name` with `rules`, then AddOnTemplate `addon` (one ConfigMap manifest,
/// one kube-client registration whose hub permission binds that ClusterRole in the cluster
/// namespace) and a ClusterManagementAddOn `addon` whose default config is the template.
async fn template_binding_cluster_role(client: &Client, addon: &str, name: &str, rules: serde_json::Value) {
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules}),
    )
    .await;
    support::apply_json(
        client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnTemplate",
        None,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnTemplate",
               "metadata": {"name": addon},
               "spec": {"addonName": addon,
                        "agentSpec": {"workload": {"manifests": [
                            {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": addon, "namespace": "open-cluster-management-agent-addon"}}]}},
                        "registration": [{"type": "KubeClient", "kubeClient": {"hubPermissions": [
                            {"type": "CurrentCluster", "currentCluster": {"clusterRoleName": name}}]}}]}}),
    )
    .await;
    support::apply_json(
        client,
        "addon.open-cluster-management.io/v1alpha1",
        "ClusterManagementAddOn",
        None,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
               "metadata": {"name": addon},
               "spec": {"supportedConfigs": [
                   {"group": "addon.open-cluster-management.io", "resource": "addontemplates",
                    "defaultConfig": {"name": addon}}]}}),
    )
    .await;
}

/// Two AddOnPlugins name one add-on: the one that drives it supplies everything for it, the
/// other nothing — not its registrations (its component is helloworld's), and not the CA its
/// spec.signers lists for the add-on's signer, though it sorts first among the AddOnPlugins.
#[tokio::test]
async fn an_addon_plugin_that_lost_the_claim_on_an_addon_supplies_nothing_for_it() {
    use flotilla_api::plugins::v1alpha1::AddOnPlugin;
    let (addon, cluster) = ("cs-owner", "reg-h");
    let client = client().await;
    allow_csr_creation(&client).await;
    ca_secret(&client, "cs-owner-ca", "owner test CA").await;
    ca_secret(&client, "cs-rival-ca", "rival test CA").await;
    let signers = |ca: &str| {
        json!({"spec": {"signers": [{"signerName": CUSTOM_SIGNER,
        "caSecretRef": {"namespace": "signer-cas", "name": ca}}]}})
    };
    let plugins: Api<AddOnPlugin> = Api::all(client.clone());
    support::register_plugin(&client, addon, flotilla_test_plugins::CUSTOM_SIGNER).await;
    plugins
        .patch(
            addon,
            &PatchParams::default(),
            &Patch::Merge(signers("cs-owner-ca")),
        )
        .await
        .expect("the owner's signer CA");
    support::await_cma(&client, addon).await;

    // The rival: helloworld's component, claiming the same add-on, with a CA of its own.
    support::register_plugin(&client, "cs-rival-source", flotilla_test_plugins::HELLOWORLD).await;
    let mut rival = json!({"apiVersion": "plugins.flotilla.dev/v1alpha1", "kind": "AddOnPlugin",
        "metadata": {"name": "a-cs-rival"},
        "spec": {"addOnName": addon, "source": {"configMap": {"namespace": support::SOURCES,
            "name": "cs-rival-source", "key": "plugin.wasm"}}}});
    rival["spec"]["signers"] = signers("cs-rival-ca")["spec"]["signers"].clone();
    support::apply_json(
        &client,
        "plugins.flotilla.dev/v1alpha1",
        "AddOnPlugin",
        None,
        rival,
    )
    .await;
    wait::until("the rival's AddOnNameConflict", TIMEOUT, || {
        let plugins = plugins.clone();
        async move {
            let rival = plugins.get("a-cs-rival").await?;
            let conflict = rival
                .status
                .iter()
                .flat_map(|s| &s.conditions)
                .any(|c| c.type_ == "Ready" && c.status == "False" && c.reason == "AddOnNameConflict");
            Ok::<_, kube::Error>(conflict.then_some(()))
        }
    })
    .await
    .expect("the rival lost the claim");

    support::namespace(&client, cluster).await;
    support::apply_json(
        &client,
        "cluster.open-cluster-management.io/v1",
        "ManagedCluster",
        None,
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": cluster, "labels": {"custom-signer.example.com/enabled": "true"}},
               "spec": {"hubAcceptsClient": true}}),
    )
    .await;
    support::enable(&client, addon, cluster, json!([])).await;
    let registered = await_registered(&client, cluster, addon).await;
    let registrations = registered.status.unwrap().registrations;
    let custom = registrations
        .iter()
        .find(|r| r.signer_name == CUSTOM_SIGNER)
        .expect("the owner's custom registration, not the rival's helloworld one")
        .clone();

    let ask = Ask {
        cluster_label: cluster,
        addon,
        signer: CUSTOM_SIGNER,
        cn: custom.subject.user.clone(),
        orgs: custom.subject.groups.clone(),
        units: custom.subject.organization_units.clone(),
        dns: Vec::new(),
    };
    let name = request(&agent(cluster).await, &ask).await;
    let csr = await_csr(&client, &name, "custom-signer CSR signed", issued).await;
    let pem = csr.status.unwrap().certificate.unwrap().0;
    use der::DecodePem;
    let certificate = x509_cert::Certificate::from_pem(&pem).expect("a PEM certificate");
    assert_eq!(
        certificate.tbs_certificate().issuer().to_string(),
        "CN=owner test CA",
        "signed with the CA of the AddOnPlugin that drives the add-on"
    );
}

/// A client with the certificate identity the hub issues to `addon`'s template agent
/// (`<addon>-agent`) on `cluster`: its user, the per-cluster add-on group and the add-on-wide
/// group, as OCM's default subject has them.
async fn template_agent(cluster: &str, addon: &str) -> Client {
    let group = format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}");
    let addon_wide = format!("system:open-cluster-management:addon:{addon}");
    hub()
        .await
        .client_for(&format!("{group}:agent:{addon}-agent"), &[&group, &addon_wide])
        .await
        .expect("add-on agent client")
}

/// Whether `agent` may list ConfigMaps in `namespace`: `Ok` or 403, anything else fails.
async fn may_list_config_maps(agent: &Client, namespace: &str) -> bool {
    use k8s_openapi::api::core::v1::ConfigMap;
    match Api::<ConfigMap>::namespaced(agent.clone(), namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(e)) if e.code == 403 => false,
        Err(e) => panic!("list ConfigMaps in {namespace}: {e}"),
    }
}

#[tokio::test]
async fn a_template_addons_hub_permissions_reach_its_own_clusters_agent_and_no_other_clusters() {
    let client = client().await;
    let addon = "reg-perm";
    template_binding_cluster_role(
        &client,
        addon,
        "reg-perm-reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    for cluster in ["reg-g1", "reg-g2"] {
        support::cluster(&client, cluster).await;
        support::enable(&client, addon, cluster, json!([])).await;
    }
    for cluster in ["reg-g1", "reg-g2"] {
        let applied = support::await_condition(&client, cluster, addon, "RegistrationApplied", |c| {
            c.status == "True"
        })
        .await;
        assert_eq!(applied.reason, "SetPermissionApplied");
    }
    // Each cluster's agent reads its own cluster namespace (once the apiserver's RBAC cache has
    // the binding), and not the other's.
    let (one, two) = (
        template_agent("reg-g1", addon).await,
        template_agent("reg-g2", addon).await,
    );
    for (agent, cluster) in [(&one, "reg-g1"), (&two, "reg-g2")] {
        wait::until(
            &format!("{cluster}'s agent may read its namespace"),
            TIMEOUT,
            || async move { Ok::<_, kube::Error>(may_list_config_maps(agent, cluster).await.then_some(())) },
        )
        .await
        .expect("the agent holds its hub permissions");
    }
    assert!(
        !may_list_config_maps(&two, "reg-g1").await,
        "cluster reg-g2's agent acts in cluster reg-g1's namespace"
    );
    assert!(!may_list_config_maps(&one, "reg-g2").await);
    let binding = Api::<RoleBinding>::namespaced(client.clone(), "reg-g1")
        .get(&format!("open-cluster-management:{addon}:clusterrole:agent"))
        .await
        .expect("the template's binding");
    let subjects: Vec<String> = binding.subjects.unwrap().into_iter().map(|s| s.name).collect();
    assert!(
        !subjects.contains(&format!("system:open-cluster-management:addon:{addon}")),
        "the add-on-wide group, in every cluster's agent certificate, is never bound: {subjects:?}"
    );
}

#[tokio::test]
async fn a_bound_cluster_role_granting_every_verb_or_escalate_is_refused_and_nothing_is_applied() {
    let client = client().await;
    support::cluster(&client, "reg-h").await;
    for (addon, rules, rule) in [
        (
            "reg-star",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
            "verb \"*\"",
        ),
        (
            "reg-escalate",
            json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
                    "verbs": ["get", "create", "escalate"]}]),
            "verb \"escalate\"",
        ),
    ] {
        template_binding_cluster_role(&client, addon, &format!("{addon}-role"), rules).await;
        support::enable(&client, addon, "reg-h", json!([])).await;
        // Settled: applied or refused (not pending the plugin).
        let refused = support::await_condition(&client, "reg-h", addon, "RegistrationApplied", |c| {
            matches!(c.reason.as_str(), "SetPermissionApplied" | "SetPermissionFailed")
        })
        .await;
        assert_eq!(refused.reason, "SetPermissionFailed");
        assert!(
            refused.message.contains(&format!("ClusterRole \"{addon}-role\""))
                && refused.message.contains(rule),
            "the message names the ClusterRole and the rule: {}",
            refused.message
        );
        assert!(
            Api::<RoleBinding>::namespaced(client.clone(), "reg-h")
                .get_opt(&format!("open-cluster-management:{addon}:clusterrole:agent"))
                .await
                .unwrap()
                .is_none(),
            "nothing of a refused answer is applied"
        );
    }
}

#[tokio::test]
async fn a_refused_answer_removes_the_permissions_an_earlier_answer_was_granted() {
    let client = client().await;
    let addon = "reg-revoked";
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    template_binding_cluster_role(&client, addon, "reg-revoked-reader", rules).await;
    support::cluster(&client, "reg-i").await;
    support::enable(&client, addon, "reg-i", json!([])).await;
    support::await_condition(&client, "reg-i", addon, "RegistrationApplied", |c| {
        c.reason == "SetPermissionApplied"
    })
    .await;
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), "reg-i");
    let granted = format!("open-cluster-management:{addon}:clusterrole:agent");
    assert!(bindings.get_opt(&granted).await.unwrap().is_some());

    // The template now also binds a Role the answer does not declare.
    Api::<kube::api::DynamicObject>::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "addon.open-cluster-management.io",
            "v1alpha1",
            "AddOnTemplate",
        )),
    )
    .patch(
        addon,
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "add",
                "path": "/spec/registration/0/kubeClient/hubPermissions/-",
                "value": {"type": "SingleNamespace", "singleNamespace": {"namespace": "reg-i",
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "someone-elses"}}}}]))
            .unwrap(),
        ),
    )
    .await
    .expect("edit the template");
    let refused = support::await_condition(&client, "reg-i", addon, "RegistrationApplied", |c| {
        c.reason == "SetPermissionFailed"
    })
    .await;
    assert!(refused.message.contains("someone-elses"), "{}", refused.message);
    wait::until("the earlier grant removed", TIMEOUT, || {
        let (bindings, granted) = (bindings.clone(), granted.clone());
        async move { Ok::<_, kube::Error>(bindings.get_opt(&granted).await?.is_none().then_some(())) }
    })
    .await
    .expect("the add-on's applied permissions are removed with a refused answer");
}

#[tokio::test]
async fn one_clusters_addon_csr_flood_waits_in_its_own_bucket_while_another_cluster_is_served() {
    // Every add-on CSR that passes the labels costs the hub reads, a plugin call and an
    // approval. Without a per requester bound one cluster's flood takes them all, in the same
    // queue as every other cluster's requests.
    let client = client().await;
    allow_csr_creation(&client).await;
    helloworld_on(&client, "reg-fl1").await;
    helloworld_on(&client, "reg-fl2").await;
    let flooder = agent("reg-fl1").await;
    let started = std::time::Instant::now();
    let burst = flotilla_addon_manager::CSR_REQUESTER_BURST as usize;
    let mut flood = Vec::new();
    for _ in 0..3 * burst {
        flood.push(request(&flooder, &default_ask("reg-fl1", "helloworld")).await);
    }
    let other = request(&agent("reg-fl2").await, &default_ask("reg-fl2", "helloworld")).await;
    await_csr(&client, &other, "the other cluster's CSR approved", approved).await;

    tokio::time::sleep(Duration::from_secs(3)).await;
    let elapsed = started.elapsed();
    let csrs = Api::<CertificateSigningRequest>::all(client.clone());
    let mut granted = 0;
    for name in &flood {
        if approved(&csrs.get(name).await.expect("flood CSR")) {
            granted += 1;
        }
    }
    let refills = (elapsed.as_secs_f64() / flotilla_addon_manager::CSR_REQUESTER_REFILL.as_secs_f64()).ceil();
    let allowed = burst + refills as usize;
    assert!(
        granted >= burst,
        "the flooding cluster still gets its burst: {granted}"
    );
    assert!(
        granted <= allowed,
        "{granted} of {} flood CSRs approved in {elapsed:?}; at most {allowed} allowed",
        3 * burst
    );
}
