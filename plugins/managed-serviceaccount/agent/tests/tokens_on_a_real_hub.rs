//! The agent program against real control planes: a hub with Flotilla's CRDs (ManagedServiceAccount
//! among them) and a managed cluster whose apiserver issues and reviews ServiceAccount tokens.
//! The agent runs as a child process with the identities the add-on gives it, each allowed only
//! what the plugin renders (the hub Role for the agent's group in the cluster namespace; the
//! Role and ClusterRole for its service account), so the test also shows that the rendered RBAC
//! is enough.
//!
//! ```text
//!   hub:     ManagedServiceAccount cluster1/robot ──▶ managed-serviceaccount-agent (child)
//!            Secret cluster1/robot {token, ca.crt} ◀──┘        │
//!   managed: ServiceAccount <install ns>/robot ◀───────────────┘ (TokenRequest, TokenReview)
//!            the token, used as a client: SelfSubjectReview; pods Forbidden, then allowed
//! ```
//!
//! Every wait watches the object it waits for, or polls at short intervals (RBAC, which no
//! watch shows); nothing sleeps a fixed time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly at the first unexpected error"
)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;
use flotilla_addon_sdk::{AddOn, Addon as _, Cluster, testing::csr_for};
use flotilla_api::authentication::{
    consts,
    v1beta1::{ManagedServiceAccount as Msa, ManagedServiceAccountRotation, ManagedServiceAccountSpec},
};
use flotilla_testing::ControlPlane;
use k8s_openapi::{
    api::{
        authentication::v1::{SelfSubjectReview, TokenReview, TokenReviewSpec},
        core::v1::{Namespace, Pod, Secret, ServiceAccount},
        rbac::v1::{RoleBinding, RoleRef, Subject},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, Config, ResourceExt as _,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
        PatchParams, PostParams,
    },
    config::{KubeConfigOptions, Kubeconfig},
    runtime::wait::{Condition, await_condition},
};
use managed_serviceaccount::{ADDON_NAME, ManagedServiceAccount, SERVICE_ACCOUNT};

const CLUSTER: &str = "cluster1";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
const NAME: &str = "robot";
/// How long any one change may take to show: a few check periods of one second, with room for
/// a loaded machine.
const WAIT: Duration = Duration::from_secs(90);

// === the test ===

#[tokio::test]
async fn the_agent_mirrors_a_working_token_replaces_a_revoked_one_and_cleans_up() {
    let (hub, managed) = tokio::join!(ControlPlane::start("msa-hub"), ControlPlane::start("msa-managed"));
    let (hub, managed) = (hub.unwrap(), managed.unwrap());
    let (hub_admin, managed_admin) = (
        hub.admin_client().await.unwrap(),
        managed.admin_client().await.unwrap(),
    );
    let cluster = Cluster::new(CLUSTER);
    let addon = AddOn::new(ADDON_NAME, INSTALL_NAMESPACE);

    // Both sides allow the agent exactly what the plugin renders.
    create_namespace(&hub_admin, CLUSTER).await;
    for manifest in ManagedServiceAccount::hub_permissions(&cluster, &addon).unwrap() {
        apply(&hub_admin, &manifest).await;
    }
    create_namespace(&managed_admin, INSTALL_NAMESPACE).await;
    for manifest in ManagedServiceAccount::manifests(&cluster, &addon, &[]).unwrap() {
        if manifest["kind"] != "Deployment" {
            apply(&managed_admin, &manifest).await;
        }
    }

    let files = tempfile::tempdir().unwrap();
    let agent = Agent::start(&hub, &managed, &cluster, &addon, files.path());
    let msas: Api<Msa> = Api::namespaced(hub_admin.clone(), CLUSTER);
    let secrets: Api<Secret> = Api::namespaced(hub_admin.clone(), CLUSTER);
    let accounts: Api<ServiceAccount> = Api::namespaced(managed_admin.clone(), INSTALL_NAMESPACE);

    // A ManagedServiceAccount asking for one-hour tokens.
    let msa = Msa::new(
        NAME,
        ManagedServiceAccountSpec {
            rotation: ManagedServiceAccountRotation {
                enabled: true,
                validity: "1h0m0s".into(),
            },
            ttl_seconds_after_creation: None,
        },
    );
    let msa = msas.create(&PostParams::default(), &msa).await.unwrap();

    // Its status reports the Secret, whose token is the ServiceAccount's.
    let reported = until(&msas, NAME, &agent, "the token reported", is_reported)
        .await
        .unwrap();
    let status = reported.status.as_ref().unwrap();
    let secret_ref = status.token_secret_ref.as_ref().expect("tokenSecretRef");
    assert_eq!(secret_ref.name, NAME);
    let refreshed = secret_ref.last_refresh_timestamp.0;
    assert!(
        (Timestamp::now().as_second() - refreshed.as_second()).abs() < 120,
        "{refreshed}"
    );
    let expires = status
        .expiration_timestamp
        .as_ref()
        .expect("expirationTimestamp")
        .0;
    let lifetime = expires.as_second() - refreshed.as_second();
    assert!((3500..=3700).contains(&lifetime), "a token of {lifetime}s");
    for (type_, reason) in [
        (
            consts::condition::SECRET_CREATED,
            consts::condition::REASON_SECRET_CREATED,
        ),
        (
            consts::condition::TOKEN_REPORTED,
            consts::condition::REASON_TOKEN_REPORTED,
        ),
    ] {
        let condition = status.conditions.iter().find(|c| c.type_ == type_).expect(type_);
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("True", reason)
        );
    }

    let secret = secrets.get(NAME).await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some(consts::TOKEN_SECRET_TYPE));
    assert_eq!(
        secret
            .labels()
            .get(consts::IS_MANAGED_SERVICE_ACCOUNT_LABEL)
            .map(String::as_str),
        Some("true")
    );
    let owner = &secret.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("ManagedServiceAccount", NAME, msa.uid().unwrap().as_str())
    );
    assert_eq!(
        ca_of(&secret),
        managed.ca_pem().trim(),
        "ca.crt is not the managed cluster's CA"
    );
    let account = accounts.get(NAME).await.unwrap();
    assert_eq!(
        account
            .labels()
            .get(consts::IS_MANAGED_SERVICE_ACCOUNT_LABEL)
            .map(String::as_str),
        Some("true")
    );

    // The token, with the Secret's CA, is a client of the managed cluster as the ServiceAccount:
    // allowed nothing until someone grants it something.
    let user = format!("system:serviceaccount:{INSTALL_NAMESPACE}:{NAME}");
    let first = token_of(&secret);
    let robot = client_with(&managed, &secret).await;
    assert_eq!(whoami(&robot).await, user);
    let pods: Api<Pod> = Api::namespaced(robot.clone(), "default");
    match pods.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("listing pods before a RoleBinding: {other:?}"),
    }
    grant_pod_reading(&managed_admin, INSTALL_NAMESPACE, NAME).await;
    poll("the RoleBinding to take effect", || async {
        pods.list(&ListParams::default()).await.is_ok()
    })
    .await;

    // Revoked: the ServiceAccount is deleted and recreated. The old token stops working, and the
    // agent writes a new one that works.
    accounts.delete(NAME, &DeleteParams::default()).await.unwrap();
    let recreated = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            labels: Some(
                [(
                    consts::IS_MANAGED_SERVICE_ACCOUNT_LABEL.to_owned(),
                    "true".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &recreated).await {
        // The agent may have recreated it first.
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("recreate ServiceAccount {NAME}: {error}"),
    }
    let old = first.clone();
    let renewed = until(
        &secrets,
        NAME,
        &agent,
        "a new token",
        move |s: Option<&Secret>| s.is_some_and(|s| token_of(s) != old),
    )
    .await
    .unwrap();
    assert!(
        !review(&managed_admin, &first).await,
        "the revoked token still authenticates"
    );
    let robot = client_with(&managed, &renewed).await;
    assert_eq!(whoami(&robot).await, user);
    let pods: Api<Pod> = Api::namespaced(robot, "default");
    poll("the new token to list pods", || async {
        pods.list(&ListParams::default()).await.is_ok()
    })
    .await;
    until(
        &msas,
        NAME,
        &agent,
        "the new token reported",
        move |m: Option<&Msa>| {
            is_reported(m)
                && m.and_then(|m| m.status.as_ref()?.token_secret_ref.as_ref())
                    .is_some_and(|r| r.last_refresh_timestamp.0 >= refreshed)
        },
    )
    .await;

    // Deleted: the ServiceAccount goes (the agent) and so does the Secret (the hub's garbage
    // collector, by owner reference).
    msas.delete(NAME, &DeleteParams::default()).await.unwrap();
    until(
        &accounts,
        NAME,
        &agent,
        "the ServiceAccount deleted",
        |a: Option<&ServiceAccount>| a.is_none(),
    )
    .await;
    until(
        &secrets,
        NAME,
        &agent,
        "the Secret collected",
        |s: Option<&Secret>| s.is_none(),
    )
    .await;
    // The agent's own ServiceAccount was never touched.
    assert!(accounts.get_opt(SERVICE_ACCOUNT).await.unwrap().is_some());
    drop(agent);
}

// === the agent as a child process ===

/// The running agent; killed when dropped.
struct Agent {
    child: Child,
    log: PathBuf,
}

impl Agent {
    /// Starts the agent with the add-on's hub identity (default subject, as the klusterlet's
    /// CSR gets it) and its service account's identity on the managed cluster, checking every
    /// second and renewing its lease every second.
    fn start(
        hub: &ControlPlane,
        managed: &ControlPlane,
        cluster: &Cluster,
        addon: &AddOn,
        dir: &Path,
    ) -> Self {
        let csr = csr_for(cluster, addon);
        let groups: Vec<&str> = csr.organizations.iter().map(String::as_str).collect();
        let hub_dir = dir.join("hub");
        std::fs::create_dir_all(&hub_dir).unwrap();
        let hub_kubeconfig = hub_dir.join("kubeconfig");
        std::fs::write(
            &hub_kubeconfig,
            hub.kubeconfig_for(&csr.common_name, &groups).unwrap(),
        )
        .unwrap();

        let account = format!("system:serviceaccount:{INSTALL_NAMESPACE}:{SERVICE_ACCOUNT}");
        let account_groups = [
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{INSTALL_NAMESPACE}"),
            "system:authenticated",
        ];
        let managed_kubeconfig = dir.join("managed-kubeconfig");
        std::fs::write(
            &managed_kubeconfig,
            managed.kubeconfig_for(&account, &account_groups).unwrap(),
        )
        .unwrap();

        let log = dir.join("agent.log");
        let output = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_managed-serviceaccount-agent"))
            .arg(format!("--hub-kubeconfig={}", hub_kubeconfig.display()))
            .arg(format!("--kubeconfig={}", managed_kubeconfig.display()))
            .arg(format!("--cluster-name={}", cluster.name))
            .arg(format!("--addon-namespace={INSTALL_NAMESPACE}"))
            .arg(format!("--addon-name={}", addon.name))
            .args(["--check-period=1", "--lease-seconds=1"])
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .expect("start managed-serviceaccount-agent");
        Self { child, log }
    }

    /// What the agent has said so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// === waiting ===

/// Waits, watching, until `name` satisfies `condition` (`None`: it is gone); panics after
/// [`WAIT`] with the object as last seen and the agent's log.
async fn until<K>(
    api: &Api<K>,
    name: &str,
    agent: &Agent,
    what: &str,
    condition: impl Condition<K>,
) -> Option<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + 'static,
{
    match tokio::time::timeout(WAIT, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(object)) => object,
        outcome => {
            let last = api.get_opt(name).await.ok().flatten();
            panic!(
                "{what}: {outcome:?} within {WAIT:?}; {} {name} last seen:\n{}\nagent log:\n{}",
                K::kind(&()),
                serde_json::to_string_pretty(&last).unwrap_or_default(),
                agent.log()
            )
        }
    }
}

/// Polls `check` every 200 ms until it holds; panics after [`WAIT`].
async fn poll<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Both conditions True and a Secret named.
fn is_reported(msa: Option<&Msa>) -> bool {
    msa.and_then(|m| m.status.as_ref()).is_some_and(|status| {
        status.token_secret_ref.is_some()
            && [
                consts::condition::SECRET_CREATED,
                consts::condition::TOKEN_REPORTED,
            ]
            .iter()
            .all(|t| {
                status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == *t && c.status == "True")
            })
    })
}

// === tokens ===

fn token_of(secret: &Secret) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(data[consts::TOKEN_SECRET_TOKEN_KEY].0.clone()).unwrap()
}

fn ca_of(secret: &Secret) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(data[consts::TOKEN_SECRET_CA_KEY].0.clone())
        .unwrap()
        .trim()
        .to_owned()
}

/// A client of `cp` authenticating with the Secret's token and trusting only its `ca.crt`.
async fn client_with(cp: &ControlPlane, secret: &Secret) -> Client {
    let b64 = base64::engine::general_purpose::STANDARD;
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "managed", "cluster": {
            "server": cp.server(),
            "certificate-authority-data": b64.encode(ca_of(secret)),
        }}],
        "users": [{"name": "robot", "user": {"token": token_of(secret)}}],
        "contexts": [{"name": "robot", "context": {"cluster": "managed", "user": "robot"}}],
        "current-context": "robot",
    });
    let kubeconfig: Kubeconfig = serde_json::from_value(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// The user name the apiserver sees `client` as.
async fn whoami(client: &Client) -> String {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    review.status.unwrap().user_info.unwrap().username.unwrap()
}

/// Whether the managed cluster authenticates `token`.
async fn review(admin: &Client, token: &str) -> bool {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    reviewed.status.and_then(|s| s.authenticated) == Some(true)
}

/// Lets ServiceAccount `namespace/name` read pods in `default` (the built-in `view` role).
async fn grant_pod_reading(admin: &Client, namespace: &str, name: &str) {
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("{name}-view")),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "view".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            api_group: None,
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

// === objects ===

async fn create_namespace(client: &Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

/// Applies a rendered manifest (RBAC kinds and ServiceAccounts) server-side.
async fn apply(client: &Client, manifest: &serde_json::Value) {
    let api_version = manifest["apiVersion"].as_str().unwrap();
    let kind = manifest["kind"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &format!("{}s", kind.to_lowercase()),
    );
    let name = manifest["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match manifest["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply("test"), &Patch::Apply(manifest))
        .await
        .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}
