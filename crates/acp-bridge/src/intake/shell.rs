//! The shell around screening: reads the clock, answers screening's
//! [`Lookups`] from the journal, the author gate and the loop guard,
//! unwraps gift wraps with the bot's signer, and turns the [`Verdict`]
//! into what the batch journals (see `admission`).
//!
//! The bot's own DM copies stop here, with their effects: a replica's
//! question is recorded as asked by it, and a copy from before this start
//! journals the DM it answered (see `before_start_shell`).

use std::time::Instant;

use acp_bridge_core::mention::Intent;
use nostr_sdk::prelude::{Event, EventId, Kind, RelayUrl, UnwrappedGift};

use super::admission::Screened;
use super::queued_count::QueuedCount;
use super::screening::{self, Addressed, Candidate, Lookups, Now, Screener, Verdict};
use super::{DropReason, Intake};
use crate::policy::gate::{AuthorFacts, AuthorGate, Hearing};
use crate::policy::loop_guard::LoopGuard;
use crate::policy::shard::{QuestionAskers, Shard};
use crate::state::ledger::Ledger;
use crate::state::mls::Opened;
use crate::state::store::{AnsweredThreads, Questions};

/// Screening's questions, answered from the intake's handles.
struct Answers<'a> {
    threads: &'a AnsweredThreads,
    questions: &'a Questions,
    ledger: &'a Ledger,
    gate: &'a mut AuthorGate,
    loop_guard: &'a mut LoopGuard,
    question_askers: &'a QuestionAskers,
    shard: Shard,
    queued: &'a mut QueuedCount,
}

impl Lookups for Answers<'_> {
    fn seen(&self, id: &EventId) -> bool {
        self.ledger.seen(&id.to_hex())
    }

    fn first_answered(&self, root: &EventId) -> Option<i64> {
        self.threads.first_answered(*root).ok().flatten()
    }

    fn hear(&mut self, facts: AuthorFacts<'_>) -> Hearing {
        self.gate.admit(facts)
    }

    fn asked_here(&self, question: EventId) -> Option<bool> {
        self.shard.takes_reply_to_question(self.question_askers, question)
    }

    fn question_open(&self, question: &EventId) -> bool {
        self.questions.is_open(*question).unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot read the open questions; the owner's reply goes by the shard hash");
                false
            })
    }

    fn depth_of(&mut self, replies_to: Option<EventId>) -> u32 {
        self.loop_guard.depth_of(replies_to)
    }

    fn follow_up_depth(&mut self, root: EventId, replies_to: Option<EventId>) -> u32 {
        self.loop_guard.follow_up_depth(root, replies_to)
    }

    fn queued(&mut self) -> usize {
        let ledger = self.ledger;
        self.queued.get(Instant::now(), || ledger.pending_count())
    }
}

impl Intake {
    /// Runs one event through every check but the journal's: what it is
    /// to become, or why it is dropped.
    pub(super) async fn screen(&mut self, relay: &RelayUrl, event: &Event) -> Result<Screened, DropReason> {
        self.take_new_rate_limits();
        let now = Now::read();
        let addressed = {
            let (screener, answers) = self.screening();
            screener.address(relay, event, now, &answers)?
        };
        let verdict = match addressed {
            Addressed::Public(candidate) => self.judge(relay, candidate, now),
            Addressed::Sealed => {
                if let Some(copy) = self.replier.own_copy(&event.id) {
                    // The copy of a DM this process just sent: what the
                    // unwrap would tell, without its decryptions.
                    self.question_askers
                        .record(copy.rumor, &copy.tags, Instant::now());
                    return Err(DropReason::OwnEvent);
                }
                let gift = UnwrappedGift::from_gift_wrap(&self.signer, event)
                    .await
                    .map_err(|_| DropReason::Undecryptable)?;
                let mut rumor = gift.rumor;
                let rumor_id = rumor.id();
                if rumor.kind == Kind::MlsWelcome
                    && let Some(marmot) = &self.marmot
                {
                    marmot.welcome(&mut self.gate, event.id, gift.sender, rumor).await;
                    return Err(DropReason::NotAMention);
                }
                if gift.sender == self.signer.public_key() {
                    // The bot's copy of its own DM (NIP-17): a replica's
                    // question says which replica asked it.
                    self.question_askers
                        .record(rumor_id, rumor.tags.as_slice(), Instant::now());
                    self.learn_own_answer(relay, &rumor);
                    return Err(DropReason::OwnEvent);
                }
                let candidate = screening::direct(event, gift.sender, &rumor, rumor_id)?;
                // Judged by the time the unwrap is done (a remote signer
                // takes a round trip).
                self.judge(relay, candidate, Now::read())
            }
            Addressed::Encrypted => {
                let Some(marmot) = &self.marmot else {
                    return Err(DropReason::NotAMention);
                };
                let bot = self.signer.public_key();
                let opened = marmot
                    .mls
                    .read_message(event.clone(), bot)
                    .await
                    .map_err(|error| {
                        tracing::warn!(%error, wrapper = %event.id, "cannot decrypt a Marmot group message");
                        DropReason::Undecryptable
                    })?;
                tracing::debug!(wrapper = %event.id, "a Marmot group event decrypted");
                let (group, rumor, to_bot) = match opened {
                    Opened::Message {
                        group,
                        rumor,
                        recovered,
                        to_bot,
                    } => {
                        if recovered {
                            tracing::info!(wrapper = %event.id, "a Marmot message decrypted before the crash, read back from the MLS state");
                        }
                        (group, rumor, to_bot)
                    }
                    Opened::Commit { group, still_member } => {
                        if still_member {
                            tracing::info!(%group, "a Marmot group's epoch moved on (members or keys changed)");
                        } else {
                            tracing::info!(%group, "removed from a Marmot encrypted group");
                            marmot.changed();
                        }
                        return Err(DropReason::NotAMention);
                    }
                    Opened::Nothing(why) => {
                        tracing::debug!(why, wrapper = %event.id, "a Marmot group event with nothing to answer");
                        return Err(DropReason::NotAMention);
                    }
                };
                let candidate = screening::encrypted(event, group, &rumor, &bot, to_bot)?;
                self.judge(relay, candidate, Now::read())
            }
        };
        match verdict {
            Verdict::Drop(reason) => Err(reason),
            Verdict::Take(mention) => {
                if mention.intent == Intent::Turn {
                    self.queued.add_one();
                }
                Ok(Screened::Ours(mention))
            }
            Verdict::Notice { mut mention, text } => {
                mention.intent = Intent::Notice(text);
                Ok(Screened::Ours(mention))
            }
            Verdict::OtherShard(other) => Ok(Screened::OtherShards(other)),
        }
    }

    fn judge(&mut self, relay: &RelayUrl, candidate: Candidate<'_>, now: Now) -> Verdict {
        let (screener, mut answers) = self.screening();
        screener.judge(relay, candidate, now, &mut answers)
    }

    /// The screener, and the answers to its questions.
    fn screening(&mut self) -> (&mut Screener, Answers<'_>) {
        let answers = Answers {
            threads: &self.threads,
            questions: &self.questions,
            ledger: &self.ledger,
            gate: &mut self.gate,
            loop_guard: &mut self.loop_guard,
            question_askers: &self.question_askers,
            shard: self.screener.shard,
            queued: &mut self.queued,
        };
        (&mut self.screener, answers)
    }

    /// New rate limits from a reload of the config file, taken before the
    /// next admission.
    fn take_new_rate_limits(&mut self) {
        if let Some(updates) = &mut self.rate_limits
            && updates.has_changed().unwrap_or(false)
        {
            let rate = *updates.borrow_and_update();
            self.screener.limiter.set_rate(rate.burst, rate.refill);
        }
    }
}
