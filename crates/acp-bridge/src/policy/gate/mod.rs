//! The author gate: who is heard.
//!
//! Owns the decision from a (verified) author to "heard" or "not heard",
//! under `--respond-to`: the owner, the allowlist, and sibling bots of the
//! same owner proven by an owner attestation (NIP-OA) on the event itself or
//! on the author's kind:0 profile. DMs hear only the owner and siblings,
//! whatever the mode, since clients p-tag every DM participant.
//!
//! The gate never trusts what tags claim about authority: the author is the
//! event's signed `pubkey`, and a sibling is proven only by the owner's
//! signature. A profile fetch that fails is never cached as "not a sibling",
//! and the gate never waits for one (see [`profile_lookup`]).

pub(crate) mod args;
pub(crate) mod attestation;
pub(crate) mod profile_lookup;
pub(crate) mod sibling_cache;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use acp_bridge_core::standing::Standing;
use clap::ValueEnum;
use nostr_sdk::prelude::{Client, Kind, PublicKey, Tag, Timestamp};
use tokio::sync::mpsc::error::TrySendError;

use self::profile_lookup::{LookedUp, ProfileLookups};
use self::sibling_cache::{SiblingCache, SiblingVerdict};

/// Who may be heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RespondTo {
    /// The owner and verified sibling bots.
    OwnerOnly,
    /// The owner, verified siblings and the allowlist.
    Allowlist,
    /// Every author (DMs still only from the owner and siblings).
    Anyone,
    /// No one (the daemon still runs, e.g. for owner commands).
    Nobody,
}

impl RespondTo {
    /// The flag's word for the mode (`owner-only`, …), as operators write
    /// it: clap's own name for the value.
    pub fn flag_word(self) -> String {
        self.to_possible_value()
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default()
    }
}

/// What the gate needs to know about an event.
#[derive(Debug, Clone, Copy)]
pub struct AuthorFacts<'a> {
    pub author: PublicKey,
    pub kind: Kind,
    /// The date attestation conditions are checked against: the event's
    /// own, or later for a live event (see the intake's time window).
    pub created_at: Timestamp,
    pub tags: &'a [Tag],
    pub direct_message: bool,
}

/// The gate's answer on one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hearing {
    Heard(Standing),
    Refused(Refusal),
    /// Not decided yet: the author's profile is being looked up. The
    /// verdict comes back through [`AuthorGate::looked_up`].
    AwaitingProfile,
    /// Not decided, and the lookup queue is full: try again later.
    LookupsBusy,
}

/// Why the gate refused an author (for logs and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `--respond-to nobody`.
    NobodyHeard,
    /// Not the owner, not a sibling, not allowlisted (as the mode requires).
    NotHeard,
    /// A DM from someone other than the owner or a sibling.
    DirectMessageFromStranger,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NobodyHeard => "nobody_heard",
            Refusal::NotHeard => "not_heard",
            Refusal::DirectMessageFromStranger => "dm_from_stranger",
        }
    }
}

/// Who the gate hears, and what it knows of siblings without asking the
/// network: the rules themselves, shared by the intake's gate (which adds
/// profile lookups) and by every reader that must hear exactly whom the
/// gate hears (thread context). One copy of the rules, so the two cannot
/// drift apart.
#[derive(Debug, Clone)]
pub struct GateRules {
    owner: Option<PublicKey>,
    respond_to: RespondTo,
    /// Replaced as a whole on a reload of the config file (SIGHUP); held
    /// only for a lookup, never across an await.
    allowlist: Arc<RwLock<BTreeSet<PublicKey>>>,
    /// Written by the gate's lookups, read by every holder of the rules.
    /// Held only for a map access, never across an await.
    siblings: Arc<Mutex<SiblingCache>>,
}

/// What is known of an author's sibling standing without a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SiblingKnown {
    /// Decided: by the event's own attestation or a live cached verdict.
    Fresh(bool),
    /// The cached verdict is absent or expired. A known sibling is heard
    /// on its stale attestations (`Some(true)`) while the profile is
    /// looked up again; `None` means nothing is known.
    Stale(Option<bool>),
}

impl GateRules {
    pub fn new(owner: Option<PublicKey>, respond_to: RespondTo, allowlist: BTreeSet<PublicKey>) -> Self {
        GateRules {
            owner,
            respond_to,
            allowlist: Arc::new(RwLock::new(allowlist)),
            siblings: Arc::new(Mutex::new(SiblingCache::new(
                sibling_cache::DEFAULT_POSITIVE_TTL,
                sibling_cache::DEFAULT_NEGATIVE_TTL,
                sibling_cache::DEFAULT_CAPACITY,
            ))),
        }
    }

    pub fn owner(&self) -> Option<PublicKey> {
        self.owner
    }

    /// Replaces the allowlist for every holder of the rules: the next
    /// event is heard by the new list.
    pub fn set_allowlist(&self, allowlist: BTreeSet<PublicKey>) {
        *self.allowlist.write().unwrap_or_else(PoisonError::into_inner) = allowlist;
    }

    /// Whether the gate has verified `author` as a sibling bot of the
    /// owner (its attestation, cached; a stale verdict still counts, as
    /// the gate hears it on it), without asking the network.
    pub(crate) fn known_sibling(&self, author: &PublicKey) -> bool {
        let mut siblings = self.siblings.lock().unwrap_or_else(PoisonError::into_inner);
        match siblings.get(author, std::time::Instant::now()) {
            Some(verdict) => verdict != SiblingVerdict::NotSibling,
            None => siblings.stale_attestations(author).is_some(),
        }
    }

    fn allowlisted(&self, author: &PublicKey) -> bool {
        self.allowlist
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(author)
    }

    /// How the gate would stand `facts.author`, from what is known now and
    /// without asking the network; `None` when the gate would not hear them
    /// (an author whose standing needs a profile lookup is not heard here).
    pub fn heard_now(&self, facts: &AuthorFacts<'_>) -> Option<Standing> {
        let sibling = || match self.sibling_known(facts) {
            SiblingKnown::Fresh(known) => Some(known),
            SiblingKnown::Stale(stale) => stale,
        };
        match self.hear(facts, sibling) {
            Hearing::Heard(standing) => Some(standing),
            _ => None,
        }
    }

    /// The rules, in order. `sibling` is asked only when the author's
    /// standing depends on it; `None` from it means "not known yet", which
    /// the answer reports as [`Hearing::AwaitingProfile`] (the gate turns
    /// that into `LookupsBusy` when no lookup could be queued).
    fn hear(&self, facts: &AuthorFacts<'_>, sibling: impl FnOnce() -> Option<bool>) -> Hearing {
        if self.respond_to == RespondTo::Nobody {
            return Hearing::Refused(Refusal::NobodyHeard);
        }
        if Some(facts.author) == self.owner {
            return Hearing::Heard(Standing::Owner);
        }
        // Under `anyone` the allowlist still sets its authors apart from
        // strangers (strangers have a budget of their own).
        let allowlisted = matches!(self.respond_to, RespondTo::Allowlist | RespondTo::Anyone)
            && self.allowlisted(&facts.author);
        if allowlisted && !facts.direct_message {
            return Hearing::Heard(Standing::Allowlisted);
        }
        match sibling() {
            Some(true) => return Hearing::Heard(Standing::Sibling),
            Some(false) => {}
            // Heard either way: as a stranger now, and by its standing once
            // the lookup (under way) is done. A busy public bot must not
            // hold every new author for a lookup.
            None if self.respond_to == RespondTo::Anyone && !facts.direct_message => {}
            None => return Hearing::AwaitingProfile,
        }
        match (self.respond_to, facts.direct_message) {
            (_, true) => Hearing::Refused(Refusal::DirectMessageFromStranger),
            (RespondTo::Anyone, false) => Hearing::Heard(Standing::Stranger),
            _ => Hearing::Refused(Refusal::NotHeard),
        }
    }

    /// A sibling: attested by the owner, on the event or on its profile
    /// (as cached by the gate's lookups).
    fn sibling_known(&self, facts: &AuthorFacts<'_>) -> SiblingKnown {
        let Some(owner) = self.owner else {
            return SiblingKnown::Fresh(false);
        };
        let covers = |tags: &[Tag]| {
            matches!(
                attestation::verify_tags(tags.iter(), &facts.author, &owner, facts.kind, facts.created_at),
                Some(Ok(()))
            )
        };
        // The event's own attestation needs no lookup: preferred.
        match attestation::verify_tags(facts.tags, &facts.author, &owner, facts.kind, facts.created_at) {
            Some(Ok(())) => return SiblingKnown::Fresh(true),
            Some(Err(error)) => {
                tracing::debug!(author = %facts.author, %error, "attestation on the event refused");
            }
            None => {}
        }
        let mut siblings = self.siblings.lock().unwrap_or_else(PoisonError::into_inner);
        // Conditions depend on the event: checked every time.
        match siblings.get(&facts.author, Instant::now()) {
            Some(SiblingVerdict::Sibling(tags)) => SiblingKnown::Fresh(covers(&tags)),
            Some(SiblingVerdict::NotSibling) => SiblingKnown::Fresh(false),
            None => SiblingKnown::Stale(siblings.stale_attestations(&facts.author).map(covers)),
        }
    }

    fn learned(&self, author: PublicKey, verdict: SiblingVerdict) {
        let mut siblings = self.siblings.lock().unwrap_or_else(PoisonError::into_inner);
        siblings.put(author, verdict, Instant::now());
    }
}

/// The rules plus the profile lookups that decide siblings. Owned by the
/// intake: one caller.
#[derive(Debug)]
pub struct AuthorGate {
    rules: GateRules,
    lookups: ProfileLookups,
    /// Authors with a lookup queued or under way (requests are coalesced).
    looking_up: HashSet<PublicKey>,
}

impl AuthorGate {
    /// A gate applying `rules`, whose profile lookups go through `client`.
    /// Starts the lookup worker on the current runtime.
    pub fn new(rules: GateRules, client: Client) -> Self {
        AuthorGate {
            rules,
            lookups: ProfileLookups::start(client),
            looking_up: HashSet::new(),
        }
    }

    pub fn owner(&self) -> Option<PublicKey> {
        self.rules.owner
    }

    /// `--respond-to`: named in the operator's line for a refusal.
    pub fn respond_to(&self) -> RespondTo {
        self.rules.respond_to
    }

    /// Decides whether `facts.author` is heard, and how they stand. Never
    /// waits on the network: an author whose standing needs their profile
    /// gets [`Hearing::AwaitingProfile`] and a lookup is requested.
    pub fn admit(&mut self, facts: AuthorFacts<'_>) -> Hearing {
        let rules = self.rules.clone();
        let sibling = || match rules.sibling_known(&facts) {
            SiblingKnown::Fresh(known) => Some(known),
            // Absent or expired: look the profile up again.
            SiblingKnown::Stale(stale) => {
                self.request_lookup(facts.author);
                stale
            }
        };
        match rules.hear(&facts, sibling) {
            Hearing::AwaitingProfile if !self.looking_up.contains(&facts.author) => Hearing::LookupsBusy,
            hearing => hearing,
        }
    }

    /// The next finished lookup, once its verdict is cached: the caller
    /// screens the author's waiting events again. Pending forever when no
    /// lookup is under way.
    pub async fn looked_up(&mut self) -> PublicKey {
        let Some((author, verdict)): Option<LookedUp> = self.lookups.done.recv().await else {
            return std::future::pending().await;
        };
        self.looking_up.remove(&author);
        self.rules.learned(author, verdict);
        author
    }

    /// Queues a lookup of `author` unless one is under way; `looking_up`
    /// says whether one is (it is not when the queue is full).
    fn request_lookup(&mut self, author: PublicKey) {
        if !self.looking_up.insert(author) {
            return;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Closed(_)) = self.lookups.requests.try_send(author) {
            self.looking_up.remove(&author);
            tracing::debug!(%author, "profile lookup queue full");
        }
    }
}
