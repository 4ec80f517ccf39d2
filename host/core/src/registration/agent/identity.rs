//! Whether an identity the agent already holds can be used: the certificate and key stored in
//! `hub-kubeconfig-secret`, checked the way OCM's agent checks them at start-up (both present,
//! the certificate issued to this cluster's agent and not expired), plus two checks of our
//! own: the key belongs to the certificate, and the stored kubeconfig points at the same hub
//! as the bootstrap kubeconfig (server, proxy, CA bundle and context cluster name). A
//! changed bootstrap kubeconfig therefore means a new registration, as in OCM.

use std::time::SystemTime;

use der::DecodePem;
use x509_cert::Certificate;

use crate::x509::{self, CertificateInfo, X509Error};

/// Where a kubeconfig's current context points: what must agree between the bootstrap
/// kubeconfig and the hub kubeconfig the agent wrote from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HubEndpoint {
    /// Name of the current context's cluster entry.
    pub cluster_name: String,
    /// The API server URL.
    pub server: String,
    /// The proxy URL, if any.
    pub proxy_url: Option<String>,
    /// The CA bundle (decoded `certificate-authority-data`), if any.
    pub ca_data: Option<Vec<u8>>,
}

/// Why a stored identity cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityProblem {
    /// The secret lacks a key.
    #[error("the secret has no {0:?}")]
    MissingKey(&'static str),
    /// The certificate or key cannot be read.
    #[error("{0}")]
    Unreadable(#[source] X509Error),
    /// The certificate was issued to another user.
    #[error("the certificate is issued to {found:?}, not {expected:?}")]
    SubjectMismatch {
        /// The agent's user.
        expected: String,
        /// The certificate's common name.
        found: String,
    },
    /// The certificate has expired.
    #[error("the certificate expired at {not_after:?}")]
    Expired {
        /// Its `notAfter`.
        not_after: SystemTime,
    },
    /// The key is not the certificate's.
    #[error("the private key does not belong to the certificate")]
    KeyMismatch,
    /// The stored kubeconfig points at another hub than the bootstrap kubeconfig.
    #[error("the stored kubeconfig points at {stored:?}, the bootstrap kubeconfig at {bootstrap:?}")]
    DifferentHub {
        /// The stored kubeconfig's server.
        stored: String,
        /// The bootstrap kubeconfig's server.
        bootstrap: String,
    },
}

/// Checks a stored certificate and key for the agent whose user is `expected_user`, at `now`.
pub fn check_certificate(
    cert_pem: &[u8],
    key_pem: &[u8],
    expected_user: &str,
    now: SystemTime,
) -> Result<CertificateInfo, IdentityProblem> {
    let info = x509::parse_certificate(cert_pem).map_err(IdentityProblem::Unreadable)?;
    if info.subject.common_name != expected_user {
        return Err(IdentityProblem::SubjectMismatch {
            expected: expected_user.to_owned(),
            found: info.subject.common_name,
        });
    }
    if now >= info.not_after {
        return Err(IdentityProblem::Expired {
            not_after: info.not_after,
        });
    }
    if !key_matches_certificate(cert_pem, key_pem).map_err(IdentityProblem::Unreadable)? {
        return Err(IdentityProblem::KeyMismatch);
    }
    Ok(info)
}

/// Checks that the stored kubeconfig's endpoint is the bootstrap kubeconfig's.
pub fn check_same_hub(bootstrap: &HubEndpoint, stored: &HubEndpoint) -> Result<(), IdentityProblem> {
    if bootstrap == stored {
        Ok(())
    } else {
        Err(IdentityProblem::DifferentHub {
            stored: stored.server.clone(),
            bootstrap: bootstrap.server.clone(),
        })
    }
}

/// Whether the ECDSA P-256 private key `key_pem` (PKCS#8 `PRIVATE KEY` or SEC1
/// `EC PRIVATE KEY`) is the key of the first certificate in `cert_pem`.
pub fn key_matches_certificate(cert_pem: &[u8], key_pem: &[u8]) -> Result<bool, X509Error> {
    let decode = |what: &'static str| {
        move |e: &dyn std::fmt::Display| X509Error::Decode {
            what,
            message: e.to_string(),
        }
    };
    let certificate = Certificate::load_pem_chain(cert_pem)
        .ok()
        .and_then(|chain| chain.into_iter().next())
        .map_or_else(|| Certificate::from_pem(cert_pem), Ok)
        .map_err(|e| decode("certificate")(&e))?;
    let key_text = std::str::from_utf8(key_pem).map_err(|e| decode("private key")(&e))?;
    let secret = p256::SecretKey::from_pem(key_text).map_err(|e| decode("private key")(&e))?;
    let spki = certificate.tbs_certificate().subject_public_key_info();
    let Some(point) = spki.subject_public_key.as_bytes() else {
        return Ok(false);
    };
    match p256::PublicKey::from_sec1_bytes(point) {
        Ok(public) => Ok(public == secret.public_key()),
        // Not a P-256 key, so not ours.
        Err(_) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // A self-signed P-256 certificate made with rcgen for the given user, and its key.
    fn self_signed(user: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, user);
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    const USER: &str = "system:open-cluster-management:c1:a1";

    #[test]
    fn a_certificate_with_its_own_key_for_the_agent_is_usable() {
        let (cert, key) = self_signed(USER);
        let info = check_certificate(cert.as_bytes(), key.as_bytes(), USER, SystemTime::now()).unwrap();
        assert_eq!(info.subject.common_name, USER);
    }

    #[test]
    fn another_key_is_a_mismatch() {
        let (cert, _) = self_signed(USER);
        let (_, other_key) = self_signed(USER);
        assert!(!key_matches_certificate(cert.as_bytes(), other_key.as_bytes()).unwrap());
        assert!(matches!(
            check_certificate(cert.as_bytes(), other_key.as_bytes(), USER, SystemTime::now()),
            Err(IdentityProblem::KeyMismatch)
        ));
    }

    #[test]
    fn a_sec1_key_is_read_too() {
        let (cert, key) = self_signed(USER);
        let secret = p256::SecretKey::from_pem(&key).unwrap();
        let sec1 = secret.to_sec1_pem(der::pem::LineEnding::LF).unwrap();
        assert!(sec1.starts_with("-----BEGIN EC PRIVATE KEY-----"));
        assert!(key_matches_certificate(cert.as_bytes(), sec1.as_bytes()).unwrap());
    }

    #[test]
    fn a_certificate_for_another_agent_or_expired_is_not_usable() {
        let (cert, key) = self_signed("system:open-cluster-management:c1:other");
        assert!(matches!(
            check_certificate(cert.as_bytes(), key.as_bytes(), USER, SystemTime::now()),
            Err(IdentityProblem::SubjectMismatch { .. })
        ));
        let (cert, key) = self_signed(USER);
        let far_future = SystemTime::now() + Duration::from_secs(10_000 * 365 * 24 * 3600);
        assert!(matches!(
            check_certificate(cert.as_bytes(), key.as_bytes(), USER, far_future),
            Err(IdentityProblem::Expired { .. })
        ));
    }

    #[test]
    fn garbage_is_unreadable_not_a_panic() {
        assert!(matches!(
            check_certificate(b"nope", b"nope", USER, SystemTime::now()),
            Err(IdentityProblem::Unreadable(_))
        ));
        let (cert, _) = self_signed(USER);
        assert!(key_matches_certificate(cert.as_bytes(), b"nope").is_err());
    }

    #[test]
    fn the_stored_kubeconfig_must_point_at_the_bootstrap_hub() {
        let bootstrap = HubEndpoint {
            cluster_name: "hub".into(),
            server: "https://127.0.0.1:6443".into(),
            proxy_url: None,
            ca_data: Some(b"CA".to_vec()),
        };
        assert!(check_same_hub(&bootstrap, &bootstrap.clone()).is_ok());
        for changed in [
            HubEndpoint {
                server: "https://127.0.0.1:7443".into(),
                ..bootstrap.clone()
            },
            HubEndpoint {
                ca_data: Some(b"OTHER".to_vec()),
                ..bootstrap.clone()
            },
            HubEndpoint {
                cluster_name: "other".into(),
                ..bootstrap.clone()
            },
            HubEndpoint {
                proxy_url: Some("http://proxy".into()),
                ..bootstrap.clone()
            },
        ] {
            assert!(matches!(
                check_same_hub(&bootstrap, &changed),
                Err(IdentityProblem::DifferentHub { .. })
            ));
        }
    }
}
