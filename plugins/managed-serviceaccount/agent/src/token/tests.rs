//! The agent's decisions, from fixtures: when a token is replaced, and what status follows.

use std::collections::BTreeMap;

use k8s_openapi::{
    ByteString, api::authentication::v1::UserInfo, apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::*;

const NS: &str = "open-cluster-management-agent-addon";
const DAY: u64 = 24 * 3600;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// A token of the shape the apiserver issues (header and signature are not read).
fn jwt(sub: &str) -> String {
    let payload = serde_json::json!({
        "aud": ["https://kubernetes.default.svc"],
        "iss": "https://kubernetes.default.svc.cluster.local",
        "kubernetes.io": {"namespace": NS, "serviceaccount": {"name": "robot", "uid": "u1"}},
        "sub": sub,
    });
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}.{}",
        engine.encode(br#"{"alg":"RS256","kid":"k"}"#),
        engine.encode(payload.to_string()),
        engine.encode(b"signature")
    )
}

/// A hub Secret: built with the agent's token and annotation, changed by the chained calls.
struct SecretFixture(Secret);

fn a_secret() -> SecretFixture {
    SecretFixture(Secret {
        metadata: ObjectMeta {
            name: Some("robot".into()),
            annotations: Some(BTreeMap::from([(
                VALIDITY_ANNOTATION.to_owned(),
                "720h0m0s".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            TOKEN_KEY.to_owned(),
            ByteString(jwt(&subject(NS, "robot")).into_bytes()),
        )])),
        ..Secret::default()
    })
}

impl SecretFixture {
    fn token(mut self, token: &str) -> Self {
        self.0
            .data
            .get_or_insert_default()
            .insert(TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec()));
        self
    }

    fn without_token(mut self) -> Self {
        self.0.data = None;
        self
    }

    fn asked_validity(mut self, validity: Option<&str>) -> Self {
        self.0.metadata.annotations =
            validity.map(|v| BTreeMap::from([(VALIDITY_ANNOTATION.to_owned(), v.to_owned())]));
        self
    }
}

/// A status reporting a token refreshed at second 0 that expires at 30 days.
fn status() -> Status {
    reported(
        None,
        "robot",
        Some(Issued {
            at: at(0),
            expires: at(30 * DAY as i64),
        }),
        at(0),
    )
}

fn judged(secret: Option<&Secret>, status: Option<&Status>, now: i64) -> Verdict {
    judge(&Current {
        subject: &subject(NS, "robot"),
        validity: Duration::from_secs(30 * DAY),
        status,
        secret,
        now: at(now),
    })
}

fn refreshes(verdict: Verdict) -> Refresh {
    match verdict {
        Verdict::Refresh(why) => why,
        Verdict::Review(_) => panic!("kept for review"),
    }
}

#[test]
fn a_missing_secret_is_written_with_a_new_token() {
    assert_eq!(refreshes(judged(None, Some(&status()), 10)), Refresh::NoSecret);
}

#[test]
fn a_token_never_reported_in_the_status_is_replaced() {
    let secret = a_secret().0;
    assert_eq!(refreshes(judged(Some(&secret), None, 10)), Refresh::NotReported);
    let mut no_expiry = status();
    no_expiry.expiration_timestamp = None;
    assert_eq!(
        refreshes(judged(Some(&secret), Some(&no_expiry), 10)),
        Refresh::NotReported
    );
}

#[test]
fn a_fresh_token_of_the_right_subject_goes_to_review() {
    let secret = a_secret().0;
    assert_eq!(
        judged(Some(&secret), Some(&status()), 10),
        Verdict::Review(jwt(&subject(NS, "robot")))
    );
}

#[test]
fn a_token_is_replaced_once_less_than_a_fifth_of_its_lifetime_is_left() {
    let secret = a_secret().0;
    // 30 days: replaced after day 24.
    let threshold = 24 * DAY as i64;
    assert!(matches!(
        judged(Some(&secret), Some(&status()), threshold),
        Verdict::Review(_)
    ));
    assert_eq!(
        refreshes(judged(Some(&secret), Some(&status()), threshold + 1)),
        Refresh::Expiring
    );
    assert_eq!(
        refreshes(judged(Some(&secret), Some(&status()), 40 * DAY as i64)),
        Refresh::Expiring
    );
}

#[test]
fn the_lifetime_is_the_managed_clusters_figure_not_the_validity_asked_for() {
    // A distribution that caps tokens at one day: replaced after 0.8 day, not after 24 days.
    let secret = a_secret().0;
    let capped = reported(
        None,
        "robot",
        Some(Issued {
            at: at(0),
            expires: at(DAY as i64),
        }),
        at(0),
    );
    assert!(matches!(
        judged(Some(&secret), Some(&capped), 69_000),
        Verdict::Review(_)
    ));
    assert_eq!(
        refreshes(judged(Some(&secret), Some(&capped), 69_200)),
        Refresh::Expiring
    );
}

#[test]
fn a_token_of_another_service_account_is_replaced() {
    let secret = a_secret().token(&jwt(&subject(NS, "someone-else"))).0;
    assert_eq!(
        refreshes(judged(Some(&secret), Some(&status()), 10)),
        Refresh::OtherSubject(subject(NS, "someone-else"))
    );
    let other_namespace = a_secret().token(&jwt(&subject("default", "robot"))).0;
    assert!(matches!(
        refreshes(judged(Some(&other_namespace), Some(&status()), 10)),
        Refresh::OtherSubject(_)
    ));
}

#[test]
fn a_missing_or_unreadable_token_is_replaced_rather_than_reported_as_an_error_forever() {
    for secret in [
        a_secret().without_token().0,
        a_secret().token("").0,
        a_secret().token("not-a-jwt").0,
        a_secret().token("a.!!!.c").0,
        a_secret()
            .token(&format!(
                "a.{}.c",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("{}")
            ))
            .0,
    ] {
        assert!(
            matches!(
                refreshes(judged(Some(&secret), Some(&status()), 10)),
                Refresh::Unreadable(_)
            ),
            "{secret:?}"
        );
    }
}

#[test]
fn a_token_asked_for_with_another_validity_is_replaced() {
    let shorter = a_secret().asked_validity(Some("1h")).0;
    assert_eq!(
        refreshes(judged(Some(&shorter), Some(&status()), 10)),
        Refresh::ValidityChanged
    );
    let unknown = a_secret().asked_validity(None).0;
    assert_eq!(
        refreshes(judged(Some(&unknown), Some(&status()), 10)),
        Refresh::ValidityChanged
    );
    // The same duration spelt otherwise is the same validity.
    let same = a_secret().asked_validity(Some("720h")).0;
    assert!(matches!(
        judged(Some(&same), Some(&status()), 10),
        Verdict::Review(_)
    ));
}

fn review(authenticated: bool, user: &str) -> TokenReviewStatus {
    TokenReviewStatus {
        authenticated: Some(authenticated),
        user: Some(UserInfo {
            username: Some(user.to_owned()),
            ..UserInfo::default()
        }),
        ..TokenReviewStatus::default()
    }
}

#[test]
fn a_token_the_managed_cluster_rejects_is_replaced() {
    let me = subject(NS, "robot");
    assert_eq!(
        judge_review(Some(&review(false, "")), &me),
        Some(Refresh::Rejected)
    );
    assert_eq!(
        judge_review(Some(&TokenReviewStatus::default()), &me),
        Some(Refresh::Rejected)
    );
    assert_eq!(
        judge_review(None, &me),
        None,
        "no status: nothing learnt, the token is kept"
    );
}

#[test]
fn a_token_the_managed_cluster_authenticates_as_another_user_is_replaced() {
    let me = subject(NS, "robot");
    assert_eq!(judge_review(Some(&review(true, &me)), &me), None);
    assert_eq!(
        judge_review(Some(&review(true, "system:serviceaccount:x:y")), &me),
        Some(Refresh::OtherSubject("system:serviceaccount:x:y".into()))
    );
}

#[test]
fn the_refresh_instant_is_four_fifths_of_the_lifetime() {
    assert_eq!(refresh_at(at(1000), at(2000)), at(1800));
    assert_eq!(refresh_at(at(0), at(600)), at(480));
    // An expiry before the refresh is already due.
    assert!(refresh_at(at(1000), at(500)) < at(1000));
}

#[test]
fn validities_are_go_durations_of_at_least_a_second() {
    assert_eq!(go_duration("8640h0m0s"), Ok(Duration::from_secs(8640 * 3600)));
    assert_eq!(go_duration("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(go_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(go_duration("90.5s"), Ok(Duration::from_secs(90)));
    for bad in ["0s", "0", "-1h", "500ms", "a week", ""] {
        assert!(go_duration(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn the_subject_is_the_service_account_user_name() {
    assert_eq!(
        subject(NS, "robot"),
        "system:serviceaccount:open-cluster-management-agent-addon:robot"
    );
    assert_eq!(token_subject(&jwt("x")), Ok("x".to_owned()));
}

#[test]
fn a_new_token_is_reported_with_both_conditions_true_and_its_times() {
    let status = reported(
        None,
        "robot",
        Some(Issued {
            at: Timestamp::from_millisecond(5_500).unwrap(),
            expires: at(605),
        }),
        Timestamp::from_millisecond(5_700).unwrap(),
    );
    let summary: Vec<(&str, &str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("SecretCreated", "True", "SecretCreated"),
            ("TokenReported", "True", "TokenReported")
        ]
    );
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.last_transition_time == Time(at(5)))
    );
    assert_eq!(status.expiration_timestamp, Some(Time(at(605))));
    assert_eq!(
        status.token_secret_ref,
        Some(SecretRef {
            name: "robot".into(),
            last_refresh_timestamp: Time(at(5)),
        })
    );
}

#[test]
fn a_kept_token_leaves_a_reported_status_unchanged() {
    let before = status();
    assert_eq!(reported(Some(&before), "robot", None, at(50_000)), before);
}

#[test]
fn a_failure_sets_token_reported_false_and_keeps_the_rest() {
    let before = status();
    let after = failed(Some(&before), "serviceaccounts \"robot\" is forbidden", at(100));
    let token_reported = after
        .conditions
        .iter()
        .find(|c| c.type_ == "TokenReported")
        .unwrap();
    assert_eq!(token_reported.status, "False");
    assert_eq!(token_reported.reason, "TokenReportFailed");
    assert_eq!(token_reported.message, "serviceaccounts \"robot\" is forbidden");
    assert_eq!(token_reported.last_transition_time, Time(at(100)));
    let secret_created = after
        .conditions
        .iter()
        .find(|c| c.type_ == "SecretCreated")
        .unwrap();
    assert_eq!(secret_created.status, "True");
    assert_eq!(after.expiration_timestamp, before.expiration_timestamp);
    assert_eq!(after.token_secret_ref, before.token_secret_ref);

    // Recovering moves the transition time again and clears the message.
    let recovered = reported(Some(&after), "robot", None, at(200));
    let token_reported = recovered
        .conditions
        .iter()
        .find(|c| c.type_ == "TokenReported")
        .unwrap();
    assert_eq!(
        (token_reported.status.as_str(), token_reported.message.as_str()),
        ("True", "")
    );
    assert_eq!(token_reported.last_transition_time, Time(at(200)));
}

#[test]
fn a_first_failure_reports_only_token_reported() {
    let status = failed(None, "boom", at(1));
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(status.conditions[0].type_, "TokenReported");
    assert!(status.token_secret_ref.is_none());
}
