//! The managed cluster's CA, which goes into every token Secret, read from its connection
//! settings. (The hub credential and the Lease are `flotilla_addon_agent`'s.)

use anyhow::Context as _;
use base64::Engine as _;
use kube::Config;

/// The CA bundle `config` trusts for its apiserver, as PEM: what a token's user needs to reach
/// the managed cluster (OCM takes the rest config's CA data, or its CA file).
pub fn ca_pem(config: &Config) -> anyhow::Result<Vec<u8>> {
    let certificates = config
        .root_cert
        .as_ref()
        .filter(|c| !c.is_empty())
        .context("the managed cluster's connection names no CA certificate")?;
    let mut pem = String::new();
    for der in certificates {
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Ok(pem.into_bytes())
}
