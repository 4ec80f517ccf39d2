//! What went wrong on the way to the hub through a forward proxy (`proxy-url` of the hub
//! kubeconfig's cluster entry), told so a person can act on it.
//!
//! The klusterlet reaches the hub through an HTTP CONNECT tunnel: TCP (and, for an `https://`
//! proxy, TLS verified with `certificate-authority-data`) to the proxy, `CONNECT host:port`,
//! then the hub's own TLS inside the tunnel. The HTTP client reports a failure of the first two
//! legs only as a chain of messages (`tunnel error: …` and its causes), which names neither the
//! proxy nor what to fix; [`diagnose`] reads that chain and says which leg failed:
//!
//! ```text
//!   agent ──TCP──▶ proxy          Unreachable           (refused, no route, timeout, DNS)
//!         ──TLS──▶ proxy          CertificateNotTrusted (https proxy, CA not in the bundle)
//!         CONNECT hub:port ──▶    TunnelRefused / AuthenticationRequired / ClosedDuringConnect
//!         ══TLS══▶ hub (inside)   not a proxy fault: the message is left alone
//! ```
//!
//! Matching is on text because the client's error types are erased into boxed errors on the
//! way up; the strings matched are those of hyper-util's tunnel connector, hyper-util's HTTP
//! connector, rustls and the OS, each covered by a test below.

/// Which leg of the way through the proxy failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyFault {
    /// No connection to the proxy itself (refused, unreachable, timed out, unknown name).
    Unreachable,
    /// The proxy's TLS certificate was not trusted (an `https://` proxy whose CA is not in
    /// `certificate-authority-data`).
    CertificateNotTrusted,
    /// The proxy answered CONNECT with a status other than 2xx (its rules forbid the tunnel).
    TunnelRefused,
    /// The proxy answered CONNECT with 407: it wants credentials in the proxy URL.
    AuthenticationRequired,
    /// The proxy closed the connection before answering CONNECT.
    ClosedDuringConnect,
}

/// The marker hyper-util's tunnel connector puts first in every error of its own.
const TUNNEL: &str = "tunnel error";

/// Classifies an error chain (outermost message first) of a request made through a proxy;
/// `None` when the chain is not a failure of the way to the proxy or of the tunnel (for
/// example the hub's own TLS or an API error), which then needs no proxy-specific words.
pub fn classify(chain: &[String]) -> Option<ProxyFault> {
    let tunnel = chain.iter().position(|m| m.contains(TUNNEL))?;
    let own = &chain[tunnel];
    let causes = chain[tunnel + 1..].join(": ").to_ascii_lowercase();
    if own.contains("proxy authorization required") {
        Some(ProxyFault::AuthenticationRequired)
    } else if own.contains("unsuccessful") {
        Some(ProxyFault::TunnelRefused)
    } else if own.contains("unexpected end of file") {
        Some(ProxyFault::ClosedDuringConnect)
    } else if own.contains("failed to create underlying connection") {
        if is_certificate_problem(&causes) {
            Some(ProxyFault::CertificateNotTrusted)
        } else {
            Some(ProxyFault::Unreachable)
        }
    } else if own.contains("io error establishing tunnel") {
        Some(ProxyFault::ClosedDuringConnect)
    } else {
        None
    }
}

fn is_certificate_problem(causes: &str) -> bool {
    [
        "invalid peer certificate",
        "unknownissuer",
        "certificate verify",
        "notvalidforname",
    ]
    .iter()
    .any(|m| causes.contains(m))
}

/// The message for a failed request to `hub` (`host:port`) through `proxy_url`, given the
/// error chain (outermost first) and, for a refused tunnel, the status the proxy answered
/// CONNECT with if it is known: what failed and what to do, with the lowest cause; `None` when
/// [`classify`] finds no proxy fault.
pub fn diagnose(proxy_url: &str, hub: &str, chain: &[String], status: Option<&str>) -> Option<String> {
    let fault = classify(chain)?;
    let cause = chain.last().map(String::as_str).unwrap_or_default();
    Some(match fault {
        ProxyFault::Unreachable => format!(
            "cannot connect to the proxy {proxy_url} ({cause}): check that the proxy runs and that \
             proxy-url in the kubeconfig names it"
        ),
        ProxyFault::CertificateNotTrusted => format!(
            "the certificate of the proxy {proxy_url} was not trusted ({cause}): the proxy's CA \
             must be appended to certificate-authority-data of the kubeconfig (`flotilla join \
             --proxy-ca`)"
        ),
        ProxyFault::TunnelRefused => format!(
            "the proxy {proxy_url} refused the tunnel to the hub {hub}: it answered CONNECT with {}; \
             allow CONNECT to {hub} in the proxy's rules",
            status.unwrap_or("a status other than 2xx")
        ),
        ProxyFault::AuthenticationRequired => format!(
            "the proxy {proxy_url} refused the tunnel to the hub {hub} with 407 Proxy \
             Authentication Required: put the proxy's user and password in proxy-url \
             (http://user:password@host:port)"
        ),
        ProxyFault::ClosedDuringConnect => format!(
            "the proxy {proxy_url} closed the connection while opening the tunnel to the hub {hub} \
             ({cause}): is proxy-url's scheme right (http:// or https://) and does the proxy allow \
             CONNECT?"
        ),
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn chain(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|p| (*p).to_owned()).collect()
    }

    #[rstest]
    #[case::refused_tcp(
        &["client error (Connect)", "tunnel error: failed to create underlying connection",
          "tcp connect error", "Connection refused (os error 111)"],
        Some(ProxyFault::Unreachable))]
    #[case::unknown_name(
        &["client error (Connect)", "tunnel error: failed to create underlying connection",
          "dns error", "failed to lookup address information: Name or service not known"],
        Some(ProxyFault::Unreachable))]
    #[case::proxy_ca_missing(
        &["client error (Connect)", "tunnel error: failed to create underlying connection",
          "invalid peer certificate: UnknownIssuer"],
        Some(ProxyFault::CertificateNotTrusted))]
    #[case::proxy_name_mismatch(
        &["client error (Connect)", "tunnel error: failed to create underlying connection",
          "invalid peer certificate: certificate not valid for name \"proxy\""],
        Some(ProxyFault::CertificateNotTrusted))]
    #[case::connect_forbidden(
        &["client error (Connect)", "tunnel error: unsuccessful"],
        Some(ProxyFault::TunnelRefused))]
    #[case::connect_needs_credentials(
        &["client error (Connect)", "tunnel error: proxy authorization required"],
        Some(ProxyFault::AuthenticationRequired))]
    #[case::closed(
        &["client error (Connect)", "tunnel error: unexpected end of file"],
        Some(ProxyFault::ClosedDuringConnect))]
    #[case::hub_tls_inside_the_tunnel(
        &["client error (Connect)", "invalid peer certificate: UnknownIssuer"],
        None)]
    #[case::no_proxy_involved(
        &["client error (Connect)", "tcp connect error", "Connection refused (os error 111)"],
        None)]
    fn faults_are_told_apart_by_the_leg_that_failed(
        #[case] parts: &[&str],
        #[case] expected: Option<ProxyFault>,
    ) {
        assert_eq!(classify(&chain(parts)), expected);
    }

    #[test]
    fn an_unreachable_proxy_is_named_not_the_hub() {
        let message = diagnose(
            "http://127.0.0.1:3128",
            "127.0.0.1:6443",
            &chain(&[
                "client error (Connect)",
                "tunnel error: failed to create underlying connection",
                "Connection refused (os error 111)",
            ]),
            None,
        )
        .unwrap();
        assert!(message.starts_with("cannot connect to the proxy http://127.0.0.1:3128"));
        assert!(message.contains("Connection refused"));
        assert!(!message.contains("6443"), "{message}");
    }

    #[test]
    fn a_refused_tunnel_says_so_and_names_the_hub() {
        let message = diagnose(
            "http://p:3128",
            "hub:6443",
            &chain(&["client error (Connect)", "tunnel error: unsuccessful"]),
            Some("403 Forbidden"),
        )
        .unwrap();
        assert!(message.contains("the proxy http://p:3128 refused the tunnel to the hub hub:6443"));
        assert!(
            message.contains("answered CONNECT with 403 Forbidden"),
            "{message}"
        );
        let unknown = diagnose(
            "http://p:3128",
            "hub:6443",
            &chain(&["tunnel error: unsuccessful"]),
            None,
        )
        .unwrap();
        assert!(unknown.contains("a status other than 2xx"), "{unknown}");
    }

    #[test]
    fn an_untrusted_proxy_certificate_says_where_the_proxy_ca_goes() {
        let message = diagnose(
            "https://p:3129",
            "hub:6443",
            &chain(&[
                "tunnel error: failed to create underlying connection",
                "invalid peer certificate: UnknownIssuer",
            ]),
            None,
        )
        .unwrap();
        assert!(message.contains("certificate of the proxy https://p:3129 was not trusted"));
        assert!(message.contains("certificate-authority-data"));
    }
}
