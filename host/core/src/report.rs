//! How errors from other crates are told in conditions, Events and logs.

/// `error: cause: cause…`, each cause once: many crates' `Display` leaves out the cause that
/// says what happened (reqwest's "error sending request" hides "connection refused"; hyper
/// and rustls errors nest the same way), and a condition must say it.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    #[test]
    fn every_cause_is_told_once() {
        let inner = Layer {
            message: "connection refused",
            source: None,
        };
        let middle = Layer {
            message: "error sending request: connection refused",
            source: Some(Box::new(inner)),
        };
        let outer = Layer {
            message: "fetch manifest",
            source: Some(Box::new(middle)),
        };
        assert_eq!(
            error_chain(&outer),
            "fetch manifest: error sending request: connection refused"
        );
    }
}
