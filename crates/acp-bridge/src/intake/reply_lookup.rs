//! Asks a relay, in one query, which of a batch of public events from
//! before this start the bot has replied to (see `before_start`).
//!
//! The relay link's read of the bot's newest replies at connection
//! (`own_replies`) covers a quiet bot; this covers the rest by id: when a
//! relay has delivered its stored events, the public mentions and commands
//! from before this start that the store did not know are looked up with
//! one `authors=[bot], #e=[ids]` query, bounded by
//! [`REPLY_LOOKUP_TIMEOUT`]. The query runs in a task of its own: the
//! intake goes on with live events meanwhile, and takes the result from
//! [`ReplyLookup::finished`].
//!
//! Only a reply's NIP-10 `reply` marker or `q` tag counts as an answer: a
//! `root` tag names a thread the bot may have answered someone else in.
//! And only a reply whose id and signature we verified ourselves: the SDK's
//! verification cache is keyed by id alone, so a relay could send a known
//! reply's id with other tags and have a mention taken as answered.

use std::time::Duration;

use nostr_sdk::prelude::{Client, Event, EventId, Filter, Kind, PublicKey, RelayUrl, ReqExitPolicy};
use tokio::sync::mpsc;

use super::own_replies::answered_mentions;

/// How long a relay may take to answer which events the bot replied to;
/// past it, they are answered (a rare second answer beats a lost one).
pub(super) const REPLY_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A finished lookup: the events it was asked about, from `relay`, and
/// which of them the bot replied to (`Err`: the relay could not tell).
#[derive(Debug)]
pub(super) struct Looked {
    pub relay: RelayUrl,
    pub events: Vec<Event>,
    pub answered: Result<Vec<EventId>, String>,
}

/// Starts lookups and hands back their results.
#[derive(Debug)]
pub(super) struct ReplyLookup {
    client: Client,
    bot: PublicKey,
    /// The public kinds the bot answers in.
    kinds: Vec<Kind>,
    /// One result per lookup started, so unbounded only in name: the
    /// lookups are one per relay per catch-up.
    finished_tx: mpsc::UnboundedSender<Looked>,
    finished_rx: mpsc::UnboundedReceiver<Looked>,
}

impl ReplyLookup {
    pub(super) fn new(client: Client, bot: PublicKey, kinds: Vec<Kind>) -> Self {
        let (finished_tx, finished_rx) = mpsc::unbounded_channel();
        ReplyLookup {
            client,
            bot,
            kinds,
            finished_tx,
            finished_rx,
        }
    }

    /// Asks `relay` which of `events` the bot replied to, in a task.
    pub(super) fn start(&self, relay: RelayUrl, events: Vec<Event>) {
        let ids: Vec<EventId> = events.iter().map(|event| event.id).collect();
        let filter = Filter::new()
            .author(self.bot)
            .kinds(self.kinds.clone())
            .events(ids.iter().copied());
        let (client, bot, finished) = (self.client.clone(), self.bot, self.finished_tx.clone());
        tokio::spawn(async move {
            // From the relay itself: the client's fetch takes a refusal
            // (CLOSED) for an empty answer, which would pass for "no reply".
            let fetched = match client.relay(&relay).await {
                Ok(link) => link
                    .fetch_events(filter, REPLY_LOOKUP_TIMEOUT, ReqExitPolicy::ExitOnEOSE)
                    .await
                    .map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            let answered = fetched.map(|replies| answered_among(replies, bot, &ids));
            // The intake gone: we are stopping, and the events were never
            // journaled (the next start reads them again).
            let _ = finished.send(Looked {
                relay,
                events,
                answered,
            });
        });
    }

    /// The next finished lookup (pending while none runs).
    pub(super) async fn finished(&mut self) -> Looked {
        match self.finished_rx.recv().await {
            Some(looked) => looked,
            // Never: this holds a sender.
            None => std::future::pending().await,
        }
    }
}

/// Which of `asked` the bot's `replies` answer: by a NIP-10 `reply` marker
/// or a `q` tag, never by a `root` tag, and only replies by `bot` whose id
/// and signature verify.
fn answered_among(
    replies: impl IntoIterator<Item = Event>,
    bot: PublicKey,
    asked: &[EventId],
) -> Vec<EventId> {
    let mut answered: Vec<EventId> = replies
        .into_iter()
        .filter(|reply| reply.pubkey == bot && reply.verify().is_ok())
        .flat_map(|reply| answered_mentions(&reply.tags).collect::<Vec<_>>())
        .filter(|id| asked.contains(id))
        .collect();
    answered.sort();
    answered.dedup();
    answered
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{EventBuilder, Keys, Tag, TagKind, Tags};

    use super::*;

    #[test]
    fn only_a_reply_marker_or_a_quote_by_the_bot_counts_as_an_answer() {
        let (bot, someone) = (Keys::generate(), Keys::generate());
        let id = |byte: u8| EventId::from_slice(&[byte; 32]).expect("32 bytes");
        let (root, replied, quoted, other) = (id(1), id(2), id(3), id(4));
        let marked =
            |event: EventId, marker: &str| Tag::parse(["e", &event.to_hex(), "", marker]).expect("tag");
        let answer = EventBuilder::text_note("the answer")
            .tag(marked(root, "root"))
            .tag(marked(replied, "reply"))
            .tag(Tag::custom(TagKind::q(), [quoted.to_hex()]))
            .sign_with_keys(&bot)
            .expect("sign");
        let not_the_bot = EventBuilder::text_note("me too")
            .tag(marked(other, "reply"))
            .sign_with_keys(&someone)
            .expect("sign");

        let asked = [root, replied, quoted, other];
        let mut expected = vec![replied, quoted];
        expected.sort();
        assert_eq!(
            answered_among([answer, not_the_bot], bot.public_key(), &asked),
            expected
        );
    }

    /// The bot's comment (NIP-22) answers its parent `e`, never its root `E`.
    #[test]
    fn a_comment_answers_its_parent_not_its_root() {
        let bot = Keys::generate();
        let (root, parent) = (
            EventId::from_slice(&[1; 32]).expect("id"),
            EventId::from_slice(&[2; 32]).expect("id"),
        );
        let answer = EventBuilder::new(nostr_sdk::prelude::Kind::Comment, "the answer")
            .tag(Tag::parse(["E", &root.to_hex()]).expect("tag"))
            .tag(Tag::parse(["K", "11"]).expect("tag"))
            .tag(Tag::parse(["e", &parent.to_hex()]).expect("tag"))
            .tag(Tag::parse(["k", "1111"]).expect("tag"))
            .sign_with_keys(&bot)
            .expect("sign");
        assert_eq!(
            answered_among([answer], bot.public_key(), &[root, parent]),
            vec![parent]
        );
    }

    /// A relay resends the id and signature of one of the bot's replies
    /// with a `reply` marker it did not sign: the mention it names is not
    /// taken as answered.
    #[test]
    fn a_known_reply_resent_with_other_tags_answers_nothing() {
        let bot = Keys::generate();
        let asked = EventId::from_slice(&[7; 32]).expect("32 bytes");
        let genuine = EventBuilder::text_note("an answer elsewhere")
            .sign_with_keys(&bot)
            .expect("sign");
        let resent = Event::new(
            genuine.id,
            genuine.pubkey,
            genuine.created_at,
            genuine.kind,
            Tags::from_list(vec![
                Tag::parse(["e", &asked.to_hex(), "", "reply"]).expect("tag"),
            ]),
            genuine.content.clone(),
            genuine.sig,
        );
        assert!(answered_among([genuine, resent], bot.public_key(), &[asked]).is_empty());
    }
}
