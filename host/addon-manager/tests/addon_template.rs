//! AddOnTemplate add-ons on a real hub, with no AddOnPlugin at all: the built-in plugin shipped in
//! the add-on manager renders the OCM documentation's `hello-template` example for two clusters
//! (each work carries its cluster's name and the AddOnDeploymentConfig's variable), puts the
//! template's registration into each ManagedClusterAddOn's status, applies its hub permissions
//! in each cluster namespace, and reports health from the Deployment's feedback (the stand-in
//! work agent reports it). Bad templates — a manifest that is no Kubernetes object, an unknown variable, a
//! template that does not exist — end in a condition that says so.

#![allow(clippy::expect_used, clippy::unwrap_used, reason = "tests fail loudly")]

use crate::support;

use flotilla_api::addon::v1alpha1::{ManagedClusterAddOn, RegistrationConfig};
use flotilla_api::work::v1::ManifestWork;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use support::client;

const ADDON: &str = "hello-template";
const AGENT_NAMESPACE: &str = "open-cluster-management-agent-addon";
const CONFIG_NAMESPACE: &str = "template-configs";

/// The documentation's `hello-template` AddOnTemplate (its Deployment, ServiceAccount and
/// ClusterRoleBinding; one kube-client registration bound to ClusterRole `cm-admin` in the
/// cluster namespace), named `name` for add-on `addon`.
fn hello_template(name: &str, addon: &str) -> Value {
    json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "AddOnTemplate",
        "metadata": {"name": name},
        "spec": {
            "addonName": addon,
            "agentSpec": {"workload": {"manifests": [
                {"kind": "Deployment", "apiVersion": "apps/v1",
                 "metadata": {"name": "hello-template-agent", "namespace": AGENT_NAMESPACE,
                              "labels": {"app": "hello-template-agent"}},
                 "spec": {"replicas": 1,
                    "selector": {"matchLabels": {"app": "hello-template-agent"}},
                    "template": {"metadata": {"labels": {"app": "hello-template-agent"}},
                      "spec": {"serviceAccountName": "hello-template-agent-sa",
                        "containers": [{"name": "helloworld-agent",
                          "image": "quay.io/open-cluster-management/addon-examples:latest",
                          "imagePullPolicy": "IfNotPresent",
                          "args": ["/helloworld_helm", "agent", "--cluster-name={{CLUSTER_NAME}}",
                                   format!("--addon-namespace={AGENT_NAMESPACE}"),
                                   format!("--addon-name={addon}"), "--hub-kubeconfig={{HUB_KUBECONFIG}}"],
                          "env": [{"name": "LOG_LEVEL", "value": "{{LOG_LEVEL}}"}]}]}}}},
                {"kind": "ServiceAccount", "apiVersion": "v1",
                 "metadata": {"name": "hello-template-agent-sa", "namespace": AGENT_NAMESPACE}},
                {"kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
                 "metadata": {"name": "hello-template-agent"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"kind": "ServiceAccount", "name": "hello-template-agent-sa",
                               "namespace": AGENT_NAMESPACE}]}
            ]}},
            "registration": [{"type": "KubeClient", "kubeClient": {"hubPermissions": [
                {"type": "CurrentCluster", "currentCluster": {"clusterRoleName": "cm-admin"}}
            ]}}]
        }
    })
}

/// Applies AddOnTemplate `template` and a ClusterManagementAddOn `addon` whose default configs
/// are the template `template_name` and AddOnDeploymentConfig `addon` (LOG_LEVEL 2), as the
/// documentation's example does (no lifecycle annotation: the add-on manager's).
async fn template_addon(client: &Client, addon: &str, template_name: &str, template: Option<Value>) {
    if let Some(template) = template {
        support::apply_json(
            client,
            "addon.open-cluster-management.io/v1alpha1",
            "AddOnTemplate",
            None,
            template,
        )
        .await;
    }
    support::namespace(client, CONFIG_NAMESPACE).await;
    support::deployment_config(client, CONFIG_NAMESPACE, addon, "2").await;
    support::apply_json(
        client,
        "addon.open-cluster-management.io/v1alpha1",
        "ClusterManagementAddOn",
        None,
        json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ClusterManagementAddOn",
               "metadata": {"name": addon},
               "spec": {"addOnMeta": {"displayName": addon, "description": "built with an AddOnTemplate"},
                        "supportedConfigs": [
                            {"group": "addon.open-cluster-management.io", "resource": "addontemplates",
                             "defaultConfig": {"name": template_name}},
                            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
                             "defaultConfig": {"namespace": CONFIG_NAMESPACE, "name": addon}}]}}),
    )
    .await;
}

/// Stands in for a work agent that applied the add-on's work and whose Deployment runs one
/// ready replica: Applied/Available plus the Deployment's well-known feedback.
async fn agent_reports_ready(client: &Client, work: &ManifestWork) {
    let generation = work.metadata.generation.unwrap_or_default();
    let now = Time(Timestamp::now());
    let condition = |type_: &str, reason: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": "stand-in agent",
               "observedGeneration": generation, "lastTransitionTime": now})
    };
    let int =
        |name: &str, value: i64| json!({"name": name, "fieldValue": {"type": "Integer", "integer": value}});
    Api::<ManifestWork>::namespaced(client.clone(), &work.namespace().unwrap_or_default())
        .patch_status(
            &work.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [
                    condition("Applied", "AppliedManifestWorkComplete"),
                    condition("Available", "ResourcesAvailable"),
                ],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                                     "resource": "deployments", "name": "hello-template-agent",
                                     "namespace": AGENT_NAMESPACE},
                    "statusFeedback": {"values": [int("Replicas", 1), int("ReadyReplicas", 1),
                                                  int("AvailableReplicas", 1)]},
                    "conditions": [],
                }]},
            }})),
        )
        .await
        .expect("report work status");
}

fn deployment_of(work: &ManifestWork) -> Option<Value> {
    work.spec
        .workload
        .manifests
        .iter()
        .filter_map(|m| serde_json::to_value(m).ok())
        .find(|m| m["kind"] == "Deployment")
}

#[tokio::test]
async fn the_documentation_example_installs_registers_and_reports_health_on_two_clusters() {
    let client = client().await;
    support::apply_json(
        &client,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cm-admin"},
               "rules": [{"apiGroups": ["addon.open-cluster-management.io"],
                          "resources": ["managedclusteraddons"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    template_addon(&client, ADDON, ADDON, Some(hello_template(ADDON, ADDON))).await;
    let clusters = ["tpl-one", "tpl-two"];
    for cluster in clusters {
        support::cluster(&client, cluster).await;
        support::enable(&client, ADDON, cluster, json!([])).await;
    }

    for cluster in clusters {
        // Installs: the work renders the template with this cluster's name and the config's variable.
        let work = support::await_work(
            &client,
            cluster,
            &format!("addon-{ADDON}-deploy-0"),
            "the template's work",
            |w| deployment_of(w).is_some(),
        )
        .await;
        let deployment = deployment_of(&work).unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["args"][2], format!("--cluster-name={cluster}"));
        assert_eq!(
            container["args"][5],
            "--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig"
        );
        assert_eq!(container["env"][0], json!({"name": "LOG_LEVEL", "value": "2"}));
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "CLUSTER_NAME", "value": cluster}))
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
            "hello-template-hub-kubeconfig"
        );
        assert_eq!(work.spec.workload.manifests.len(), 3);

        // Registers: the template's kube-client registration for agent `hello-template-agent`.
        let applied = support::await_condition(&client, cluster, ADDON, "RegistrationApplied", |c| {
            c.status == "True"
        })
        .await;
        assert_eq!(applied.reason, "SetPermissionApplied");
        let addon = Api::<ManagedClusterAddOn>::namespaced(client.clone(), cluster)
            .get(ADDON)
            .await
            .unwrap();
        let status = addon.status.unwrap();
        assert_eq!(status.namespace, AGENT_NAMESPACE);
        assert_eq!(status.registrations.len(), 1);
        assert_eq!(
            status.registrations[0].signer_name,
            "kubernetes.io/kube-apiserver-client"
        );
        assert_eq!(
            status.registrations[0].subject.user,
            format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}:agent:{ADDON}-agent")
        );
        // Hub permissions: ClusterRole cm-admin bound in the cluster namespace to the agent.
        let binding = Api::<RoleBinding>::namespaced(client.clone(), cluster)
            .get("open-cluster-management:hello-template:clusterrole:agent")
            .await
            .expect("hub permission applied");
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(binding.role_ref.name, "cm-admin");
        let subjects: Vec<String> = binding.subjects.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(subjects[0], status.registrations[0].subject.user);

        // Health: WorkloadAvailability, from the Deployment's feedback.
        agent_reports_ready(&client, &work).await;
        let available =
            support::await_condition(&client, cluster, ADDON, "Available", |c| c.status == "True").await;
        assert!(!available.message.is_empty(), "{available:?}");
    }

    // A new template revision reaches every cluster: the rollout releases its spec hash and a
    // new plugin instance renders it.
    let mut edited = hello_template(ADDON, ADDON);
    edited["spec"]["agentSpec"]["workload"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
        [1] = json!("agent-v2");
    support::apply_json(
        &client,
        "addon.open-cluster-management.io/v1alpha1",
        "AddOnTemplate",
        None,
        edited,
    )
    .await;
    for cluster in clusters {
        support::await_work(
            &client,
            cluster,
            &format!("addon-{ADDON}-deploy-0"),
            "the work of the edited template",
            |w| {
                deployment_of(w)
                    .is_some_and(|d| d["spec"]["template"]["spec"]["containers"][0]["args"][1] == "agent-v2")
            },
        )
        .await;
    }
}

#[tokio::test]
async fn a_bad_template_ends_in_a_condition_that_names_the_problem() {
    let client = client().await;
    let mut not_an_object = hello_template("tpl-bad-object", "tpl-bad-object");
    // The API server checks each manifest's apiVersion, kind and name; a variable whose value
    // breaks the JSON still makes the rendered manifest no object at all.
    not_an_object["spec"]["agentSpec"]["workload"]["manifests"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "default"}, "data": {"broken": "{{BREAK}}"}}]);
    let mut unknown = hello_template("tpl-bad-variable", "tpl-bad-variable");
    unknown["spec"]["agentSpec"]["workload"]["manifests"][1]["metadata"]["name"] =
        json!("{{NO_SUCH_VARIABLE}}");
    let cases = [
        (
            "tpl-bad-object",
            Some(not_an_object),
            "manifest 0: not valid JSON once the variables are put in",
        ),
        (
            "tpl-bad-variable",
            Some(unknown),
            "unknown variable {{NO_SUCH_VARIABLE}}",
        ),
        (
            "tpl-missing",
            None,
            "AddOnTemplate tpl-missing (the config of add-on tpl-missing) not found",
        ),
    ];
    for (addon, template, _) in &cases {
        template_addon(&client, addon, addon, template.clone()).await;
        support::apply_json(
            &client,
            "addon.open-cluster-management.io/v1alpha1",
            "AddOnDeploymentConfig",
            Some(CONFIG_NAMESPACE),
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnDeploymentConfig",
                   "metadata": {"name": addon, "namespace": CONFIG_NAMESPACE},
                   "spec": {"customizedVariables": [{"name": "LOG_LEVEL", "value": "2"},
                                                    {"name": "BREAK", "value": "\", \"oops"}]}}),
        )
        .await;
        support::cluster(&client, addon).await;
        support::enable(&client, addon, addon, json!([])).await;
    }
    for (addon, _, expected) in cases {
        let condition = support::await_condition(&client, addon, addon, "ManifestApplied", |c| {
            c.status == "False" && c.message.contains(expected)
        })
        .await;
        assert_eq!(condition.reason, "ManifestWorkApplyFailed", "{addon}");
        let works = Api::<ManifestWork>::namespaced(client.clone(), addon)
            .list(&Default::default())
            .await
            .unwrap();
        assert!(
            works.items.is_empty(),
            "{addon}: nothing is deployed from a bad template"
        );
    }
}

/// Lets every authenticated identity create and read CSRs (the registration hub grants cluster
/// agents this; here the test stands in for it).
async fn allow_csr_creation(client: &Client) {
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        None,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "test-template-csr-creator"},
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
               "metadata": {"name": "test-template-csr-creator"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "test-template-csr-creator"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                             "name": "system:authenticated"}]}),
    )
    .await;
}

/// Stores a new CA called `cn` as the `kubernetes.io/tls` Secret `name` in the plugins'
/// namespace, where the hub reads signing CAs.
async fn signing_ca(client: &Client, name: &str, cn: &str) {
    signing_ca_in(client, support::PLUGIN_SECRETS, name, cn).await;
}

/// [`signing_ca`] in `namespace`.
async fn signing_ca_in(client: &Client, namespace: &str, name: &str, cn: &str) {
    support::namespace(client, namespace).await;
    let ca = flotilla_testing::pki::CertificateAuthority::new(cn).expect("CA");
    support::apply_json(
        client,
        "v1",
        "Secret",
        Some(namespace),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": name, "namespace": namespace},
               "stringData": {"tls.crt": ca.cert_pem(), "tls.key": ca.key_pem()}}),
    )
    .await;
}

/// [`hello_template`] whose one registration is custom signer `signer`, signed by the CA in
/// Secret `ca` of the plugins' namespace, for user `user` in group `group`.
fn signer_template(name: &str, addon: &str, signer: &str, ca: &str, user: &str, group: &str) -> Value {
    let mut template = hello_template(name, addon);
    template["spec"]["registration"] = json!([{"type": "CustomSigner", "customSigner": {
        "signerName": signer, "signingCA": {"name": ca, "namespace": support::PLUGIN_SECRETS},
        "subject": {"user": user, "groups": [group]}}}]);
    template
}

/// Template add-on `addon`, enabled on cluster `addon`, whose one registration is custom signer
/// `signer` for `user` in `group`, signed by a new CA called `cn` in Secret `<addon>-ca` of
/// `ca_namespace`; returns the registration the hub computed.
async fn signer_addon(
    client: &Client,
    addon: &str,
    signer: &str,
    ca_namespace: &str,
    cn: &str,
    subject: (&str, &str),
) -> RegistrationConfig {
    let ca = format!("{addon}-ca");
    allow_csr_creation(client).await;
    signing_ca_in(client, ca_namespace, &ca, cn).await;
    let mut template = signer_template(addon, addon, signer, &ca, subject.0, subject.1);
    template["spec"]["registration"][0]["customSigner"]["signingCA"]["namespace"] = json!(ca_namespace);
    template_addon(client, addon, addon, Some(template)).await;
    support::cluster(client, addon).await;
    support::enable(client, addon, addon, json!([])).await;
    await_registration(client, addon, addon, signer).await
}
/// Waits until ManagedClusterAddOn `cluster/addon` registers `signer`; returns that registration.
async fn await_registration(client: &Client, cluster: &str, addon: &str, signer: &str) -> RegistrationConfig {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
    let what = format!("registration of {cluster}/{addon} for {signer}");
    flotilla_testing::wait::until(&what, support::TIMEOUT, || {
        let api = api.clone();
        async move {
            Ok::<_, kube::Error>(api.get_opt(addon).await?.and_then(|a| {
                a.status?
                    .registrations
                    .into_iter()
                    .find(|r| r.signer_name == signer)
            }))
        }
    })
    .await
    .expect(&what)
}

/// A client with cluster `cluster`'s registration agent identity, allowed what the hub grants
/// that agent on its add-ons (read them, write their status).
async fn agent(client: &Client, cluster: &str) -> Client {
    let group = format!("system:open-cluster-management:{cluster}");
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "Role",
        Some(cluster),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "test-registration-agent", "namespace": cluster},
               "rules": [
                   {"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["addon.open-cluster-management.io"],
                    "resources": ["managedclusteraddons/status"], "verbs": ["patch", "update"]}]}),
    )
    .await;
    support::apply_json(
        client,
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        Some(cluster),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "test-registration-agent", "namespace": cluster},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "test-registration-agent"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}),
    )
    .await;
    support::hub()
        .await
        .client_for(
            &format!("{group}:agent1"),
            &[&group, "system:open-cluster-management:managed-clusters"],
        )
        .await
        .expect("agent client")
}

/// Files, as `agent`, a CSR of `cluster`'s add-on `addon` for `signer` and subject `user` in
/// `group`; returns its name.
async fn file_csr(
    agent: &Client,
    cluster: &str,
    addon: &str,
    signer: &str,
    user: &str,
    group: &str,
) -> String {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let made = flotilla_core::x509::client_request(user, &[group], &[], &[]).expect("request");
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"generateName": format!("addon-{cluster}-{addon}-"), "labels": {
            "open-cluster-management.io/cluster-name": cluster,
            "open-cluster-management.io/addon-name": addon}},
        "spec": {"request": k8s_openapi::ByteString(made.request_pem.into_bytes()), "signerName": signer,
                 "usages": ["digital signature", "key encipherment", "client auth"]},
    }))
    .expect("CSR");
    Api::<CertificateSigningRequest>::all(agent.clone())
        .create(&Default::default(), &csr)
        .await
        .expect("create CSR")
        .name_any()
}

/// Waits for CSR `name`'s certificate; returns its issuer (RFC 4514).
async fn await_issuer(client: &Client, name: &str) -> String {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let signed = flotilla_testing::wait::until(&format!("CSR {name} signed"), support::TIMEOUT, || {
        let csrs = csrs.clone();
        async move {
            Ok::<_, kube::Error>(
                csrs.get_opt(name)
                    .await?
                    .and_then(|c| c.status?.certificate)
                    .filter(|c| !c.0.is_empty()),
            )
        }
    })
    .await
    .expect("signed");
    use der::DecodePem;
    let certificate = x509_cert::Certificate::from_pem(&signed.0).expect("a PEM certificate");
    certificate.tbs_certificate().issuer().to_string()
}

/// Waits for the add-on manager's verdict on CSR `name`: the reason and message of the first
/// Event it records about it that is not a Normal approval in progress.
async fn await_verdict(client: &Client, name: &str) -> (String, String) {
    use k8s_openapi::api::core::v1::Event;
    let api: Api<Event> = Api::all(client.clone());
    let what = format!("a verdict Event on CSR {name}");
    flotilla_testing::wait::until(&what, support::TIMEOUT, || {
        let api = api.clone();
        async move {
            let list = api
                .list(&kube::api::ListParams::default().fields(&format!("involvedObject.name={name}")))
                .await?;
            Ok::<_, kube::Error>(list.items.into_iter().find_map(|e| {
                let reason = e.reason?;
                reason
                    .starts_with("AddOnCSR")
                    .then(|| (reason, e.message.unwrap_or_default()))
            }))
        }
    })
    .await
    .expect(&what)
}

/// The reasons and messages of every add-on manager Event on CSR `name`.
async fn verdicts(client: &Client, name: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::core::v1::Event;
    Api::<Event>::all(client.clone())
        .list(&kube::api::ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("Events")
        .items
        .into_iter()
        .filter_map(|e| {
            let reason = e.reason?;
            reason
                .starts_with("AddOnCSR")
                .then(|| (reason, e.message.unwrap_or_default()))
        })
        .collect()
}

/// Whether CSR `name` is approved or carries a certificate.
async fn approved_or_issued(client: &Client, name: &str) -> bool {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let csr = Api::<CertificateSigningRequest>::all(client.clone())
        .get(name)
        .await
        .expect("CSR");
    let status = csr.status.unwrap_or_default();
    status.certificate.is_some_and(|c| !c.0.is_empty())
        || status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Approved")
}

#[tokio::test]
async fn a_templates_custom_signer_csr_is_signed_with_the_signing_ca_the_template_names() {
    const SIGNER: &str = "example.com/tpl-signer";
    let (addon, cluster) = ("tpl-signer", "tpl-signer");
    let client = client().await;
    let registered = signer_addon(
        &client,
        addon,
        SIGNER,
        support::PLUGIN_SECRETS,
        "template signer test CA",
        ("tpl-signer-agent", "tpl-signer-group"),
    )
    .await;
    assert_eq!(registered.subject.user, "tpl-signer-agent");

    // The cluster's registration agent asks for the certificate.
    let agent = agent(&client, cluster).await;
    let name = file_csr(
        &agent,
        cluster,
        addon,
        SIGNER,
        "tpl-signer-agent",
        "tpl-signer-group",
    )
    .await;
    assert_eq!(await_issuer(&client, &name).await, "CN=template signer test CA");
}

/// A template author cannot have the hub sign with a CA Secret of another namespace (OCM reads
/// a template's signingCA from anywhere): the CSR is never signed, and an Event says why.
#[tokio::test]
async fn a_templates_signing_ca_outside_the_plugins_namespace_signs_nothing() {
    const SIGNER: &str = "example.com/tpl-elsewhere";
    let (addon, cluster) = ("tpl-elsewhere", "tpl-elsewhere");
    let client = client().await;
    signer_addon(
        &client,
        addon,
        SIGNER,
        CONFIG_NAMESPACE,
        "elsewhere test CA",
        ("tpl-elsewhere-agent", "tpl-elsewhere-group"),
    )
    .await;
    let agent = agent(&client, cluster).await;
    let name = file_csr(
        &agent,
        cluster,
        addon,
        SIGNER,
        "tpl-elsewhere-agent",
        "tpl-elsewhere-group",
    )
    .await;
    let what = format!("the refusal to sign CSR {name}");
    let refusal = flotilla_testing::wait::until(&what, support::TIMEOUT, || {
        let (client, name) = (client.clone(), name.clone());
        async move {
            let found = verdicts(&client, &name)
                .await
                .into_iter()
                .find(|(reason, message)| {
                    reason == "AddOnCSRNotSigned" && message.contains(CONFIG_NAMESPACE)
                });
            Ok::<_, kube::Error>(found)
        }
    })
    .await
    .expect(&what);
    assert!(refusal.1.contains(support::PLUGIN_SECRETS), "{refusal:?}");
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let csr = Api::<CertificateSigningRequest>::all(client.clone())
        .get(&name)
        .await
        .expect("CSR");
    assert!(
        csr.status
            .and_then(|s| s.certificate)
            .is_none_or(|c| c.0.is_empty()),
        "signed with a CA outside the plugins' namespace"
    );
}

/// A template's custom signer: OCM approves every CSR for it, so the subject is the host's to
/// check, against the registration the hub computes from the template. The cluster's agent may
/// write the add-on's status; a registration it writes there for another cluster's identity is
/// never approved or signed, and the agent's own is, tampered status or not.
#[tokio::test]
async fn a_registration_the_agent_writes_into_status_gets_no_certificate() {
    const SIGNER: &str = "example.com/tpl-forge";
    let (addon, cluster) = ("tpl-forge", "tpl-forge");
    let client = client().await;
    let own = signer_addon(
        &client,
        addon,
        SIGNER,
        support::PLUGIN_SECRETS,
        "forge test CA",
        ("forge-agent:{cluster-name}", "forge-group"),
    )
    .await;
    assert_eq!(own.subject.user, "forge-agent:tpl-forge");

    // The agent puts another cluster's identity in its add-on's status, and asks for it.
    let agent = agent(&client, cluster).await;
    let forged = json!({"signerName": SIGNER,
                        "subject": {"user": "forge-agent:another-cluster", "groups": ["forge-group"]}});
    Api::<ManagedClusterAddOn>::namespaced(agent.clone(), cluster)
        .patch_status(
            addon,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"registrations": [forged]}})),
        )
        .await
        .expect("the agent writes its add-on's status");
    let name = file_csr(
        &agent,
        cluster,
        addon,
        SIGNER,
        "forge-agent:another-cluster",
        "forge-group",
    )
    .await;
    let (reason, message) = await_verdict(&client, &name).await;
    assert_eq!(reason, "AddOnCSRRefusedByHost", "{message}");
    assert!(message.contains("is not the registration's"), "{message}");
    assert!(
        !approved_or_issued(&client, &name).await,
        "CSR {name} was approved or signed"
    );

    // The hub writes its own registrations back, and the agent's own identity is signed.
    let api: Api<ManagedClusterAddOn> = Api::namespaced(client.clone(), cluster);
    flotilla_testing::wait::until("the hub's registrations back in status", support::TIMEOUT, || {
        let api = api.clone();
        let own = own.clone();
        async move {
            let status = api.get(addon).await?.status.unwrap_or_default();
            Ok::<_, kube::Error>((status.registrations == [own]).then_some(()))
        }
    })
    .await
    .expect("registrations restored");
    let name = file_csr(
        &agent,
        cluster,
        addon,
        SIGNER,
        "forge-agent:tpl-forge",
        "forge-group",
    )
    .await;
    assert_eq!(await_issuer(&client, &name).await, "CN=forge test CA");
}

/// Which AddOnTemplate serves an add-on is read from its `status.configReferences`, which the
/// cluster's agent may write: naming another add-on's template there gets the agent nothing of
/// it — no approval, no certificate signed with that template's CA — and the refusal says why.
#[tokio::test]
async fn another_addons_template_named_in_status_signs_nothing() {
    const OTHER_SIGNER: &str = "example.com/tpl-other";
    let (addon, cluster) = ("tpl-own", "tpl-own");
    let client = client().await;
    allow_csr_creation(&client).await;
    signing_ca(&client, "tpl-own-ca", "own test CA").await;
    signing_ca(&client, "tpl-other-ca", "other test CA").await;
    let own = signer_template(
        addon,
        addon,
        "example.com/tpl-own",
        "tpl-own-ca",
        "own-agent",
        "own-group",
    );
    template_addon(&client, addon, addon, Some(own)).await;
    let other = signer_template(
        "tpl-other",
        "tpl-other",
        OTHER_SIGNER,
        "tpl-other-ca",
        "other-agent",
        "other-group",
    );
    template_addon(&client, "tpl-other", "tpl-other", Some(other)).await;
    support::cluster(&client, cluster).await;
    support::enable(&client, addon, cluster, json!([])).await;
    await_registration(&client, cluster, addon, "example.com/tpl-own").await;

    // The agent points its add-on at the other add-on's template, and asks for its signer.
    let agent = agent(&client, cluster).await;
    let api: Api<ManagedClusterAddOn> = Api::namespaced(agent.clone(), cluster);
    let status = serde_json::to_value(api.get(addon).await.expect("add-on").status).expect("status");
    let mut references = status["configReferences"].clone();
    for reference in references.as_array_mut().expect("config references") {
        if reference["resource"] == "addontemplates" {
            reference["name"] = json!("tpl-other");
            reference["desiredConfig"]["name"] = json!("tpl-other");
        }
    }
    let tampered = json!({"status": {"configReferences": references}});
    let write = move |api: Api<ManagedClusterAddOn>| {
        let tampered = tampered.clone();
        async move {
            api.patch_status(addon, &PatchParams::default(), &Patch::Merge(&tampered))
                .await
                .expect("the agent writes its add-on's status");
        }
    };
    write(api.clone()).await;
    // The rollout writes the hub's references back at once, so the agent keeps writing its own
    // as fast as it can: the live status then names the other template much of the time.
    let writer = tokio::spawn({
        let api = api.clone();
        async move {
            loop {
                write(api.clone()).await;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    });
    let name = file_csr(&agent, cluster, addon, OTHER_SIGNER, "other-agent", "other-group").await;
    // The CSR is looked at again each round (an annotation) until a look catches the tampered
    // status (the per-requester rate limit spaces the looks out) or a minute passes.
    let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> = Api::all(client.clone());
    let names_the_rule = |events: &[(String, String)]| {
        events
            .iter()
            .any(|(_, m)| m.contains("AddOnTemplate tpl-other belongs to add-on tpl-other, not tpl-own"))
    };
    for round in 0..300 {
        if round % 10 == 0 && names_the_rule(&verdicts(&client, &name).await) {
            break;
        }
        let touch = json!({"metadata": {"annotations": {"test.flotilla.dev/round": round.to_string()}}});
        csrs.patch(&name, &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .expect("touch the CSR");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(
            !approved_or_issued(&client, &name).await,
            "CSR {name} was approved or signed"
        );
    }
    writer.abort();
    let events = verdicts(&client, &name).await;
    assert!(
        events.iter().all(|(reason, _)| reason == "AddOnCSRRefusedByHost"),
        "{events:?}"
    );
    assert!(names_the_rule(&events), "a refusal names the rule: {events:?}");
    assert!(
        !approved_or_issued(&client, &name).await,
        "CSR {name} was approved or signed"
    );
}
