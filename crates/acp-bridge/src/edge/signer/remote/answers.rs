//! The bunker's answers, read once and routed to their requests: one task
//! reads the pool's events, decrypts each answer once and hands it to the
//! request of its id (issue 39). Each request reading every answer itself
//! cost n decryptions per answer with n requests in flight.
//!
//! An answer from another key, one the app key cannot decrypt, or one to
//! no request waiting (late, after its request timed out, or never ours)
//! is dropped: it wakes and fails no request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nostr_connect::error::Error;
use nostr_sdk::JsonUtil;
use nostr_sdk::nips::nip46::NostrConnectMessage;
use nostr_sdk::prelude::{Event, Keys, Kind, PublicKey, RelayPoolNotification, Url, nip04, nip44};
use tokio::sync::{broadcast, oneshot};
use tokio_util::task::AbortOnDropHandle;

/// What a request gets: the answer's result, or the bunker's error.
pub(super) type Answer = Result<String, Error>;

/// The requests waiting for an answer, by id.
#[derive(Debug, Default)]
struct Waiting(Mutex<HashMap<String, oneshot::Sender<Answer>>>);

impl Waiting {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        // A map of senders has no invariant a panic could break.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task reading the answers, ended when the bunker drops it.
#[derive(Debug)]
pub(super) struct Reader {
    waiting: Arc<Waiting>,
    _task: AbortOnDropHandle<()>,
}

impl Reader {
    /// Reads `notifications` (subscribed before the first request goes
    /// out, so no answer comes before it) for answers from `bunker` to the
    /// `app` key.
    pub(super) fn start(
        notifications: broadcast::Receiver<RelayPoolNotification>,
        app: Keys,
        bunker: PublicKey,
    ) -> Self {
        let waiting = Arc::new(Waiting::default());
        let task = tokio::spawn(read(notifications, app, bunker, Arc::clone(&waiting)));
        Reader {
            waiting,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// Waits for the answer to request `id` from now on.
    pub(super) fn wait_for(&self, id: String) -> Wait {
        let (sender, answer) = oneshot::channel();
        self.waiting.lock().insert(id.clone(), sender);
        Wait {
            id,
            waiting: Arc::clone(&self.waiting),
            answer,
        }
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.lock().len()
    }
}

/// One request's wait; it leaves the map when dropped (answered, timed
/// out or abandoned), so a request that timed out leaks nothing.
#[derive(Debug)]
pub(super) struct Wait {
    id: String,
    waiting: Arc<Waiting>,
    answer: oneshot::Receiver<Answer>,
}

impl Wait {
    /// The answer; `None` when the reader ended (the pool shut down).
    pub(super) async fn answer(&mut self) -> Option<Answer> {
        (&mut self.answer).await.ok()
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

/// Routes each answer in `notifications` to its waiting request until the
/// pool's channel closes; then the requests still waiting are woken empty.
async fn read(
    mut notifications: broadcast::Receiver<RelayPoolNotification>,
    app: Keys,
    bunker: PublicKey,
    waiting: Arc<Waiting>,
) {
    loop {
        match notifications.recv().await {
            Ok(RelayPoolNotification::Event { event, .. }) => route(&app, bunker, &waiting, &event),
            Ok(RelayPoolNotification::Shutdown) | Err(broadcast::error::RecvError::Closed) => break,
            Ok(RelayPoolNotification::Message { .. }) => {}
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(
                    missed,
                    "signer: the answer reader fell behind the relay pool; requests whose answers were missed time out"
                );
            }
        }
    }
    waiting.lock().clear();
}

/// Hands `event` to the request it answers, if it is an answer to a
/// request waiting. An approval URL is logged and the request waits on.
fn route(app: &Keys, bunker: PublicKey, waiting: &Waiting, event: &Event) {
    let Some((id, result, error)) = open(app, bunker, event) else {
        return;
    };
    if result.as_deref() == Some("auth_url") {
        if waiting.lock().contains_key(&id) {
            match error.as_deref().map(Url::parse) {
                Some(Ok(auth_url)) => {
                    tracing::warn!(%auth_url, "signer: the remote signer asks for approval; open this URL to approve the daemon's requests");
                }
                _ => tracing::warn!("signer: the remote signer asks for approval with no URL it could read"),
            }
        }
        return;
    }
    let Some(request) = waiting.lock().remove(&id) else {
        tracing::debug!(event = %event.id, "signer: an answer to no request waiting (late, or not ours); dropped");
        return;
    };
    let answer = match (result, error) {
        (_, Some(error)) => Err(Error::Response(error)),
        (Some(result), None) => Ok(result),
        (None, None) => Err(Error::Response(
            "an answer with neither result nor error".to_owned(),
        )),
    };
    // The request may have timed out meanwhile: then nobody reads it.
    let _ = request.send(answer);
}

/// The id, result and error `event` carries, if it is an answer from the
/// bunker's key, NIP-44 (or NIP-04, older bunkers) to the app key.
fn open(app: &Keys, bunker: PublicKey, event: &Event) -> Option<(String, Option<String>, Option<String>)> {
    if event.kind != Kind::NostrConnect || event.pubkey != bunker || event.verify().is_err() {
        return None;
    }
    let secret = app.secret_key();
    let Ok(text) = nip44::decrypt(secret, &event.pubkey, &event.content)
        .or_else(|_| nip04::decrypt(secret, &event.pubkey, &event.content))
    else {
        tracing::debug!(event = %event.id, "signer: an answer the app key cannot decrypt; dropped");
        return None;
    };
    match NostrConnectMessage::from_json(text) {
        Ok(NostrConnectMessage::Response { id, result, error }) => Some((id, result, error)),
        _ => {
            tracing::debug!(event = %event.id, "signer: a message from the bunker that is no answer; dropped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::nips::nip46::{NostrConnectResponse, ResponseResult};
    use nostr_sdk::prelude::{EventBuilder, RelayUrl, SubscriptionId};

    use super::*;

    /// An answer event signed by `from`, encrypted to `to`, answering
    /// request `id` with `pong`.
    fn answer(from: &Keys, to: PublicKey, id: &str, error: Option<&str>) -> RelayPoolNotification {
        let response = match error {
            Some(error) => NostrConnectResponse::with_error(error),
            None => NostrConnectResponse::with_result(ResponseResult::Pong),
        };
        let message = NostrConnectMessage::response(id, response);
        let event = EventBuilder::nostr_connect(from, to, message)
            .expect("encrypt")
            .sign_with_keys(from)
            .expect("sign");
        notification(event)
    }

    fn notification(event: Event) -> RelayPoolNotification {
        RelayPoolNotification::Event {
            relay_url: RelayUrl::parse("ws://127.0.0.1:1").expect("url"),
            subscription_id: SubscriptionId::new("answers"),
            event: Box::new(event),
        }
    }

    /// Requests a and b wait; hostile events come first (another key's
    /// answer to a, a bunker event the app key cannot decrypt, an answer to
    /// a with a NIP-44 payload for another key, an answer to an unknown id),
    /// then b's answer, then a's (an error): each request gets its own.
    #[tokio::test]
    async fn answers_out_of_order_reach_their_requests_and_hostile_ones_wake_none() {
        let (app, bunker, stranger) = (Keys::generate(), Keys::generate(), Keys::generate());
        let (notifications, receiver) = broadcast::channel(64);
        let reader = Reader::start(receiver, app.clone(), bunker.public_key());
        let mut a = reader.wait_for("a".to_owned());
        let mut b = reader.wait_for("b".to_owned());

        let garbled = EventBuilder::new(Kind::NostrConnect, "not a ciphertext")
            .sign_with_keys(&bunker)
            .expect("sign");
        let hostile = [
            answer(&stranger, app.public_key(), "a", None),
            notification(garbled),
            answer(&bunker, stranger.public_key(), "a", None),
            answer(&bunker, app.public_key(), "unknown", None),
        ];
        for event in hostile {
            notifications.send(event).expect("the reader listens");
        }
        notifications
            .send(answer(&bunker, app.public_key(), "b", None))
            .expect("the reader listens");
        notifications
            .send(answer(&bunker, app.public_key(), "a", Some("Rejected")))
            .expect("the reader listens");

        let got_b = b.answer().await.expect("answered");
        let got_a = a.answer().await.expect("answered");
        println!("router: b got {got_b:?}, a got {got_a:?} after 4 hostile events");
        assert_eq!(got_b.expect("b's answer is a result"), "pong");
        assert!(
            matches!(got_a, Err(Error::Response(ref error)) if error == "Rejected"),
            "{got_a:?}"
        );
        drop((a, b));
        assert_eq!(reader.waiting(), 0, "answered requests leave the map");
    }

    #[tokio::test]
    async fn a_request_that_gave_up_leaves_no_waiter_and_its_late_answer_is_dropped() {
        let (app, bunker) = (Keys::generate(), Keys::generate());
        let (notifications, receiver) = broadcast::channel(64);
        let reader = Reader::start(receiver, app.clone(), bunker.public_key());
        let timed_out = reader.wait_for("late".to_owned());
        assert_eq!(reader.waiting(), 1);
        drop(timed_out);
        assert_eq!(reader.waiting(), 0, "a request that timed out leaks no waiter");

        // A late answer, then one to a request waiting now: the reader
        // dropped the first and goes on.
        let mut next = reader.wait_for("next".to_owned());
        for id in ["late", "next"] {
            notifications
                .send(answer(&bunker, app.public_key(), id, None))
                .expect("the reader listens");
        }
        let got = next.answer().await.expect("answered");
        assert_eq!(got.expect("a result"), "pong");
    }

    #[tokio::test]
    async fn the_requests_waiting_when_the_pool_closes_are_woken() {
        let (app, bunker) = (Keys::generate(), Keys::generate());
        let (notifications, receiver) = broadcast::channel(64);
        let reader = Reader::start(receiver, app, bunker.public_key());
        let mut waiting = reader.wait_for("a".to_owned());
        drop(notifications);
        assert!(
            waiting.answer().await.is_none(),
            "woken empty, not left to time out"
        );
    }
}
