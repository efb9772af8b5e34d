use nostr_sdk::prelude::{EventBuilder, JsonUtil, Keys, Kind, Tag, Timestamp};

use super::*;

const URL: &str = "ws://127.0.0.1:1";

fn url(text: &str) -> RelayUrl {
    RelayUrl::parse(text).expect("a relay URL")
}

fn route(taps: &RelayTaps, bot: &Keys, capacity: usize, sdk_registered: bool) -> (TapReceiver, RouteGuard) {
    taps.route(
        &url(URL),
        RouteSpec {
            subscriptions: vec![
                Subscriptions::Exactly("mentions".to_owned()),
                Subscriptions::StartingWith("once-".to_owned()),
            ],
            capacity,
            drop_authored_by: Some(bot.public_key()),
            sdk_registered,
            intake: true,
        },
    )
}

fn event_frame(subscription: &str, event: &Event) -> String {
    format!(r#"["EVENT","{subscription}",{}]"#, event.as_json())
}

fn note(author: &Keys, text: &str) -> Event {
    EventBuilder::text_note(text)
        .sign_with_keys(author)
        .expect("sign")
}

async fn next(receiver: &mut TapReceiver) -> Received {
    tokio::time::timeout(std::time::Duration::from_secs(5), receiver.recv())
        .await
        .expect("a frame was routed")
}

#[tokio::test]
async fn a_routed_event_reaches_its_route_and_not_the_sdk() {
    let (taps, bot, author) = (RelayTaps::default(), Keys::generate(), Keys::generate());
    let (mut receiver, _guard) = route(&taps, &bot, 8, true);
    let event = note(&author, "hello");
    let routes = taps.relay(&url(URL));
    assert_eq!(routes.sift(event_frame("mentions", &event)), None);
    assert_eq!(routes.sift(event_frame("once-7", &event)), None);
    for _ in 0..2 {
        let Received::Frame(Tapped::Event(read)) = next(&mut receiver).await else {
            panic!("the event");
        };
        assert_eq!(*read, event);
    }
}

#[tokio::test]
async fn frames_of_other_subscriptions_and_other_labels_go_on_to_the_sdk_untouched() {
    let (taps, bot, author) = (RelayTaps::default(), Keys::generate(), Keys::generate());
    let (_receiver, _guard) = route(&taps, &bot, 8, true);
    // The SDK hands the transport the URL with a trailing slash.
    let routes = taps.relay(&url("ws://127.0.0.1:1/"));
    let other = event_frame("a1b2c3", &note(&author, "not ours"));
    assert_eq!(routes.sift(other.clone()), Some(other));
    for frame in [
        r#"["OK","ab",true,""]"#,
        r#"["AUTH","c"]"#,
        r#"["EOSE","a1b2c3"]"#,
    ] {
        assert_eq!(routes.sift(frame.to_owned()).as_deref(), Some(frame));
    }
    // Another relay's routes are its own.
    let elsewhere = event_frame("mentions", &note(&author, "x"));
    assert_eq!(
        taps.relay(&url("ws://127.0.0.1:2")).sift(elsewhere.clone()),
        Some(elsewhere)
    );
}

#[tokio::test]
async fn the_bots_own_events_are_dropped_and_the_next_frame_still_comes() {
    let (taps, bot) = (RelayTaps::default(), Keys::generate());
    let (mut receiver, _guard) = route(&taps, &bot, 8, true);
    let routes = taps.relay(&url(URL));
    assert_eq!(
        routes.sift(event_frame("mentions", &note(&bot, "my own reply"))),
        None
    );
    assert_eq!(
        routes.sift(r#"["EOSE","mentions"]"#.to_owned()).as_deref(),
        Some(r#"["EOSE","mentions"]"#)
    );
    assert!(
        matches!(next(&mut receiver).await, Received::Frame(Tapped::EndOfStored(id)) if id.as_str() == "mentions"),
        "the own event was dropped: the EOSE after it comes first"
    );
}

#[tokio::test]
async fn end_and_close_go_to_the_sdk_only_when_it_registered_the_subscription() {
    let (taps, bot) = (RelayTaps::default(), Keys::generate());
    let (mut receiver, _guard) = route(&taps, &bot, 8, false);
    let routes = taps.relay(&url(URL));
    assert_eq!(routes.sift(r#"["EOSE","once-1"]"#.to_owned()), None);
    assert_eq!(
        routes.sift(r#"["CLOSED","once-2","auth-required: who?"]"#.to_owned()),
        None
    );
    assert!(matches!(
        next(&mut receiver).await,
        Received::Frame(Tapped::EndOfStored(_))
    ));
    assert!(matches!(
        next(&mut receiver).await,
        Received::Frame(Tapped::Closed { message, .. }) if message == "auth-required: who?"
    ));
}

#[tokio::test]
async fn expired_unreadable_and_oversized_events_are_dropped() {
    let (taps, bot, author) = (RelayTaps::default(), Keys::generate(), Keys::generate());
    let (mut receiver, _guard) = route(&taps, &bot, 8, true);
    let routes = taps.relay(&url(URL));
    let expired = EventBuilder::text_note("gone")
        .tag(Tag::expiration(Timestamp::from_secs(1)))
        .sign_with_keys(&author)
        .expect("sign");
    assert_eq!(routes.sift(event_frame("mentions", &expired)), None);
    assert_eq!(
        routes.sift(r#"["EVENT","mentions",{"kind":"nine"}]"#.to_owned()),
        None
    );
    let too_many_tags = EventBuilder::new(Kind::TextNote, "tags")
        .tags((0..2_001).map(|n| Tag::hashtag(format!("t{n}"))))
        .sign_with_keys(&author)
        .expect("sign");
    assert_eq!(routes.sift(event_frame("mentions", &too_many_tags)), None);
    let huge = note(&author, &"x".repeat(LIMITS.messages.max_size.unwrap() as usize));
    assert_eq!(routes.sift(event_frame("mentions", &huge)), None);
    let fine = note(&author, "fine");
    routes.sift(event_frame("mentions", &fine));
    assert!(
        matches!(next(&mut receiver).await, Received::Frame(Tapped::Event(read)) if *read == fine),
        "only the event within the limits came through"
    );
}

#[tokio::test]
async fn a_full_route_drops_the_frame_says_it_lagged_and_holds_twice_as_much_after() {
    let (taps, bot, author) = (RelayTaps::default(), Keys::generate(), Keys::generate());
    let (mut receiver, _guard) = route(&taps, &bot, 1, true);
    let routes = taps.relay(&url(URL));
    let notes: Vec<Event> = (0..4).map(|n| note(&author, &format!("note {n}"))).collect();
    routes.sift(event_frame("mentions", &notes[0]));
    routes.sift(event_frame("mentions", &notes[1]));
    assert!(matches!(next(&mut receiver).await, Received::Lagged));
    assert!(matches!(next(&mut receiver).await, Received::Frame(Tapped::Event(read)) if *read == notes[0]));
    // The replay the lag asks for fits now: two frames, no lag.
    routes.sift(event_frame("mentions", &notes[2]));
    routes.sift(event_frame("mentions", &notes[3]));
    for expected in &notes[2..] {
        assert!(
            matches!(next(&mut receiver).await, Received::Frame(Tapped::Event(read)) if *read == *expected),
            "no lag: the route holds two now"
        );
    }
}

#[tokio::test]
async fn a_dropped_guard_hands_the_subscriptions_back_to_the_sdk() {
    let (taps, bot, author) = (RelayTaps::default(), Keys::generate(), Keys::generate());
    let (_receiver, guard) = route(&taps, &bot, 8, true);
    drop(guard);
    let frame = event_frame("mentions", &note(&author, "after"));
    assert_eq!(taps.relay(&url(URL)).sift(frame.clone()), Some(frame));
}
