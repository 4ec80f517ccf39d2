//! Registry credentials from docker configs: `{"auths": {...}}` as in `~/.docker/config.json`
//! and `kubernetes.io/dockerconfigjson` Secrets, or the bare map of `kubernetes.io/dockercfg`.

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde_json::{Map, Value};

/// The fields of one entry the host reads; each must be a string when present.
#[derive(Default)]
struct DockerAuth<'a> {
    username: Option<&'a str>,
    password: Option<&'a str>,
    auth: Option<&'a str>,
    identitytoken: Option<&'a str>,
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
    let config = json_object(config_json)?;
    match config.get("auths") {
        None => Ok(None),
        Some(Value::Object(auths)) => credentials_in(auths, registry),
        Some(_) => Err("not a docker config: auths is not a map".to_owned()),
    }
}

/// Credentials for `registry` in a legacy `.dockercfg` (the `auths` map alone).
pub fn credentials_in_dockercfg(dockercfg: &[u8], registry: &str) -> Result<Option<RegistryAuth>, String> {
    credentials_in(&json_object(dockercfg)?, registry)
}

/// The config read untyped, so that it and each entry must be JSON objects (a typed reader
/// would take arrays of the fields too) and a repeated key counts once, the last.
fn json_object(raw: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice(raw) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err("not a docker config: not a JSON object".to_owned()),
        Err(e) => Err(format!("not a docker config: {e}")),
    }
}

/// Every entry's fields, checked in key order whichever entry is wanted.
fn entries(auths: &Map<String, Value>) -> Result<BTreeMap<&str, DockerAuth<'_>>, String> {
    auths
        .iter()
        .map(|(key, entry)| {
            let Value::Object(fields) = entry else {
                return Err(format!("not a docker config: auths[{key:?}] is not a map"));
            };
            let text = |name: &str| match fields.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(format!(
                    "not a docker config: auths[{key:?}].{name} is not a string"
                )),
            };
            let identitytoken = match (text("identitytoken")?, text("registrytoken")?) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "not a docker config: auths[{key:?}] has both identitytoken and registrytoken"
                    ));
                }
                (token, other) => token.or(other),
            };
            let entry = DockerAuth {
                username: text("username")?,
                password: text("password")?,
                auth: text("auth")?,
                identitytoken,
            };
            Ok((key.as_str(), entry))
        })
        .collect()
}

/// The first entry (in key order) whose key names `registry`: username and password, else
/// `auth`, else an identity token.
fn credentials_in(auths: &Map<String, Value>, registry: &str) -> Result<Option<RegistryAuth>, String> {
    let want = registry_key(registry);
    let entries = entries(auths)?;
    let Some((key, entry)) = entries.into_iter().find(|(key, _)| registry_key(key) == want) else {
        return Ok(None);
    };
    if let (Some(user), Some(password)) = (entry.username, entry.password) {
        return Ok(Some(RegistryAuth::Basic(user.to_owned(), password.to_owned())));
    }
    if let Some(auth) = entry.auth {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("auths[{key:?}].auth is not base64: {e}"))?;
        let text = String::from_utf8(decoded).map_err(|_| format!("auths[{key:?}].auth is not UTF-8"))?;
        let (user, password) = text
            .split_once(':')
            .ok_or_else(|| format!("auths[{key:?}].auth is not `user:password`"))?;
        return Ok(Some(RegistryAuth::Basic(user.to_owned(), password.to_owned())));
    }
    if let Some(token) = entry.identitytoken {
        return Ok(Some(RegistryAuth::Bearer(token.to_owned())));
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

    #[test]
    fn configs_and_entries_must_be_maps_of_strings() {
        // Arrays of the fields, which a typed reader would take for the config and the entry.
        let array = br#"[{"reg.example": {"username": "u", "password": "p"}}]"#;
        assert!(credentials_for(array, "reg.example").is_err());
        let entry = br#"{"auths": {"reg.example": ["u", "p"]}}"#;
        assert!(credentials_for(entry, "reg.example").is_err());
        // Any malformed entry refuses the config, as the typed reader did.
        let other = br#"{"auths": {"reg.example": {"auth": "dTpw"}, "other": {"username": 1}}}"#;
        assert!(credentials_for(other, "reg.example").is_err());
        let both = br#"{"reg.example": {"identitytoken": "a", "registrytoken": "b"}}"#;
        assert!(credentials_in_dockercfg(both, "reg.example").is_err());
        let alias = br#"{"reg.example": {"registrytoken": "b", "username": null}}"#;
        assert_eq!(
            credentials_in_dockercfg(alias, "reg.example"),
            Ok(Some(RegistryAuth::Bearer("b".into())))
        );
        assert_eq!(credentials_for(b"{}", "reg.example"), Ok(None));
    }
}
