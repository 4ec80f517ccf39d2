//! Where the agent's tunnel server is, and which CA signs its certificate: the two
//! `customizedVariables` of the add-on's `AddOnDeploymentConfig`, checked before anything is
//! rendered.
//!
//! ```text
//!   AddOnDeploymentConfig.spec.customizedVariables
//!     TunnelServerURL  wss://host:port/connect ─▶ agent arg --hub-url
//!     TunnelServerCA   PEM certificates ────────▶ ConfigMap cluster-proxy-ca ─▶ --hub-ca
//! ```
//!
//! Both are required: the agent refuses to start without `--hub-url` and `--hub-ca`, so a
//! Deployment rendered without them would only crash-loop on every cluster. A missing value is
//! [`AddonError::MissingConfig`], a malformed one [`AddonError::InvalidConfig`]; either way the
//! message names the variable, and the host shows it in the add-on's conditions.
//!
//! The CRD caps a variable's value at 1024 characters: enough for one ECDSA CA certificate (what
//! Flotilla's local PKI issues), not for most RSA ones.

use flotilla_addon_sdk::AddonError;
use flotilla_addon_sdk::config::AddOnDeploymentConfigSpec;

/// The customized variable holding the tunnel server's agent URL.
pub const URL_VARIABLE: &str = "TunnelServerURL";
/// The customized variable holding the PEM CA bundle that signs the tunnel server's certificate.
pub const CA_VARIABLE: &str = "TunnelServerCA";
/// The only scheme the agent dials: a websocket over TLS.
pub const URL_SCHEME: &str = "wss://";
/// The only PEM block a CA bundle may hold.
const CERTIFICATE_LABEL: &str = "CERTIFICATE";

/// The tunnel configuration, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelSettings {
    /// The server's agent URL: starts with `wss://`, names a host, and holds no whitespace or
    /// control characters.
    pub url: String,
    /// The server's CA bundle: one or more PEM `CERTIFICATE` blocks and nothing else, trimmed
    /// and ending in a newline.
    pub ca_pem: String,
}

/// Reads and checks [`URL_VARIABLE`] and [`CA_VARIABLE`] from `adc` (the default, empty config
/// when the add-on has none, so that case is reported as the missing variables).
pub fn tunnel_settings(adc: &AddOnDeploymentConfigSpec) -> Result<TunnelSettings, AddonError> {
    let url = required(
        adc,
        URL_VARIABLE,
        "the tunnel server's agent URL, wss://HOST:PORT/connect",
    )?;
    check_url(url).map_err(|why| {
        AddonError::InvalidConfig(format!("customizedVariables {URL_VARIABLE} {url:?} {why}"))
    })?;
    let ca = required(
        adc,
        CA_VARIABLE,
        "the PEM CA certificate that signs the tunnel server",
    )?;
    let ca_pem = format!("{}\n", ca.trim());
    check_ca_pem(&ca_pem).map_err(|why| {
        AddonError::InvalidConfig(format!(
            "customizedVariables {CA_VARIABLE} is not a PEM CA bundle: {why}"
        ))
    })?;
    Ok(TunnelSettings {
        url: url.to_owned(),
        ca_pem,
    })
}

/// The value of variable `name`, which must be set and not blank; `what` says what it holds.
fn required<'a>(adc: &'a AddOnDeploymentConfigSpec, name: &str, what: &str) -> Result<&'a str, AddonError> {
    match adc.variable(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(AddonError::MissingConfig(format!(
            "customizedVariables {name} ({what}) is not set in the add-on's AddOnDeploymentConfig"
        ))),
    }
}

/// Why `url` is not a URL the agent can dial, if it is not. The value becomes one argv entry
/// (no shell), so the checks are about the agent failing later, not about injection.
fn check_url(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain spaces or control characters".to_owned());
    }
    let Some(rest) = url.strip_prefix(URL_SCHEME) else {
        return Err(format!(
            "must start with {URL_SCHEME} (the agent dials TLS websockets only)"
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.starts_with(':') {
        return Err("names no host".to_owned());
    }
    Ok(())
}

/// Why `text` is not a bundle of PEM certificates, if it is not: every non-blank line belongs
/// to a `CERTIFICATE` block of base64 text, and there is at least one block. Other block types
/// are refused by name, so a private key pasted by mistake never lands in a ConfigMap.
fn check_ca_pem(text: &str) -> Result<(), String> {
    let mut open: Option<(String, usize)> = None;
    let mut certificates = 0;
    for (number, line) in text
        .lines()
        .map(str::trim_end)
        .enumerate()
        .map(|(i, l)| (i + 1, l))
    {
        match open.take() {
            None => {
                if line.is_empty() {
                    continue;
                }
                let Some(label) = line
                    .strip_prefix("-----BEGIN ")
                    .and_then(|l| l.strip_suffix("-----"))
                else {
                    return Err(format!("line {number} is outside any PEM block"));
                };
                if label != CERTIFICATE_LABEL {
                    return Err(format!(
                        "it holds a {label} block; a CA bundle holds {CERTIFICATE_LABEL} blocks only"
                    ));
                }
                open = Some((label.to_owned(), 0));
            }
            Some((label, body)) => {
                if let Some(end) = line
                    .strip_prefix("-----END ")
                    .and_then(|l| l.strip_suffix("-----"))
                {
                    if end != label {
                        return Err(format!("line {number} ends {end}, not the open {label} block"));
                    }
                    if body == 0 || body % 4 != 0 {
                        return Err(format!("the {label} block ending on line {number} is not base64"));
                    }
                    certificates += 1;
                } else if !line.is_empty()
                    && line
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                {
                    open = Some((label, body + line.len()));
                } else {
                    return Err(format!("line {number} is not base64"));
                }
            }
        }
    }
    if let Some((label, _)) = open {
        return Err(format!("the {label} block has no END line"));
    }
    if certificates == 0 {
        return Err("it holds no certificate".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBhTCCASugAwIBAgIU\nAAAA\n-----END CERTIFICATE-----\n";

    #[test]
    fn wss_urls_with_a_host_are_accepted() {
        assert_eq!(check_url("wss://tunnel.example:8091/connect"), Ok(()));
        assert_eq!(check_url("wss://10.0.0.1:8091/connect"), Ok(()));
        assert_eq!(check_url("wss://[::1]:8091/connect"), Ok(()));
    }

    #[test]
    fn urls_the_agent_cannot_dial_are_refused() {
        for bad in [
            "https://tunnel:8091/connect",
            "ws://tunnel:8091/connect",
            "wss:///connect",
            "wss://:8091/connect",
            "wss://tunnel:8091/connect --target=evil:443",
            " wss://tunnel:8091/connect",
            "wss://tunnel:8091/\nconnect",
        ] {
            assert!(check_url(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn certificate_bundles_are_accepted() {
        assert_eq!(check_ca_pem(CERT), Ok(()));
        assert_eq!(check_ca_pem(&format!("{CERT}\n{CERT}")), Ok(()));
        assert_eq!(check_ca_pem(&CERT.replace('\n', "\r\n")), Ok(()));
    }

    #[test]
    fn a_private_key_is_refused_by_name() {
        let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let why = check_ca_pem(&format!("{CERT}{key}")).unwrap_err();
        assert!(why.contains("PRIVATE KEY"), "{why}");
    }

    #[test]
    fn text_that_is_not_pem_is_refused() {
        for bad in [
            "",
            "not a certificate",
            "-----BEGIN CERTIFICATE-----\nAAAA\n",
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\nAA*A\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END X509 CRL-----\n",
            "subject=CN=ca\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        ] {
            assert!(check_ca_pem(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
