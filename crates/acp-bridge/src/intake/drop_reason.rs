//! Why an event was not taken: the reasons screening and the journal give,
//! each the label of the `events_dropped` metric and of the drop's log line.

/// Why an event was not accepted (label of the `events_dropped` metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    OwnEvent,
    NotAMention,
    Duplicate,
    TooOld,
    FromTheFuture,
    Malformed,
    Undecryptable,
    BadSignature,
    Gate(crate::policy::gate::Refusal),
    LoopBound,
    RateLimited,
    /// `--max-queued` mentions wait, and the overload notices are spent.
    Overloaded,
    /// Untaken: waits in memory for the author's profile lookup.
    AwaitingProfile,
    /// Untaken: the profile lookups are saturated, or the events waiting
    /// for one fill their bounds (count, `--max-parked-bytes`); fetched
    /// again later.
    LookupsBusy,
    /// Untaken: the journal write failed; fetched again later.
    NotJournaled,
    /// Another shard's conversation (`--shard`): journaled as seen only.
    OtherShard,
    /// A group the bot was not asked to serve (`--group`, `--other-groups`).
    UnservedGroup,
    /// From before this start, and the bot's own reply to it is on a relay
    /// (a fresh state dir, a new shard count: see `before_start`).
    AnsweredBeforeStart,
    /// Untaken: an event from before this start, held until its relay's
    /// stored events are through (for a DM: among them the bot's copy of
    /// its answer) and, if public, the relay has said whether the bot
    /// replied to it.
    AwaitingCatchUp,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::OwnEvent => "own_event",
            DropReason::NotAMention => "not_a_mention",
            DropReason::Duplicate => "duplicate",
            DropReason::TooOld => "too_old",
            DropReason::FromTheFuture => "from_the_future",
            DropReason::Malformed => "malformed",
            DropReason::Undecryptable => "undecryptable",
            DropReason::BadSignature => "bad_signature",
            DropReason::Gate(refusal) => refusal.as_str(),
            DropReason::LoopBound => "loop_bound",
            DropReason::RateLimited => "rate_limited",
            DropReason::Overloaded => "overloaded",
            DropReason::AwaitingProfile => "awaiting_profile",
            DropReason::LookupsBusy => "lookups_busy",
            DropReason::NotJournaled => "not_journaled",
            DropReason::OtherShard => "other_shard",
            DropReason::UnservedGroup => "unserved_group",
            DropReason::AnsweredBeforeStart => "answered_before_start",
            DropReason::AwaitingCatchUp => "awaiting_catch_up",
        }
    }

    /// Not a verdict on the event: it is to be taken later.
    pub fn is_passing(self) -> bool {
        matches!(
            self,
            DropReason::AwaitingProfile
                | DropReason::LookupsBusy
                | DropReason::NotJournaled
                | DropReason::AwaitingCatchUp
        )
    }
}
