//! Core NATS: publish/subscribe and request/reply ride through.

use crate::harness::*;

#[test]
fn core_pub_and_sub_ride_through() {
    let Some(r) = ride(&[
        "pub",
        "--sub",
        "1",
        "--duration",
        "8s",
        "--rate",
        "2000",
        "--subject",
        "ride.core",
    ]) else {
        return;
    };
    let f = every_role_resumes(&r, &["pub", "sub"]);
    // The publish whose write found the connection gone is one failure (paced: each
    // publish is written at once); the backlog of the outage is sent after the restart.
    let roles = r.json["roles"].as_array().unwrap();
    let role = |name: &str| roles.iter().find(|x| x["role"] == name).unwrap().clone();
    assert_eq!(
        role("pub")["errors_by_kind"]["disconnected"].as_u64(),
        Some(1),
        "{}",
        r.ctx
    );
    let (sent, got) = (role("pub")["ops"].as_u64(), role("sub")["ops"].as_u64());
    assert!(got <= sent && got > Some(0), "{}", r.ctx);
    assert!(f["ops_lost"].as_u64() >= Some(1), "{f}");
}

#[test]
fn request_reply_rides_through_and_lost_replies_time_out() {
    let Some(r) = ride(&[
        "request",
        "--reply",
        "1",
        "--window",
        "8",
        "--duration",
        "8s",
        "--rate",
        "500",
        "--subject",
        "ride.svc",
    ]) else {
        return;
    };
    let f = every_role_resumes(&r, &["request", "reply"]);
    let timeouts = r.json["clients"][0]["errors_by_kind"]["timeout"]
        .as_u64()
        .unwrap_or(0);
    assert!(timeouts > 0, "lost replies counted as timeouts\n{}", r.ctx);
    assert!(f["timeouts"].as_u64() >= Some(1), "{f}");
}
