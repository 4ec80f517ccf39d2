//! Registry credentials from docker configs: `{"auths": {...}}` as in `~/.docker/config.json`
//! and `kubernetes.io/dockerconfigjson` Secrets, or the bare map of `kubernetes.io/dockercfg`.

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize, Default)]
struct DockerAuth {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
    #[serde(default, alias = "registrytoken")]
    identitytoken: Option<String>,
}

/// `host[:port]` of a docker config key (`https://host:5000/v1/` → `host:5000`), with Docker
/// Hub's aliases folded into one.
fn registry_key(key: &str) -> String {
    let key = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = key.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".to_owned(),
        _ => host,
    }
}

/// Credentials for `registry` in a docker config (`{"auths": {...}}`). `Ok(None)` when the
/// config has no entry for the registry.
pub fn credentials_for(config_json: &[u8], registry: &str) -> Result<Option<RegistryAuth>, String> {
    let config: DockerConfig =
        serde_json::from_slice(config_json).map_err(|e| format!("not a docker config: {e}"))?;
    credentials_in(config.auths, registry)
}

/// Credentials for `registry` in a legacy `.dockercfg` (the `auths` map alone).
pub fn credentials_in_dockercfg(dockercfg: &[u8], registry: &str) -> Result<Option<RegistryAuth>, String> {
    let auths: BTreeMap<String, DockerAuth> =
        serde_json::from_slice(dockercfg).map_err(|e| format!("not a docker config: {e}"))?;
    credentials_in(auths, registry)
}

/// The first entry (in key order) whose key names `registry`: username and password, else
/// `auth`, else an identity token.
fn credentials_in(
    auths: BTreeMap<String, DockerAuth>,
    registry: &str,
) -> Result<Option<RegistryAuth>, String> {
    let want = registry_key(registry);
    let Some((key, entry)) = auths.into_iter().find(|(key, _)| registry_key(key) == want) else {
        return Ok(None);
    };
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(RegistryAuth::Basic(user.clone(), password.clone())));
    }
    if let Some(auth) = &entry.auth {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("auths[{key:?}].auth is not base64: {e}"))?;
        let text = String::from_utf8(decoded).map_err(|_| format!("auths[{key:?}].auth is not UTF-8"))?;
        let (user, password) = text
            .split_once(':')
            .ok_or_else(|| format!("auths[{key:?}].auth is not `user:password`"))?;
        return Ok(Some(RegistryAuth::Basic(user.to_owned(), password.to_owned())));
    }
    if let Some(token) = &entry.identitytoken {
        return Ok(Some(RegistryAuth::Bearer(token.clone())));
    }
    Err(format!(
        "auths[{key:?}] has neither username/password, auth nor identitytoken"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: Result<Option<RegistryAuth>, String>) -> Option<(String, String)> {
        match auth {
            Ok(Some(RegistryAuth::Basic(u, p))) => Some((u, p)),
            _ => None,
        }
    }

    #[test]
    fn docker_config_entries_match_by_host_and_port() {
        let config = br#"{"auths": {
            "https://127.0.0.1:5000/v1/": {"username": "alice", "password": "s3cret"},
            "other.example:443": {"auth": "Ym9iOmh1bnRlcjI="},
            "https://index.docker.io/v1/": {"auth": "Y2Fyb2w6eA=="}
        }}"#;
        assert_eq!(
            basic(credentials_for(config, "127.0.0.1:5000")),
            Some(("alice".into(), "s3cret".into()))
        );
        assert_eq!(
            basic(credentials_for(config, "other.example:443")),
            Some(("bob".into(), "hunter2".into()))
        );
        assert_eq!(
            basic(credentials_for(config, "docker.io")),
            Some(("carol".into(), "x".into()))
        );
        assert_eq!(credentials_for(config, "127.0.0.1:5001"), Ok(None));
        assert!(credentials_for(b"not json", "x").is_err());
        assert!(credentials_for(br#"{"auths": {"x": {}}}"#, "x").is_err());
    }

    #[test]
    fn legacy_dockercfg_is_the_map_alone() {
        let cfg = br#"{"reg.example": {"identitytoken": "t0k"}}"#;
        assert_eq!(
            credentials_in_dockercfg(cfg, "reg.example"),
            Ok(Some(RegistryAuth::Bearer("t0k".into())))
        );
        assert!(credentials_in_dockercfg(br#"{"auths": 1}"#, "reg.example").is_err());
    }
}
