//! A relay in the test process whose answer to each published event the
//! test chooses: OK, a refusal in the relay's own words (`blocked: …`), or
//! an OK held back until the test releases it. It keeps what it accepted
//! and serves it to subscriptions (stored events, EOSE, then live ones),
//! which is all the daemon and the people ask of a relay. It can also sit
//! on the queries the test picks (a profile lookup, say): their stored
//! events and EOSE wait until the test releases them, or refuse them
//! (`CLOSED`, as a relay that will not serve some kind refuses a REQ).
//!
//! The embedded relay cannot play these parts: its write policy words every
//! refusal itself and stalls the whole connection while it decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use nostr_sdk::prelude::*;
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::relay::RelayServer;

/// How the relay answers one published event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `OK true`, stored and passed on to subscribers.
    Accept,
    /// `OK false` with this message; not stored.
    Refuse(String),
    /// Stored and passed on, but the OK waits for [`PickyRelay::release`].
    Hold,
}

type Rule = Box<dyn Fn(&Event) -> Answer + Send + Sync>;
type QueryRule = Box<dyn Fn(&Filter) -> bool + Send + Sync>;

/// See the module doc. Stops when dropped.
pub struct PickyRelay {
    port: u16,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

struct Shared {
    rule: Mutex<Rule>,
    /// Every EVENT message received, in order (the same event once per
    /// time it was offered).
    received: Mutex<Vec<Event>>,
    stored: Mutex<Vec<Event>>,
    /// Returned for every query, whatever its filters (a lying relay).
    smuggled: Mutex<Vec<Event>>,
    live: broadcast::Sender<Event>,
    released: CancellationToken,
    /// Queries with a filter this picks are answered only on release.
    held_queries: Mutex<QueryRule>,
    queries_released: CancellationToken,
    /// Queries with a filter this picks are closed with its message.
    refused_queries: Mutex<Option<(QueryRule, String)>>,
}

impl std::fmt::Debug for PickyRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PickyRelay").field("port", &self.port).finish()
    }
}

impl RelayServer for PickyRelay {
    fn port(&self) -> u16 {
        self.port
    }
}

impl PickyRelay {
    /// Listens on a free loopback port, accepting everything until
    /// [`PickyRelay::answer_with`] says otherwise.
    pub async fn start() -> Self {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let shared = Arc::new(Shared {
            rule: Mutex::new(Box::new(|_: &Event| Answer::Accept)),
            received: Mutex::new(Vec::new()),
            stored: Mutex::new(Vec::new()),
            smuggled: Mutex::new(Vec::new()),
            live: broadcast::channel(1024).0,
            released: CancellationToken::new(),
            held_queries: Mutex::new(Box::new(|_: &Filter| false)),
            queries_released: CancellationToken::new(),
            refused_queries: Mutex::new(None),
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, Arc::clone(&shared), stop.clone()));
        PickyRelay { port, shared, stop }
    }

    /// How the relay answers from now on.
    pub fn answer_with(&self, rule: impl Fn(&Event) -> Answer + Send + Sync + 'static) {
        *self.shared.rule.lock().unwrap() = Box::new(rule);
    }

    /// From now on, answers every query that names no author (the
    /// daemon's reads of a thread; the test's people ask for an author's
    /// events) with `event` too, whether or not it matches the query's
    /// filters: a relay passing off an event as something it is not.
    pub fn smuggle(&self, event: Event) {
        self.shared.smuggled.lock().unwrap().push(event);
    }

    /// Sends every held OK, and answers later held events at once.
    pub fn release(&self) {
        self.shared.released.cancel();
    }

    /// From now on, a query (REQ) with a filter that `pick` picks gets its
    /// stored events and EOSE only once [`PickyRelay::release_queries`] is
    /// called (live events still reach it).
    pub fn hold_queries(&self, pick: impl Fn(&Filter) -> bool + Send + Sync + 'static) {
        *self.shared.held_queries.lock().unwrap() = Box::new(pick);
    }

    /// Answers every held query, and later ones at once.
    pub fn release_queries(&self) {
        self.shared.queries_released.cancel();
    }

    /// From now on, a query (REQ) with a filter that `pick` picks is
    /// answered `CLOSED` with `why` (a machine-readable prefix and text).
    pub fn refuse_queries(&self, pick: impl Fn(&Filter) -> bool + Send + Sync + 'static, why: &str) {
        *self.shared.refused_queries.lock().unwrap() = Some((Box::new(pick), why.to_owned()));
    }

    /// Every EVENT message received so far that `pick` picks, in order.
    pub fn received(&self, pick: impl Fn(&Event) -> bool) -> Vec<Event> {
        let received = self.shared.received.lock().unwrap();
        received.iter().filter(|event| pick(event)).cloned().collect()
    }
}

impl Drop for PickyRelay {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (shared, stop) = (Arc::clone(&shared), stop.clone());
        tokio::spawn(async move {
            let Ok(socket) = tokio_tungstenite::accept_async(stream).await else {
                return;
            };
            tokio::select! {
                () = stop.cancelled() => {}
                () = serve(socket, shared) => {}
            }
        });
    }
}

/// One connection: answers its messages and passes on new events to its
/// subscriptions. Held OKs go out through `answers`, so that holding one
/// never stalls the connection.
async fn serve(socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, shared: Arc<Shared>) {
    let (mut sink, mut stream) = socket.split();
    let mut live = shared.live.subscribe();
    let mut subscriptions: HashMap<SubscriptionId, Vec<Filter>> = HashMap::new();
    let (answers, mut held_answers) = tokio::sync::mpsc::unbounded_channel::<RelayMessage<'static>>();
    loop {
        let outgoing: Vec<RelayMessage<'static>> = tokio::select! {
            message = stream.next() => {
                let Some(Ok(Message::Text(text))) = message else {
                    match message {
                        Some(Ok(_)) => continue,
                        _ => return,
                    }
                };
                let Ok(message) = ClientMessage::from_json(text.as_bytes()) else { continue };
                handle(&shared, &mut subscriptions, message, &answers)
            }
            Ok(event) = live.recv() => subscriptions
                .iter()
                .filter(|(_, filters)| filters.iter().any(|filter| filter.match_event(&event, MatchEventOptions::new())))
                .map(|(id, _)| RelayMessage::event(id.clone(), event.clone()))
                .collect(),
            Some(answer) = held_answers.recv() => vec![answer],
        };
        for message in outgoing {
            if sink.send(Message::text(message.as_json())).await.is_err() {
                return;
            }
        }
    }
}

fn handle(
    shared: &Arc<Shared>,
    subscriptions: &mut HashMap<SubscriptionId, Vec<Filter>>,
    message: ClientMessage<'_>,
    answers: &tokio::sync::mpsc::UnboundedSender<RelayMessage<'static>>,
) -> Vec<RelayMessage<'static>> {
    match message {
        ClientMessage::Event(event) => {
            let event = event.into_owned();
            shared.received.lock().unwrap().push(event.clone());
            let answer = (shared.rule.lock().unwrap())(&event);
            match answer {
                Answer::Refuse(why) => vec![RelayMessage::ok(event.id, false, why)],
                Answer::Accept => {
                    store(shared, &event);
                    vec![RelayMessage::ok(event.id, true, "")]
                }
                Answer::Hold => {
                    store(shared, &event);
                    let (shared, answers, id) = (Arc::clone(shared), answers.clone(), event.id);
                    tokio::spawn(async move {
                        shared.released.cancelled().await;
                        let _ = answers.send(RelayMessage::ok(id, true, ""));
                    });
                    Vec::new()
                }
            }
        }
        ClientMessage::Req {
            subscription_id,
            filters,
        } => {
            let filters: Vec<Filter> = filters.into_iter().map(|filter| filter.into_owned()).collect();
            let subscription_id = subscription_id.into_owned();
            if let Some((pick, why)) = &*shared.refused_queries.lock().unwrap()
                && filters.iter().any(pick)
            {
                return vec![RelayMessage::closed(subscription_id, why.clone())];
            }
            let stored = shared.stored.lock().unwrap();
            let mut messages: Vec<RelayMessage<'static>> = stored
                .iter()
                .filter(|event| {
                    filters
                        .iter()
                        .any(|filter| filter.match_event(event, MatchEventOptions::new()))
                })
                .chain(
                    shared
                        .smuggled
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|_| filters.iter().all(|filter| filter.authors.is_none())),
                )
                .map(|event| RelayMessage::event(subscription_id.clone(), event.clone()))
                .collect();
            messages.push(RelayMessage::eose(subscription_id.clone()));
            let held = filters
                .iter()
                .any(|filter| (shared.held_queries.lock().unwrap())(filter));
            subscriptions.insert(subscription_id, filters);
            if held && !shared.queries_released.is_cancelled() {
                let (released, answers) = (shared.queries_released.clone(), answers.clone());
                tokio::spawn(async move {
                    released.cancelled().await;
                    for message in messages {
                        let _ = answers.send(message);
                    }
                });
                return Vec::new();
            }
            messages
        }
        ClientMessage::Close(subscription_id) => {
            subscriptions.remove(&*subscription_id);
            Vec::new()
        }
        _ => Vec::new(),
    }
}

/// Keeps a new event and passes it on; an event already kept is not
/// passed on again.
fn store(shared: &Shared, event: &Event) {
    let mut stored = shared.stored.lock().unwrap();
    if stored.iter().all(|kept| kept.id != event.id) {
        stored.push(event.clone());
        let _ = shared.live.send(event.clone());
    }
}
