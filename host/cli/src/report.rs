//! How a failed command is told to the person who ran it: the one place CLI errors are
//! rendered.
//!
//! ```text
//!  error: create work w1 on cluster c1: ManifestWork.work… "w1" is invalid: spec…apiVersion: Required value
//!  hint: the apiserver refused the object as written: correct the field named above and run the command again
//!  apiserver status: {"code":422,…}                                       (only with -v)
//! ```
//!
//! A command's error is an anyhow chain of what it was doing ("create work w1 on cluster c1")
//! down to the cause. kube's `Error::Api` shows the apiserver's answer twice in its own text
//! (once as a `Debug` dump) and a third time as its source, the `Status`; here the answer is
//! written once, as the apiserver's own message, and the raw status only when asked for.
//! Causes whose text an outer one already carries (library errors that quote their source)
//! are skipped for the same reason. The hint comes from the kind of failure alone (the
//! apiserver's code, an unreachable cluster); a command's own refusals say what to do
//! themselves.

use std::fmt::Write as _;

use kube::core::Status;

/// The text of a failed command for standard error: the chain on one line, a hint on what
/// to do when the cause says it, and with `verbose` the apiserver's raw status.
pub fn render(error: &anyhow::Error, verbose: bool) -> String {
    let (line, status) = chain(error);
    let mut text = format!("error: {line}");
    let hint = status.as_ref().map_or_else(
        || unreachable_hint(error).map(str::to_owned),
        |status| status_hint(status).map(str::to_owned),
    );
    if let Some(hint) = hint {
        let _ = write!(text, "\nhint: {hint}");
    }
    if verbose && let Some(status) = &status {
        let raw = serde_json::to_string(status).unwrap_or_else(|_| format!("{status:?}"));
        let _ = write!(text, "\napiserver status: {raw}");
    }
    text
}

/// The error and its causes on one line, as `render` writes it without the `error: ` prefix;
/// for commands that report one failure among several and go on.
pub fn line(error: &anyhow::Error) -> String {
    chain(error).0
}

/// The chain joined by `: `, each apiserver answer once, and the first such answer.
fn chain(error: &anyhow::Error) -> (String, Option<Status>) {
    let mut line = String::new();
    let mut status = None;
    for cause in error.chain() {
        let (part, answer) = match api_status(cause) {
            Some(answer) => (status_text(answer), Some(answer.clone())),
            None => (cause.to_string(), None),
        };
        if !part.is_empty() && !line.contains(&part) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&part);
        }
        if answer.is_some() {
            status = answer;
            // What follows is the same answer again (the `Status` as a source).
            break;
        }
    }
    (line, status)
}

/// The apiserver's answer, if `cause` is one: kube's `Error::Api` or a bare `Status`.
fn api_status<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a Status> {
    match cause.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => Some(status),
        _ => cause.downcast_ref::<Status>(),
    }
}

/// The apiserver's own message (it names the object and the field), else its reason and code.
/// An object refused as invalid is named with the fields at fault only: the apiserver adds a
/// cause without a field ("some validation rules were not checked …") that says nothing to do.
fn status_text(status: &Status) -> String {
    if status.message.is_empty() {
        return format!("the apiserver answered {} {}", status.code, status.reason);
    }
    let fields: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .filter(|c| !c.field.is_empty() && c.field != "<nil>")
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    match status.message.split_once(" is invalid: ") {
        Some((object, _)) if !fields.is_empty() => format!("{object} is invalid: {}", fields.join("; ")),
        _ => status.message.clone(),
    }
}

/// What to do about an apiserver refusal, by its code.
fn status_hint(status: &Status) -> Option<&'static str> {
    match status.code {
        400 | 422 => Some(
            "the apiserver refused the object as written: correct the field named above and run the command again",
        ),
        401 => Some(
            "the apiserver did not accept these credentials: check --kubeconfig and --context, or renew the credentials",
        ),
        403 => Some(
            "the identity of this kubeconfig lacks that permission: use --kubeconfig/--context of one that has it, or ask an admin to grant it",
        ),
        404 => Some("it does not exist: check the name and namespace (`flotilla get …` lists what exists)"),
        409 => Some("it changed or already exists: look at it and run the command again"),
        500..=599 => {
            Some("the apiserver failed: run the command again; if it keeps failing, look at the apiserver")
        }
        _ => None,
    }
}

/// What to do when the cluster could not be reached at all.
fn unreachable_hint(error: &anyhow::Error) -> Option<&'static str> {
    error
        .chain()
        .any(|cause| {
            matches!(
                cause.downcast_ref::<kube::Error>(),
                Some(kube::Error::Service(_) | kube::Error::HyperError(_))
            )
        })
        .then_some(
            "the cluster could not be reached: is it running, and are --kubeconfig and --context right?",
        )
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    /// What the apiserver answers for a manifest without `apiVersion`.
    fn invalid() -> kube::Error {
        let status: Status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
            "message": "ManifestWork.work.open-cluster-management.io \"w1\" is invalid: \
                [spec.workload.manifests[0].apiVersion: Required value: must not be empty, <nil>: \
                Invalid value: \"null\": some validation rules were not checked because the object \
                was invalid; correct the existing errors to complete validation]",
            "details": {"name": "w1", "group": "work.open-cluster-management.io", "kind": "ManifestWork",
                "causes": [
                    {"reason": "FieldValueRequired", "message": "Required value: must not be empty",
                     "field": "spec.workload.manifests[0].apiVersion"},
                    {"reason": "FieldValueInvalid", "message": "Invalid value: \"null\": some validation \
                     rules were not checked because the object was invalid; correct the existing errors \
                     to complete validation", "field": "<nil>"}]},
        }))
        .unwrap();
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn an_apiserver_answer_is_written_once_with_what_to_do() {
        let error = Err::<(), _>(invalid())
            .context("create work w1 on cluster c1")
            .unwrap_err();
        let text = render(&error, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "error: create work w1 on cluster c1: ManifestWork.work.open-cluster-management.io \"w1\" \
                 is invalid: spec.workload.manifests[0].apiVersion: Required value: must not be empty",
                "hint: the apiserver refused the object as written: correct the field named above and run \
                 the command again",
            ]
        );
        assert!(!text.contains("Status {"), "no Debug dump: {text}");
    }

    #[test]
    fn the_raw_status_only_with_verbose() {
        let error = Err::<(), _>(invalid()).context("create work w1").unwrap_err();
        let text = render(&error, true);
        let raw = text
            .lines()
            .find_map(|l| l.strip_prefix("apiserver status: "))
            .unwrap_or_else(|| panic!("{text}"));
        let status: Status = serde_json::from_str(raw).unwrap();
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            text.matches("must not be empty").count(),
            3,
            "line, and raw message and cause: {text}"
        );
    }

    #[test]
    fn a_refusal_without_field_causes_keeps_the_apiservers_message() {
        let status = Status::failure("namespaces \"x\" not found", "NotFound").with_code(404);
        let error = Err::<(), _>(kube::Error::Api(status.boxed()))
            .context("create work w1 on cluster x")
            .unwrap_err();
        assert_eq!(
            render(&error, false).lines().next(),
            Some("error: create work w1 on cluster x: namespaces \"x\" not found")
        );
    }

    #[test]
    fn a_cause_an_outer_message_already_quotes_is_not_repeated() {
        let error =
            anyhow::anyhow!("read kubeconfig /x: No such file or directory").context("connect to the hub");
        let error = Err::<(), _>(error).context("enable add-on").unwrap_err();
        assert_eq!(
            render(&error, true),
            "error: enable add-on: connect to the hub: read kubeconfig /x: No such file or directory"
        );
    }
}
