//! What a kubeconfig read from a Secret may ask of the process that uses it.
//!
//! The klusterlet and the add-on agents build clients from kubeconfigs that someone else
//! wrote into a Secret: the bootstrap and hub kubeconfig secrets, hosted mode's
//! `external-managed-kubeconfig`, add-on credential secrets. Anyone who may write such a
//! Secret decides what is in it, yet the client runs on the agent's host with the agent's
//! files. kube's loader honours, for the chosen user and cluster:
//!
//! - `users[].user.exec`: runs a command on this host (any command, with the agent's
//!   privileges);
//! - `users[].user.auth-provider`: a provider's login, which may run a command too (gcp's
//!   `cmd-path`) or fetch tokens from elsewhere;
//! - `users[].user.tokenFile`, `client-certificate`, `client-key`,
//!   `clusters[].cluster.certificate-authority`: read a file of this host — a token file is
//!   sent as a bearer token to whatever server the kubeconfig names, so a kubeconfig pointing
//!   at the agent's own service-account token and an attacker's server hands that token over.
//!
//! A kubeconfig from a Secret must therefore be self-contained: credentials as data
//! (`token`, `client-certificate-data`, `client-key-data`, `certificate-authority-data`). The
//! one exception is OCM's mounted layout, where the kubeconfig names `tls.crt` and `tls.key`
//! beside it: a file reference is allowed when it is exactly the name of a key of the same
//! Secret and the Secret is mounted as files (the caller says which keys those are). Every
//! user and cluster entry is checked, not only the current context's, so no later choice of
//! context can reach an unchecked entry.
//!
//! A kubeconfig an admin names on the command line (`--kubeconfig`) is the admin's choice and
//! is not checked: it may keep its exec plugin.

use kube::config::Kubeconfig;

/// A kubeconfig from a Secret that would run a command or read a file of this host.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} {why}; a kubeconfig read from a Secret may carry its credentials only as data \
     (token, client-certificate-data, client-key-data, certificate-authority-data)"
)]
pub struct UnsafeKubeconfig {
    /// The refused field, as a path into the kubeconfig (`users["admin"].user.exec`).
    pub field: String,
    /// What the field would make the client do.
    pub why: &'static str,
}

/// Refuses a kubeconfig read from a Secret whose users run commands or whose users or clusters
/// read files of this host, unless a file is one of `mounted_keys`: keys of the same Secret
/// that the caller has written beside the kubeconfig (empty when the Secret is not mounted).
pub fn check_from_secret(kubeconfig: &Kubeconfig, mounted_keys: &[&str]) -> Result<(), UnsafeKubeconfig> {
    let file = |field: String, path: &Option<String>, why: &'static str| match path {
        Some(path) if !mounted_keys.contains(&path.as_str()) => Err(UnsafeKubeconfig { field, why }),
        _ => Ok(()),
    };
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let at = |field: &str| format!("users[{:?}].user.{field}", named.name);
        if user.exec.is_some() {
            return Err(UnsafeKubeconfig {
                field: at("exec"),
                why: "would run a command on this host",
            });
        }
        if user.auth_provider.is_some() {
            return Err(UnsafeKubeconfig {
                field: at("auth-provider"),
                why: "would run an authentication provider, which may run a command on this host",
            });
        }
        file(
            at("tokenFile"),
            &user.token_file,
            "would send a file of this host as a bearer token to the kubeconfig's server",
        )?;
        file(
            at("client-certificate"),
            &user.client_certificate,
            "would read a certificate from a file of this host",
        )?;
        file(
            at("client-key"),
            &user.client_key,
            "would read a private key from a file of this host",
        )?;
    }
    for named in &kubeconfig.clusters {
        if let Some(cluster) = &named.cluster {
            file(
                format!("clusters[{:?}].cluster.certificate-authority", named.name),
                &cluster.certificate_authority,
                "would read a CA from a file of this host",
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str, cluster: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            r#"
apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0E=
    {cluster}
contexts:
- name: default
  context: {{ cluster: hub, user: agent }}
current-context: default
users:
- name: agent
  user:
    {user}
"#
        ))
        .unwrap()
    }

    #[rstest::rstest]
    #[case::token("token: abc", "")]
    #[case::embedded_certificate("client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ", "")]
    #[case::basic("username: u\n    password: p", "")]
    fn self_contained_kubeconfigs_pass(#[case] user: &str, #[case] cluster: &str) {
        assert_eq!(check_from_secret(&kubeconfig(user, cluster), &[]), Ok(()));
    }

    #[rstest::rstest]
    #[case::exec(
        "exec: { apiVersion: client.authentication.k8s.io/v1, command: touch, args: [/tmp/x] }",
        "",
        "users[\"agent\"].user.exec"
    )]
    #[case::auth_provider(
        "auth-provider: { name: gcp, config: { cmd-path: /bin/sh } }",
        "",
        "users[\"agent\"].user.auth-provider"
    )]
    #[case::token_file(
        "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
        "",
        "users[\"agent\"].user.tokenFile"
    )]
    #[case::certificate_file(
        "client-certificate: /etc/kubernetes/pki/admin.crt",
        "",
        "users[\"agent\"].user.client-certificate"
    )]
    #[case::key_file("client-key: tls.key", "", "users[\"agent\"].user.client-key")]
    #[case::ca_file(
        "token: abc",
        "certificate-authority: /etc/ssl/ca.crt",
        "clusters[\"hub\"].cluster.certificate-authority"
    )]
    fn commands_and_host_files_are_refused_naming_the_field(
        #[case] user: &str,
        #[case] cluster: &str,
        #[case] field: &str,
    ) {
        let refused = check_from_secret(&kubeconfig(user, cluster), &[]).unwrap_err();
        assert_eq!(refused.field, field);
        assert!(refused.to_string().contains("only as data"), "{refused}");
    }

    #[test]
    fn an_entry_outside_the_current_context_is_checked_too() {
        let mut config = kubeconfig("token: abc", "");
        let mut other = config.auth_infos[0].clone();
        other.name = "spare".into();
        other.auth_info.as_mut().unwrap().exec = kubeconfig(
            "exec: { apiVersion: client.authentication.k8s.io/v1, command: sh }",
            "",
        )
        .auth_infos[0]
            .auth_info
            .clone()
            .unwrap()
            .exec;
        config.auth_infos.push(other);
        assert_eq!(
            check_from_secret(&config, &[]).unwrap_err().field,
            "users[\"spare\"].user.exec"
        );
    }

    #[test]
    fn files_that_are_keys_of_the_mounted_secret_pass_and_others_do_not() {
        let ocm = kubeconfig("client-certificate: tls.crt\n    client-key: tls.key", "");
        assert_eq!(
            check_from_secret(&ocm, &["kubeconfig", "tls.crt", "tls.key"]),
            Ok(())
        );
        assert!(check_from_secret(&ocm, &["kubeconfig"]).is_err());
        let elsewhere = kubeconfig("client-certificate: ../tls.crt\n    client-key: tls.key", "");
        assert!(check_from_secret(&elsewhere, &["tls.crt", "tls.key"]).is_err());
        // Commands stay refused whatever is mounted.
        let exec = kubeconfig(
            "exec: { apiVersion: client.authentication.k8s.io/v1, command: tls.crt }",
            "",
        );
        assert!(check_from_secret(&exec, &["tls.crt"]).is_err());
    }
}
