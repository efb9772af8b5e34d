//! Thread context for a turn (`--thread-context N`): the thread's last
//! messages that the conversation's agent session has not seen, fetched
//! from the relay once, before the turn's first prompt, and quoted ahead of
//! it with each author's standing.
//!
//! What a thread is follows the conversation: a note thread is its root and
//! the kind-1 replies whose NIP-10 root (or reply, absent a root) is that
//! root; a comment thread (NIP-22) is its root and the comments of its
//! root scope (`A`, `E` or `I`); a group conversation is its channel's
//! chat (kinds 9, 11 and 1111 with its `h` tag, the kinds this codebase
//! keys group conversations by).
//! DMs get none: the relay holds only gift wraps. Left out: the turn's own
//! mentions, every event the journal took in (mentions already prompted,
//! or refused), and the bot's own messages. A new session (after `!rotate`,
//! or one the agent lost) gets the thread again from its last messages,
//! still without the bot's exchange (the mentions it was prompted with and
//! its answers): `!rotate` asks for a fresh start, and handing the old
//! exchange back would undo it.
//!
//! Only the heard reach the agent: by default (`--thread-context-from
//! heard`) a message is quoted only when the author gate would hear its
//! author in this conversation, as decided by the gate's own rules
//! ([`GateRules::heard_now`]: the owner, the allowlist, siblings proven by
//! an attestation on the message or in the gate's cache of profiles). An
//! author the gate could only place after a profile lookup is left out:
//! the context never waits for one. `anyone` quotes everyone, a choice the
//! operator makes knowing that any reader of the thread can then write
//! into the agent's prompt.
//!
//! Nothing the relay returns is taken on its word: each event must be of a
//! conversation kind, in this very thread, not dated in the future, and
//! signed (checked here, for the quoted ones only: the read comes through
//! the relay tap, which verifies nothing, and the bot's own messages are
//! dropped there unread).
//! Every query carries a limit. The context is bounded in bytes: each
//! message cut at `--max-content-bytes`, the block at
//! `--thread-context-bytes`, the newest messages kept first.
//!
//! The session's mark moves only once the agent accepted the prompt that
//! carried the context ([`PendingMark::commit`]): a prompt that failed is
//! retried with the context again.
//!
//! Runs on the turn's driver task, never on the intake's or the heart's:
//! the fetch is bounded by [`CONTEXT_FETCH_TIMEOUT`], and a timeout or a
//! relay failure costs the context (one log line), never the turn.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use acp_bridge_core::comment::CommentScope;
use acp_bridge_core::mention::{self, ConversationKey, Mention, Thread, short_npub};
use acp_bridge_core::prompt::{self, Earlier};
use acp_bridge_core::standing::Standing;
use clap::ValueEnum;
use nostr_sdk::prelude::{
    Alphabet, Client, Event, EventId, Filter, Kind, PublicKey, RelayUrl, SingleLetterTag, Timestamp,
};

use crate::base::clock_skew::MAX_FUTURE_SKEW_SECS;
use crate::base::flags::{ConfigError, flag_defaults, refuse};
use crate::edge::relay_tap::{self, RelayTaps};
use crate::policy::gate::{AuthorFacts, GateRules};
use crate::state::ledger::Ledger;
use crate::state::store::{ContextMarks, Store};
use crate::telemetry::metrics;

/// How long the relay may take to return a thread's earlier messages.
pub(crate) const CONTEXT_FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Group chat kinds: chat message, thread, comment.
const GROUP_KINDS: [u16; 3] = [9, 11, 1111];
/// Default of `--thread-context-bytes`: about 8,000 tokens, room for ten
/// long chat messages, small beside any model's window.
const DEFAULT_CONTEXT_BYTES: usize = 32 * 1024;
/// Least `--thread-context-bytes` accepted: one short message and its framing.
const MIN_CONTEXT_BYTES: usize = 1024;
/// A message cut to fit the block's budget keeps at least this much, or is
/// left out: a few words of a message mislead more than they inform.
const MIN_CUT_MESSAGE_BYTES: usize = 256;

/// Whose earlier messages are quoted (`--thread-context-from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContextFrom {
    /// Only authors the author gate hears in the conversation.
    Heard,
    /// Everyone in the thread: anyone who can post there can then write
    /// into the agent's prompt (prompt injection). An explicit choice.
    Anyone,
}

/// The thread context's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Turns")]
pub struct ContextArgs {
    /// Earlier thread messages a first prompt carries
    ///
    /// A turn's first prompt carries up to this many of its thread's
    /// earlier messages that the session has not seen, fetched from the
    /// relay, each with its author's standing (0 = none).
    #[arg(long, env = "ACP_BRIDGE_THREAD_CONTEXT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub thread_context: u32,

    /// Whose earlier messages it quotes: heard or anyone
    ///
    /// Whose earlier messages the thread context quotes: `heard` (only
    /// authors the author gate hears in the conversation) or `anyone`
    /// (every reader of the thread can then write into the agent's prompt:
    /// a prompt-injection risk, see docs/flags.md).
    #[arg(
        long,
        env = "ACP_BRIDGE_THREAD_CONTEXT_FROM",
        value_enum,
        default_value = "heard"
    )]
    pub thread_context_from: ContextFrom,

    /// Most bytes of thread context in one prompt
    ///
    /// Most bytes of thread context one prompt carries, framing included
    /// (each message is also cut at --max-content-bytes); the newest
    /// messages are kept first.
    #[arg(long, env = "ACP_BRIDGE_THREAD_CONTEXT_BYTES", default_value_t = DEFAULT_CONTEXT_BYTES, hide_short_help = true)]
    pub thread_context_bytes: usize,
}

impl Default for ContextArgs {
    fn default() -> Self {
        flag_defaults()
    }
}

/// How much of its thread a turn's first prompt quotes: [`ContextArgs`],
/// checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSettings {
    /// `--thread-context`: earlier messages at most (0: none).
    pub limit: usize,
    /// `--thread-context-from`.
    pub from: ContextFrom,
    /// `--thread-context-bytes`.
    pub block_bytes: usize,
}

impl Default for ContextSettings {
    /// The flags' defaults.
    fn default() -> Self {
        ContextArgs::default()
            .validate()
            .expect("the flags' defaults are valid")
    }
}

impl ContextSettings {
    /// What turns need to quote their thread, or `None` when
    /// `--thread-context` is 0; each message is cut at `message_bytes`
    /// (`--max-content-bytes`).
    pub(crate) fn for_turns(
        &self,
        client: &Client,
        taps: &RelayTaps,
        store: &Arc<Store>,
        bot: PublicKey,
        rules: &GateRules,
        message_bytes: usize,
    ) -> Option<ThreadContext> {
        (self.limit > 0).then(|| ThreadContext {
            client: client.clone(),
            taps: taps.clone(),
            ledger: Ledger::new(Arc::clone(store)),
            marks: ContextMarks::new(Arc::clone(store)),
            bot,
            rules: rules.clone(),
            from: self.from,
            limit: self.limit,
            message_bytes,
            block_bytes: self.block_bytes,
        })
    }
}

impl ContextArgs {
    pub(crate) fn validate(&self) -> Result<ContextSettings, ConfigError> {
        if self.thread_context_bytes < MIN_CONTEXT_BYTES {
            return Err(refuse(
                "--thread-context-bytes",
                format!(
                    "must be at least {MIN_CONTEXT_BYTES} (to turn thread context off, use --thread-context 0)"
                ),
            ));
        }
        Ok(ContextSettings {
            limit: self.thread_context as usize,
            from: self.thread_context_from,
            block_bytes: self.thread_context_bytes,
        })
    }
}

/// What a turn needs to fetch and frame its thread's context.
#[derive(Debug, Clone)]
pub(crate) struct ThreadContext {
    pub client: Client,
    /// The mention's relay is read through the tap (`relay_tap::fetch_once`).
    pub taps: RelayTaps,
    /// Which fetched events the journal took in (left out).
    pub ledger: Ledger,
    /// How far each conversation's session was given its thread.
    pub marks: ContextMarks,
    pub bot: PublicKey,
    /// The author gate's rules: who is heard, and how they stand.
    pub rules: GateRules,
    pub from: ContextFrom,
    /// `--thread-context`: earlier messages at most (never 0 here).
    pub limit: usize,
    /// `--max-content-bytes`: each quoted message is cut there.
    pub message_bytes: usize,
    /// `--thread-context-bytes`: the quoted messages, framing included.
    pub block_bytes: usize,
}

/// What a turn's first prompt carries of its thread.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// The context block; empty when there is nothing to quote.
    pub text: String,
    /// Where the session's mark moves once the agent accepted the prompt.
    pub mark: Option<PendingMark>,
    /// The messages it quotes.
    quoted: Vec<EventId>,
}

/// A session's next mark, not yet recorded: the prompt that carries the
/// context it stands for has not been accepted yet.
#[derive(Debug)]
pub(crate) struct PendingMark {
    marks: ContextMarks,
    conversation: ConversationKey,
    mark: Mark,
}

impl PendingMark {
    /// The agent accepted the prompt: the session has seen its context.
    pub(crate) fn commit(self) {
        if let Err(error) = self
            .marks
            .advance(&self.conversation, self.mark.at, &self.mark.ids_text())
        {
            tracing::warn!(%error, "cannot record the thread context given to the session");
        }
    }
}

/// What a session has seen of its thread: every event dated before `at`
/// (unix seconds), and of those dated `at`, the ones in `ids`. Relays
/// filter by whole seconds and event ids do not order events within one,
/// so the second's other events stay new until they are seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Mark {
    at: i64,
    ids: BTreeSet<String>,
}

impl Mark {
    /// From the store's row: the second and its ids, comma-separated (a
    /// single id or none in rows written before ids were listed).
    fn read(at: i64, ids: &str) -> Self {
        let ids = ids
            .split(',')
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .collect();
        Mark { at, ids }
    }

    fn ids_text(&self) -> String {
        self.ids.iter().map(String::as_str).collect::<Vec<_>>().join(",")
    }

    fn has_seen(&self, at: i64, id: &str) -> bool {
        at < self.at || (at == self.at && self.ids.contains(id))
    }

    /// The mark once `seen` (dates and ids) were seen as well.
    fn advanced(mut self, seen: impl IntoIterator<Item = (i64, String)>) -> Self {
        let seen: Vec<(i64, String)> = seen.into_iter().collect();
        if let Some(newest) = seen
            .iter()
            .map(|(at, _)| *at)
            .max()
            .filter(|newest| *newest > self.at)
        {
            self = Mark {
                at: newest,
                ids: BTreeSet::new(),
            };
        }
        let at = self.at;
        self.ids.extend(
            seen.into_iter()
                .filter(|(seen_at, _)| *seen_at == at)
                .map(|(_, id)| id),
        );
        self
    }
}

/// How much of a thread one read fetches and keeps.
#[derive(Debug)]
struct Reading {
    /// Only events from this second on (the session's mark).
    since: Option<i64>,
    /// The newest this many quoted messages at most.
    limit: usize,
    /// Leave out what the journal took in (the session saw it).
    leave_out_journaled: bool,
}

/// One read of a thread: the framed block and what it holds.
#[derive(Debug)]
struct Read {
    text: String,
    /// Date (unix seconds) and id of each message the block quotes.
    quoted: Vec<(i64, EventId)>,
    left_out: LeftOut,
    /// False when the thread needs no query (a DM, a new top-level note).
    asked_the_relay: bool,
}

impl Read {
    /// The line that says what the agent got and why the rest was left out.
    fn log(&self, message: &'static str) {
        let left_out = &self.left_out;
        let worth = !self.quoted.is_empty()
            || left_out.off_thread + left_out.unheard + left_out.bad_signature + left_out.over_budget > 0;
        crate::telemetry::info_when!(
            worth,
            quoted = self.quoted.len(),
            bytes = self.text.len(),
            off_thread = left_out.off_thread,
            unheard = left_out.unheard,
            bad_signature = left_out.bad_signature,
            over_budget = left_out.over_budget,
            "{message}"
        );
    }
}

/// What `read_thread` gives the agent.
#[derive(Debug)]
pub(crate) struct ThreadRead {
    /// The framed messages; empty when there are none.
    pub text: String,
    /// How many messages it quotes.
    pub quoted: usize,
}

/// The relay did not answer a thread read in time.
#[derive(Debug, thiserror::Error)]
#[error("the relay did not return the thread: {0}")]
pub(crate) struct ReadError(String);

/// Why fetched events were left out, for the log line that says what the
/// agent got.
#[derive(Debug, Default)]
struct LeftOut {
    off_thread: usize,
    unheard: usize,
    bad_signature: usize,
    over_budget: usize,
}

impl ThreadContext {
    /// The context block for a turn answering `batch`, and the mark the
    /// conversation's session reaches once the prompt carrying it is
    /// accepted; empty when there is nothing new, or the relay did not
    /// answer in time.
    pub(crate) async fn for_turn(&self, batch: &[Mention]) -> Gathered {
        let Some(first) = batch.first() else {
            return Gathered::default();
        };
        let mark = self
            .marks
            .of(&first.conversation)
            .ok()
            .flatten()
            .map(|(at, ids)| Mark::read(at, &ids));
        let reading = Reading {
            since: mark.as_ref().map(|mark| mark.at),
            limit: self.limit,
            leave_out_journaled: true,
        };
        let is_new = |event: &Event| self.is_new_context(event, batch, mark.as_ref());
        let read = match self.read(first, &reading, is_new).await {
            Ok(read) => read,
            Err(error) => {
                metrics::thread_context("failed");
                tracing::warn!(%error, "no thread context: the relay did not answer; prompting without it");
                return Gathered::default();
            }
        };
        // The session sees the batch too: the next turn's fetch starts at
        // the newest second it saw, so it reads only what came since.
        let seen_batch = batch
            .iter()
            .map(|mention| (mention.created_at.as_secs() as i64, mention.event_id.to_hex()));
        let seen_context = read.quoted.iter().map(|(at, id)| (*at, id.to_hex()));
        let quoted = read.quoted.iter().map(|(_, id)| *id).collect();
        let next = mark
            .clone()
            .unwrap_or_default()
            .advanced(seen_batch.chain(seen_context));
        let pending = (Some(&next) != mark.as_ref()).then(|| PendingMark {
            marks: self.marks.clone(),
            conversation: first.conversation.clone(),
            mark: next,
        });
        if read.asked_the_relay {
            let kept = read.quoted.len();
            metrics::thread_context(if kept == 0 { "nothing_new" } else { "included" });
            read.log("thread context for the prompt");
        }
        Gathered {
            text: read.text,
            mark: pending,
            quoted,
        }
    }

    /// Whether `gathered`, read a moment ago (ahead of the prompt, beside
    /// the lease), still quotes nothing the journal took in since: a
    /// mention that arrived meanwhile joins the prompt as itself, and
    /// must not be quoted as well.
    pub(crate) fn still_new(&self, gathered: &Gathered) -> bool {
        match self.ledger.journaled_among(&gathered.quoted) {
            Ok(journaled) => journaled.is_empty(),
            Err(error) => {
                tracing::warn!(%error, "cannot check the thread context against the journal; reading it again");
                false
            }
        }
    }

    /// The thread of `mention` as the `read_thread` tool gives it: its
    /// newest `limit` messages from heard authors (capped at
    /// `--thread-context`), whether or not the session saw them, framed
    /// and bounded like the context block. The bot's own messages are left
    /// out; the session's mark does not move. A DM thread reads as empty.
    pub(crate) async fn read_thread(&self, mention: &Mention, limit: usize) -> Result<ThreadRead, ReadError> {
        let reading = Reading {
            since: None,
            limit: limit.clamp(1, self.limit),
            leave_out_journaled: false,
        };
        let not_future = |event: &Event| {
            event.pubkey != self.bot
                && event.created_at.as_secs() <= Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS
        };
        let read = self.read(mention, &reading, not_future).await?;
        read.log("thread read for the agent");
        Ok(ThreadRead {
            quoted: read.quoted.len(),
            text: read.text,
        })
    }

    /// Fetches the thread of `first` as `reading` says, keeps the events of
    /// this very thread that `keep` accepts, and frames the newest
    /// `reading.limit` of them from heard authors, signed, within the byte
    /// bounds.
    async fn read(
        &self,
        first: &Mention,
        reading: &Reading,
        keep: impl Fn(&Event) -> bool,
    ) -> Result<Read, ReadError> {
        let filters = self.filters(&first.thread, reading.since, reading.limit);
        let asked_the_relay = !filters.is_empty();
        let mut earlier = if filters.is_empty() {
            Vec::new()
        } else {
            self.fetch(first.origin.as_ref(), filters).await?
        };
        let mut left_out = LeftOut::default();
        earlier.retain(|event| {
            let in_thread = in_thread(event, &first.thread);
            left_out.off_thread += usize::from(!in_thread);
            in_thread && keep(event)
        });
        if reading.leave_out_journaled {
            self.leave_out_journaled(&mut earlier);
        }
        earlier.sort_by_key(|event| (event.created_at, event.id));
        earlier.dedup_by_key(|event| event.id);
        let mut quoted: Vec<(&Event, Standing)> = earlier
            .iter()
            .filter_map(|event| {
                let standing = self.standing(event);
                left_out.unheard += usize::from(standing.is_none());
                Some((event, standing?))
            })
            .collect();
        let skip = quoted.len().saturating_sub(reading.limit);
        quoted.drain(..skip);
        quoted.retain(|(event, _)| {
            let signed = event.verify().is_ok();
            left_out.bad_signature += usize::from(!signed);
            signed
        });
        let (text, kept) = self.block(&quoted, &mut left_out);
        let quoted = quoted[quoted.len() - kept..]
            .iter()
            .map(|(event, _)| (event.created_at.as_secs() as i64, event.id))
            .collect();
        Ok(Read {
            text,
            quoted,
            left_out,
            asked_the_relay,
        })
    }
    /// What the relay holds for `filters`: the mention's own relay read
    /// through the tap, unverified (what is quoted is verified here), the
    /// bot's own messages left out unread; without a known relay, every
    /// relay through the SDK.
    async fn fetch(&self, origin: Option<&RelayUrl>, filters: Vec<Filter>) -> Result<Vec<Event>, ReadError> {
        let failed = |error: &dyn std::fmt::Display| ReadError(error.to_string());
        let Some(url) = origin else {
            let fetches = filters
                .into_iter()
                .map(|filter| self.client.fetch_events(filter, CONTEXT_FETCH_TIMEOUT));
            let mut earlier = Vec::new();
            for fetched in futures_util::future::join_all(fetches).await {
                earlier.extend(fetched.map_err(|error| failed(&error))?);
            }
            return Ok(earlier);
        };
        let relay = self.client.relay(url).await.map_err(|error| failed(&error))?;
        relay_tap::fetch_once(&self.taps, &relay, filters, CONTEXT_FETCH_TIMEOUT, Some(self.bot))
            .await
            .map_err(|error| failed(&error))
    }

    /// The relay queries for the thread's earlier messages, after `since`
    /// (a note thread's root only the first time: it is never new later).
    /// Every query is limited, with room beside `limit` for the events
    /// left out.
    fn filters(&self, thread: &Thread, since: Option<i64>, limit: usize) -> Vec<Filter> {
        let (replies, root) = match thread {
            // A new top-level note is its own root: nothing came before it,
            // so a first turn on it costs no round trip.
            Thread::Note { root, mention } if root == mention && since.is_none() => return Vec::new(),
            Thread::Note { root, .. } => (
                Filter::new().kind(Kind::TextNote).event(*root),
                since.is_none().then(|| Filter::new().id(*root).limit(1)),
            ),
            Thread::Group { channel, .. } => (
                Filter::new()
                    .kinds(GROUP_KINDS.map(Kind::from))
                    .custom_tag(SingleLetterTag::lowercase(Alphabet::H), channel.clone()),
                None,
            ),
            // A kind 11 thread is its own root: new, like a top-level note.
            Thread::Comment { scope, mention, .. } if scope.event == Some(*mention) && since.is_none() => {
                return Vec::new();
            }
            Thread::Comment { scope, .. } => (
                comment_filter(scope),
                scope
                    .event
                    .filter(|_| since.is_none())
                    .map(|root| Filter::new().id(root).limit(1)),
            ),
            // A DM's and an encrypted group's messages are on no relay in
            // the clear.
            Thread::Direct { .. } | Thread::Marmot { .. } => return Vec::new(),
        };
        // Room for the events left out (the turn's own, the bot's, the unheard).
        let replies = replies.limit(limit.saturating_mul(4));
        let replies = match since {
            Some(since) => replies.since(Timestamp::from_secs(since.max(0) as u64)),
            None => replies,
        };
        std::iter::once(replies).chain(root).collect()
    }

    /// Whether `event` is context the session has not seen. An event dated
    /// further ahead than the intake accepts for a mention is left out: it
    /// would carry the mark into the future, and every later fetch (from
    /// the mark on) would come back empty.
    fn is_new_context(&self, event: &Event, batch: &[Mention], mark: Option<&Mark>) -> bool {
        let created_at = event.created_at.as_secs();
        let unseen = mark.is_none_or(|mark| !mark.has_seen(created_at as i64, &event.id.to_hex()));
        let not_future = created_at <= Timestamp::now().as_secs() + MAX_FUTURE_SKEW_SECS;
        unseen
            && not_future
            && event.pubkey != self.bot
            && !batch.iter().any(|mention| mention.event_id == event.id)
    }

    /// Leaves out the events the journal took in: mentions already
    /// prompted, or refused. Kept when the journal cannot be read (the
    /// agent sees a message twice rather than not at all).
    fn leave_out_journaled(&self, events: &mut Vec<Event>) {
        let ids: Vec<EventId> = events.iter().map(|event| event.id).collect();
        match self.ledger.journaled_among(&ids) {
            Ok(journaled) => events.retain(|event| !journaled.contains(&event.id)),
            Err(error) => {
                tracing::warn!(%error, "cannot check the thread context against the journal; keeping it all")
            }
        }
    }

    /// How the author of `event` stands, as the author gate would hear them
    /// in this (public) conversation; `None` when the message is not quoted.
    fn standing(&self, event: &Event) -> Option<Standing> {
        let heard = self.rules.heard_now(&AuthorFacts {
            author: event.pubkey,
            kind: event.kind,
            created_at: event.created_at,
            tags: event.tags.as_slice(),
            direct_message: false,
        });
        match self.from {
            ContextFrom::Heard => heard,
            ContextFrom::Anyone => Some(heard.unwrap_or(Standing::Stranger)),
        }
    }

    /// The context block for `quoted` (oldest first), within the byte
    /// bounds: the newest messages are kept first, each cut at
    /// `message_bytes`, and the oldest that does not fit whole is cut to
    /// what remains (or left out when little does). Returns the block and
    /// how many of the newest messages it holds.
    fn block(&self, quoted: &[(&Event, Standing)], left_out: &mut LeftOut) -> (String, usize) {
        let framing_bytes = prompt::context_block_framing_bytes();
        let mut budget = self.block_bytes.saturating_sub(framing_bytes);
        let mut kept: Vec<Earlier<'_>> = Vec::new();
        for (event, standing) in quoted.iter().rev() {
            let content = &event.content[..event.content.floor_char_boundary(self.message_bytes)];
            let mut earlier = Earlier {
                author: short_npub(&event.pubkey),
                standing: *standing,
                event_id: event.id.to_hex(),
                content,
                cut: content.len() < event.content.len(),
            };
            let mut bytes = prompt::quoted_bytes(&earlier);
            // Cut to fit: quoting adds bytes per line, so shrink until the
            // quoted form fits (each pass cuts at least in proportion).
            while bytes > budget && earlier.content.len() >= MIN_CUT_MESSAGE_BYTES {
                let shrunk = earlier.content.len() * budget / bytes;
                earlier.content =
                    &earlier.content[..earlier.content.floor_char_boundary(shrunk.saturating_sub(1))];
                earlier.cut = true;
                bytes = prompt::quoted_bytes(&earlier);
            }
            if bytes > budget || earlier.content.len() < MIN_CUT_MESSAGE_BYTES.min(content.len()) {
                left_out.over_budget += quoted.len() - kept.len();
                break;
            }
            budget -= bytes;
            kept.push(earlier);
        }
        kept.reverse();
        (prompt::context_block(&kept), kept.len())
    }
}

/// Whether `event` belongs to `thread`, whatever the relay claims by
/// returning it for the thread's query: a note of the thread (its root, or
/// a kind-1 reply whose NIP-10 root is that root), or a group chat event
/// with the channel's `h` tag.
fn in_thread(event: &Event, thread: &Thread) -> bool {
    match thread {
        Thread::Note { root, .. } => {
            event.kind == Kind::TextNote && (event.id == *root || note_root(event) == Some(*root))
        }
        Thread::Group { channel, .. } => {
            GROUP_KINDS.contains(&event.kind.as_u16())
                && mention::group_id(&event.tags).is_some_and(|id| id == *channel)
        }
        Thread::Comment { scope, .. } => {
            scope.event == Some(event.id)
                || (event.kind == Kind::Comment
                    && CommentScope::read(&event.tags).is_some_and(|read| read.key() == scope.key()))
        }
        Thread::Direct { .. } | Thread::Marmot { .. } => false,
    }
}

/// The comments of `scope` (kind 1111), by the root tag its key names:
/// an address's `A`, else the event's `E`, else the external id's `I`.
fn comment_filter(scope: &CommentScope) -> Filter {
    let by = |letter: Alphabet, value: String| {
        Filter::new()
            .kind(Kind::Comment)
            .custom_tag(SingleLetterTag::uppercase(letter), value)
    };
    match (&scope.address, scope.event, &scope.external) {
        (Some(address), _, _) => by(Alphabet::A, address.clone()),
        (None, Some(event), _) => by(Alphabet::E, event.to_hex()),
        (None, None, external) => by(Alphabet::I, external.clone().unwrap_or_default()),
    }
}

/// The root of the note thread `event` replies in, by NIP-10.
fn note_root(event: &Event) -> Option<EventId> {
    match mention::public_thread(event)? {
        (Thread::Note { root, .. }, _) if root != event.id => Some(root),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use nostr_sdk::prelude::{EventBuilder, Keys, Kind, Tag, TagKind};

    use acp_bridge_core::mention::Thread;

    use super::{Mark, in_thread};

    fn seen(events: &[(i64, &str)]) -> Vec<(i64, String)> {
        events.iter().map(|(at, id)| (*at, (*id).to_owned())).collect()
    }

    #[test]
    fn events_of_the_marks_second_stay_new_until_seen_whatever_their_ids() {
        let mark = Mark::default().advanced(seen(&[(5, "aa"), (10, "ff"), (10, "cc")]));
        assert_eq!(mark.at, 10);
        assert!(mark.has_seen(9, "zz") && mark.has_seen(10, "ff") && mark.has_seen(10, "cc"));
        assert!(
            !mark.has_seen(10, "00"),
            "a lower id in the same second is not seen"
        );
        assert!(!mark.has_seen(11, "00"));
        let same_second = mark.clone().advanced(seen(&[(10, "00")]));
        assert!(same_second.has_seen(10, "00") && same_second.has_seen(10, "ff"));
        let later = same_second.clone().advanced(seen(&[(12, "bb"), (3, "ee")]));
        assert_eq!(later, Mark::read(12, "bb"));
        assert_eq!(Mark::read(later.at, &later.ids_text()), later);
        assert_eq!(
            later.clone().advanced(Vec::new()),
            later,
            "nothing seen: unchanged"
        );
    }

    #[test]
    fn marks_written_before_ids_were_listed_still_read() {
        assert_eq!(
            Mark::read(7, ""),
            Mark {
                at: 7,
                ids: Default::default()
            }
        );
        assert!(Mark::read(7, "abc").has_seen(7, "abc"));
    }

    #[test]
    fn only_events_of_the_thread_itself_belong_to_it() {
        let keys = Keys::generate();
        let sign = |builder: EventBuilder| builder.sign_with_keys(&keys).expect("sign");
        let root = sign(EventBuilder::text_note("root"));
        let other_root = sign(EventBuilder::text_note("another thread"));
        let thread = Thread::Note {
            root: root.id,
            mention: root.id,
        };
        let reply = sign(EventBuilder::text_note_reply("a reply", &root, Some(&root), None));
        let elsewhere = sign(EventBuilder::text_note_reply(
            "elsewhere",
            &other_root,
            Some(&other_root),
            None,
        ));
        // Tags our root, but as a mention inside another thread.
        let citing = sign(
            EventBuilder::text_note_reply("see also", &other_root, Some(&other_root), None)
                .tag(Tag::parse(["e", &root.id.to_hex(), "", "mention"]).expect("tag")),
        );
        let reaction = sign(EventBuilder::new(Kind::Reaction, "+").tag(Tag::event(root.id)));
        assert!(in_thread(&root, &thread) && in_thread(&reply, &thread));
        for (what, event) in [
            ("elsewhere", &elsewhere),
            ("citing", &citing),
            ("reaction", &reaction),
        ] {
            assert!(!in_thread(event, &thread), "{what}");
        }

        let group = Thread::Group {
            channel: "room".into(),
            root: root.id,
            mention: root.id,
        };
        let chat = |channel: &str| {
            sign(EventBuilder::new(Kind::Custom(9), "hi").tag(Tag::custom(TagKind::h(), [channel])))
        };
        assert!(in_thread(&chat("room"), &group));
        assert!(!in_thread(&chat("lobby"), &group));
        assert!(!in_thread(&reply, &group), "a note is no group chat");
    }
}
