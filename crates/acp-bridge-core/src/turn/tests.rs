//! The turn machine as tables: inputs in, the actions that must come out.

use std::collections::BTreeSet;

use crate::mention::test_mention;
use nostr::prelude::EventId;

use super::*;

const QUESTION_TIMEOUT: Duration = Duration::from_secs(60);

fn mention(seed: u64, text: &str) -> Mention {
    test_mention("room", seed, text, true)
}

fn texts(mentions: &[Mention]) -> Vec<&str> {
    mentions.iter().map(|m| m.content.as_str()).collect()
}

/// A turn under test, and the clock it is fed.
struct Rig {
    machine: TurnMachine,
    now: Instant,
    /// Every mention handed to the turn, for the conservation check.
    given: Vec<Mention>,
    /// Every action out so far.
    log: Vec<Action>,
}

impl Rig {
    /// A turn for `batch` whose lease succeeded: its first prompt is out.
    fn prompting(batch: &[&str]) -> Self {
        let mut rig = Self::leasing(batch);
        let actions = rig.feed(Input::Leased);
        assert!(
            matches!(actions.as_slice(), [Action::Driver(DriverAction::Prompt(..))]),
            "{actions:?}"
        );
        rig
    }

    fn leasing(batch: &[&str]) -> Self {
        let batch: Vec<Mention> = batch
            .iter()
            .enumerate()
            .map(|(n, text)| mention(n as u64 + 1, text))
            .collect();
        let now = Instant::now();
        let start = TurnStart {
            batch: batch.clone(),
            queue_wait_ms: 0,
            question_timeout: QUESTION_TIMEOUT,
        };
        let (machine, lease) = TurnMachine::start(start, now);
        assert_eq!(lease, DriverAction::Lease);
        let actions = vec![Action::Driver(lease)];
        Rig {
            machine,
            now,
            given: batch,
            log: actions,
        }
    }

    fn feed(&mut self, input: Input) -> Vec<Action> {
        let actions = self.machine.handle(input, self.now);
        self.log.extend(actions.iter().map(clone_action));
        actions
    }

    /// How many times the driver was told to stop (publish, release, abandon).
    fn driver_stops(&self) -> usize {
        count(&self.log, |action| {
            matches!(
                action,
                Action::Driver(DriverAction::Publish { .. })
                    | Action::Driver(DriverAction::Release)
                    | Action::Driver(DriverAction::Abandon)
            )
        })
    }

    fn absorb(&mut self, seed: u64, text: &str, framing: Framing) -> Vec<Action> {
        let new = mention(seed, text);
        self.given.push(new.clone());
        self.feed(Input::Absorb {
            mentions: vec![new],
            framing,
        })
    }

    /// Absorbs a mention the machine steers; returns the steer's ticket.
    fn steer(&mut self, seed: u64, text: &str) -> SteerTicket {
        let actions = self.absorb(seed, text, Framing::Steer);
        let [Action::Driver(DriverAction::Steer { ticket, .. })] = actions.as_slice() else {
            panic!("{actions:?}");
        };
        *ticket
    }

    /// Steers a mention that the agent then queues as `message_id`.
    fn steer_queued(&mut self, seed: u64, text: &str, message_id: &str) {
        let ticket = self.steer(seed, text);
        let answer = SteerAnswer::AwaitingFold {
            message_id: message_id.into(),
        };
        assert_eq!(
            self.feed(Input::SteerAnswered { ticket, answer }),
            [steered(SteerOutcome::Native)]
        );
    }

    /// The agent asks question 1 (`summary`) and it is posted as an event.
    fn ask_posted(&mut self, summary: &str) -> EventId {
        self.feed(Input::QuestionAsked(Asked {
            ticket: 1,
            summary: summary.into(),
            shows: String::new(),
            ask: Ask::Permission(questions::tests::options()),
        }));
        let event = EventId::from_slice(&[9; 32]).expect("id");
        self.feed(Input::QuestionPosted {
            ticket: 1,
            event: Some(event),
        });
        event
    }

    fn ended(&mut self, stop_reason: StopReason, folded: &[&str]) -> Vec<Action> {
        self.feed(Input::PromptEnded(Ok(PromptEnd {
            stop_reason,
            message: "the answer".into(),
            folded: folded.iter().map(|id| (*id).to_owned()).collect(),
            usage: TurnUsage::default(),
        })))
    }

    fn advance(&mut self, by: Duration) -> Vec<Action> {
        self.now += by;
        self.feed(Input::Timer)
    }

    /// Checks that every mention given is in the end exactly once (work,
    /// returned or requeued along the way) and returns the end.
    fn end(&self, actions: &[Action], requeued: &[Mention]) -> (Outcome, Vec<Mention>, Vec<Mention>) {
        let Some(Action::Heart(HeartAction::Finished(end))) = actions.last() else {
            panic!("the turn did not finish: {actions:?}");
        };
        let mut seen = BTreeSet::new();
        for mention in end.work.iter().chain(&end.returned).chain(requeued) {
            assert!(seen.insert(mention.event_id), "{} is out twice", mention.content);
        }
        let given: BTreeSet<_> = self.given.iter().map(|m| m.event_id).collect();
        assert_eq!(seen, given, "every mention given leaves the turn");
        (end.outcome.clone(), end.work.clone(), end.returned.clone())
    }
}

/// The heart's count of a steer that went `outcome`'s way.
fn steered(outcome: SteerOutcome) -> Action {
    Action::Heart(HeartAction::Steered(outcome))
}

fn published(actions: &[Action]) -> (Vec<Mention>, String, Publication) {
    match actions
        .iter()
        .find(|action| matches!(action, Action::Driver(DriverAction::Publish { .. })))
    {
        Some(Action::Driver(DriverAction::Publish {
            mentions,
            text,
            publication,
        })) => (mentions.clone(), text.clone(), *publication),
        _ => panic!("nothing published: {actions:?}"),
    }
}

fn count(actions: &[Action], predicate: impl Fn(&Action) -> bool) -> usize {
    actions.iter().filter(|action| predicate(action)).count()
}

#[test]
fn native_steer_confirmed_by_its_fold_is_answered_by_the_same_turn() {
    let mut rig = Rig::prompting(&["write the report"]);
    let actions = rig.absorb(10, "also the budget", Framing::Steer);
    let [Action::Driver(DriverAction::Steer { ticket, text, .. })] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert!(text.contains(prompt::STEER_HEADER) && text.contains("> also the budget"));
    let answer = SteerAnswer::AwaitingFold {
        message_id: "msg_1".into(),
    };
    let ticket = *ticket;
    assert_eq!(
        rig.feed(Input::SteerAnswered { ticket, answer }),
        [steered(SteerOutcome::Native)]
    );

    let actions = rig.ended(StopReason::EndTurn, &["msg_1"]);
    let (mentions, text, publication) = published(&actions);
    assert_eq!(texts(&mentions), ["write the report", "also the budget"]);
    assert_eq!((text.as_str(), publication), ("the answer", Publication::Answer));

    let actions = rig.feed(Input::Published(Ok(())));
    assert!(
        matches!(actions.as_slice(), [Action::Heart(HeartAction::Finished(_))]),
        "the publishing driver freed the agent"
    );
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert_eq!(outcome, Outcome::Answered);
    assert_eq!(work.len(), 2);
    assert!(returned.is_empty());
}

#[test]
fn a_steer_the_agent_took_into_its_turn_is_answered_by_that_turn() {
    let mut rig = Rig::prompting(&["write the report"]);
    let ticket = rig.steer(10, "also the budget");
    assert_eq!(
        rig.feed(Input::SteerAnswered {
            ticket,
            answer: SteerAnswer::Delivered
        }),
        [steered(SteerOutcome::Native)]
    );
    // No fold to wait for: the turn answers it whatever it streams.
    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(
        texts(&published(&actions).0),
        ["write the report", "also the budget"]
    );
}

#[test]
fn an_acknowledged_steer_the_run_never_folded_goes_to_the_next_turn() {
    let mut rig = Rig::prompting(&["first"]);
    rig.steer_queued(10, "late", "msg_1");
    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(texts(&published(&actions).0), ["first"]);
    let actions = rig.feed(Input::Published(Ok(())));
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert_eq!(outcome, Outcome::Answered);
    assert_eq!((texts(&work), texts(&returned)), (vec!["first"], vec!["late"]));
}

#[test]
fn an_agent_that_cannot_steer_gets_cancel_and_one_merged_reprompt() {
    let mut rig = Rig::prompting(&["long task"]);
    let ticket = rig.steer(10, "addendum");
    let refusal = SteerAnswer::Unsupported("the agent does not implement steering".into());
    let actions = rig.feed(Input::SteerAnswered {
        ticket,
        answer: refusal,
    });
    assert_eq!(
        actions,
        [
            steered(SteerOutcome::Fallback),
            Action::Driver(DriverAction::Cancel)
        ]
    );
    assert_eq!(rig.feed(Input::CancelSettled(CancelSettled::Done)), []);

    let actions = rig.ended(StopReason::Cancelled, &[]);
    let quiet = rig.now + MERGE_QUIET_PERIOD;
    assert_eq!(actions, [Action::Driver(DriverAction::SetTimer(Some(quiet)))]);
    let actions = rig.advance(MERGE_QUIET_PERIOD);
    let [
        Action::Driver(DriverAction::Prompt(merged, _)),
        Action::Driver(DriverAction::SetTimer(None)),
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert!(merged.contains("> long task") && merged.contains("> addendum"));
    assert!(merged.contains(prompt::STEER_HEADER), "steer framing: {merged}");
    assert!(merged.trim_end().ends_with(prompt::STEER_CLOSING), "{merged}");

    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(texts(&published(&actions).0), ["long task", "addendum"]);
    let actions = rig.feed(Input::Published(Ok(())));
    let (outcome, work, _) = rig.end(&actions, &[]);
    assert_eq!((outcome, work.len()), (Outcome::Answered, 2));
}

#[test]
fn refused_steers_answered_late_keep_the_merge_in_arrival_order() {
    let mut rig = Rig::prompting(&["long task"]);
    let first = rig.steer(10, "first addendum");
    let second = rig.steer(11, "second addendum");
    let refusal = || SteerAnswer::Unsupported("the agent does not implement steering".into());
    // The second refusal comes first: its mention joins the merge, then the
    // first's, which arrived earlier.
    assert_eq!(
        rig.feed(Input::SteerAnswered {
            ticket: second,
            answer: refusal()
        }),
        [
            steered(SteerOutcome::Fallback),
            Action::Driver(DriverAction::Cancel)
        ]
    );
    assert_eq!(
        rig.feed(Input::SteerAnswered {
            ticket: first,
            answer: refusal()
        }),
        [steered(SteerOutcome::Fallback)]
    );
    rig.feed(Input::CancelSettled(CancelSettled::Done));
    rig.ended(StopReason::Cancelled, &[]);
    rig.advance(MERGE_QUIET_PERIOD);
    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(
        texts(&published(&actions).0),
        ["long task", "first addendum", "second addendum"],
        "the reply threads under the newest"
    );
}

#[test]
fn a_burst_during_a_cancel_costs_one_cancel_and_one_reprompt() {
    let mut rig = Rig::prompting(&["long task"]);
    let mut actions = rig.absorb(10, "new plan", Framing::Interrupt);
    for n in 11..15 {
        actions.extend(rig.absorb(n, &format!("more {n}"), Framing::Interrupt));
    }
    assert_eq!(
        actions,
        [
            steered(SteerOutcome::Fallback),
            Action::Driver(DriverAction::Cancel)
        ],
        "one burst, one cancel, one fallback counted"
    );

    rig.ended(StopReason::Cancelled, &[]);
    // One more arrives while the merge gathers: the quiet period restarts.
    rig.advance(MERGE_QUIET_PERIOD / 2);
    let actions = rig.absorb(15, "last", Framing::Interrupt);
    assert_eq!(
        actions,
        [Action::Driver(DriverAction::SetTimer(Some(
            rig.now + MERGE_QUIET_PERIOD
        )))]
    );
    assert_eq!(rig.advance(MERGE_QUIET_PERIOD / 2), [], "still gathering");
    let actions = rig.advance(MERGE_QUIET_PERIOD / 2);
    let prompts: Vec<&String> = actions
        .iter()
        .filter_map(|action| match action {
            Action::Driver(DriverAction::Prompt(text, _)) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].contains("supersedes"),
        "interrupt framing: {}",
        prompts[0]
    );
    for n in 11..15 {
        assert!(prompts[0].contains(&format!("> more {n}")));
    }
    assert!(prompts[0].contains("> last"));
}

#[test]
fn a_burst_that_never_goes_quiet_is_reprompted_at_the_gather_bound() {
    let mut rig = Rig::prompting(&["task"]);
    rig.absorb(10, "a", Framing::Interrupt);
    rig.ended(StopReason::Cancelled, &[]);
    let step = MERGE_QUIET_PERIOD / 2;
    let mut elapsed = Duration::ZERO;
    let mut seed = 11;
    while elapsed + step < MERGE_GATHER_MAX {
        rig.now += step;
        elapsed += step;
        let actions = rig.absorb(seed, "more", Framing::Interrupt);
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::Driver(DriverAction::Prompt(..)))),
            "{actions:?}"
        );
        seed += 1;
    }
    let actions = rig.advance(MERGE_GATHER_MAX - elapsed);
    assert_eq!(
        count(&actions, |a| matches!(
            a,
            Action::Driver(DriverAction::Prompt(..))
        )),
        1,
        "{actions:?}"
    );
}

#[test]
fn a_steer_refused_because_the_turn_ended_goes_to_the_next_turn() {
    let mut rig = Rig::prompting(&["first"]);
    let ticket = rig.steer(10, "second");
    let answer = SteerAnswer::TurnOver("no active run".into());
    assert_eq!(
        rig.feed(Input::SteerAnswered { ticket, answer }),
        [steered(SteerOutcome::Refused)]
    );
    rig.ended(StopReason::EndTurn, &[]);
    let actions = rig.feed(Input::Published(Ok(())));
    let (_, work, returned) = rig.end(&actions, &[]);
    assert_eq!((texts(&work), texts(&returned)), (vec!["first"], vec!["second"]));
}

#[test]
fn a_prompt_that_ends_before_its_cancel_lands_answers_its_work_and_returns_the_merge() {
    let mut rig = Rig::prompting(&["first"]);
    assert_eq!(
        rig.absorb(10, "second", Framing::Interrupt),
        [
            steered(SteerOutcome::Fallback),
            Action::Driver(DriverAction::Cancel)
        ]
    );
    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(texts(&published(&actions).0), ["first"]);
    let actions = rig.feed(Input::Published(Ok(())));
    let (_, work, returned) = rig.end(&actions, &[]);
    assert_eq!((texts(&work), texts(&returned)), (vec!["first"], vec!["second"]));
}

#[test]
fn a_steer_during_an_owner_question_is_held_and_delivered_after_the_answer() {
    let mut rig = Rig::prompting(&["deploy it"]);
    let asked = Asked {
        ticket: 1,
        summary: "rm -rf build".into(),
        shows: String::new(),
        ask: Ask::Permission(questions::tests::options()),
    };
    let actions = rig.feed(Input::QuestionAsked(asked));
    let [
        Action::Driver(DriverAction::PostQuestion {
            ticket: 1,
            under,
            text,
        }),
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!(under.content, "deploy it");
    assert!(text.contains("rm -rf build"));
    let event = EventId::from_slice(&[9; 32]).expect("id");
    let actions = rig.feed(Input::QuestionPosted {
        ticket: 1,
        event: Some(event),
    });
    assert_eq!(
        actions,
        [Action::Driver(DriverAction::SetTimer(Some(
            rig.now + QUESTION_TIMEOUT
        )))]
    );
    assert_eq!(
        rig.machine.waiting_on().as_deref(),
        Some("a permission question (rm -rf build)")
    );

    let actions = rig.absorb(10, "status?", Framing::Steer);
    let [Action::Heart(HeartAction::Inform { mention, text })] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert_eq!(mention.content, "status?");
    assert!(text.contains("waiting for the owner") && text.contains("rm -rf build"));

    let mut reply = mention_reply(20, "2", event);
    assert_eq!(rig.machine.question_event(), Some(event));
    assert!(
        matches!(rig.machine.route(&reply.content), Some(Routed::Answered(Answer::Option(o))) if o.id == "b")
    );
    reply.content = "2".into();
    let actions = rig.feed(Input::OwnerReply(reply.content.clone()));
    assert!(
        matches!(&actions[0], Action::Driver(DriverAction::AnswerQuestion { ticket: 1, answer: Answer::Option(option) }) if option.id == "b")
    );
    assert!(
        matches!(&actions[1], Action::Driver(DriverAction::Steer { text, .. }) if text.contains("> status?")),
        "the held mention is steered in: {actions:?}"
    );
    assert_eq!(actions[2], Action::Driver(DriverAction::SetTimer(None)));
    assert_eq!(rig.machine.waiting_on(), None);
}

fn mention_reply(seed: u64, text: &str, to: EventId) -> Mention {
    let mut reply = mention(seed, text);
    reply.replies_to = Some(to);
    reply
}

#[test]
fn an_unanswered_question_is_rejected_at_its_deadline_and_the_thread_told() {
    let mut rig = Rig::prompting(&["deploy it"]);
    rig.ask_posted("rm -rf build");
    assert_eq!(rig.advance(QUESTION_TIMEOUT / 2), [], "not yet");
    let actions = rig.advance(QUESTION_TIMEOUT / 2);
    assert_eq!(
        actions[0],
        Action::Driver(DriverAction::RejectQuestion { ticket: 1 })
    );
    assert!(
        matches!(&actions[1], Action::Heart(HeartAction::QuestionNotice { under, text }) if under.content == "deploy it" && text.contains("was rejected"))
    );
    assert_eq!(actions[2], Action::Driver(DriverAction::SetTimer(None)));
}

/// An agent that keeps asking: the turn's first 32 questions go to the
/// owner (one posted, the rest waiting behind it); every further one is
/// refused at once, and the thread is told once.
#[test]
fn questions_past_the_turns_bound_are_refused_at_once_and_the_thread_told_once() {
    let mut rig = Rig::prompting(&["deploy it"]);
    let asked = |ticket: QuestionTicket| {
        Input::QuestionAsked(Asked {
            ticket,
            summary: format!("tool {ticket}"),
            shows: String::new(),
            ask: Ask::Permission(questions::tests::options()),
        })
    };
    let bound = questions::MAX_QUESTIONS_PER_TURN as QuestionTicket;
    let first = rig.feed(asked(1));
    assert!(
        matches!(
            first.as_slice(),
            [Action::Driver(DriverAction::PostQuestion { ticket: 1, .. })]
        ),
        "{first:?}"
    );
    for ticket in 2..=bound {
        assert_eq!(
            rig.feed(asked(ticket)),
            [],
            "question {ticket} waits behind the open one"
        );
    }
    let refused = rig.feed(asked(bound + 1));
    assert_eq!(
        refused[0],
        Action::Driver(DriverAction::RejectQuestion { ticket: bound + 1 })
    );
    assert!(
        matches!(&refused[1], Action::Heart(HeartAction::QuestionNotice { under, text }) if under.content == "deploy it" && text.contains("further questions are refused")),
        "{refused:?}"
    );
    assert_eq!(
        rig.feed(asked(bound + 2)),
        [Action::Driver(DriverAction::RejectQuestion { ticket: bound + 2 })],
        "told once"
    );
    assert_eq!(
        rig.machine.waiting_on().as_deref(),
        Some("a permission question (tool 1)"),
        "the open question is untouched"
    );
}

#[test]
fn an_owner_reply_that_names_no_option_changes_nothing() {
    let mut rig = Rig::prompting(&["deploy it"]);
    rig.ask_posted("rm");
    assert!(matches!(
        rig.machine.route("maybe"),
        Some(Routed::Unrecognized { .. })
    ));
    assert_eq!(rig.feed(Input::OwnerReply("maybe".into())), []);
    assert_eq!(
        rig.machine.waiting_on().as_deref(),
        Some("a permission question (rm)")
    );
}

#[test]
fn mentions_absorbed_before_the_first_prompt_join_it() {
    let mut rig = Rig::leasing(&["first"]);
    assert_eq!(rig.absorb(10, "second", Framing::Steer), []);
    let actions = rig.feed(Input::Leased);
    let [Action::Driver(DriverAction::Prompt(text, _))] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert!(text.contains("> first") && text.contains("> second"));
}

#[test]
fn mentions_for_a_concluding_turn_go_back_to_the_queue() {
    let mut rig = Rig::prompting(&["first"]);
    rig.ended(StopReason::EndTurn, &[]);
    let late = mention(10, "late");
    let actions = rig.feed(Input::Absorb {
        mentions: vec![late.clone()],
        framing: Framing::Steer,
    });
    assert_eq!(actions, [Action::Heart(HeartAction::Requeue(vec![late.clone()]))]);
    rig.given.push(late.clone());
    let actions = rig.feed(Input::Published(Ok(())));
    rig.end(&actions, &[late]);
}

#[test]
fn timeouts_stop_the_runaway_prompt_before_the_turn_fails() {
    for failure in [TurnFailure::IdleTimeout, TurnFailure::Deadline] {
        let mut rig = Rig::prompting(&["slow"]);
        let actions = rig.feed(Input::PromptEnded(Err(failure.clone())));
        assert_eq!(actions[0], Action::Driver(DriverAction::StopRunaway));
        assert_eq!(actions[1], Action::Driver(DriverAction::Release));
        let (outcome, work, _) = rig.end(&actions, &[]);
        assert_eq!(outcome, Outcome::Failed(failure));
        assert_eq!(texts(&work), ["slow"]);
    }
}

#[test]
fn an_agent_that_ignores_its_cancel_is_discarded() {
    let mut rig = Rig::prompting(&["first"]);
    rig.absorb(10, "second", Framing::Interrupt);
    assert_eq!(
        rig.feed(Input::CancelSettled(CancelSettled::TimedOut)),
        [Action::Driver(DriverAction::Discard)]
    );
}

#[test]
fn the_owner_cancel_before_the_agent_is_ready_never_prompts() {
    let mut rig = Rig::leasing(&["first"]);
    assert_eq!(rig.feed(Input::OwnerCancel), []);
    let actions = rig.feed(Input::Leased);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Driver(DriverAction::Prompt(..)))),
        "{actions:?}"
    );
    let (outcome, work, _) = rig.end(&actions, &[]);
    assert_eq!(
        (outcome, texts(&work)),
        (Outcome::CancelledByOwner, vec!["first"])
    );
}

#[test]
fn a_turn_at_its_cap_is_cancelled_and_ends_capped_not_cancelled_by_the_owner() {
    let mut rig = Rig::prompting(&["first"]);
    assert_eq!(
        rig.feed(Input::CapReached("at the cap".into())),
        [Action::Driver(DriverAction::Cancel)]
    );
    assert_eq!(rig.feed(Input::OwnerCancel), [], "already being stopped");
    assert_eq!(
        rig.absorb(10, "later", Framing::Steer),
        [],
        "a mention for a capped turn waits for the next"
    );
    let actions = rig.ended(StopReason::Cancelled, &[]);
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert_eq!(outcome, Outcome::Capped("at the cap".into()));
    assert_eq!((texts(&work), texts(&returned)), (vec!["first"], vec!["later"]));
}

#[test]
fn a_cap_reached_while_a_merge_gathers_ends_the_turn_without_the_reprompt() {
    let mut rig = Rig::prompting(&["first"]);
    rig.absorb(10, "second", Framing::Interrupt);
    rig.ended(StopReason::Cancelled, &[]);
    let actions = rig.feed(Input::CapReached("at the cap".into()));
    assert_eq!(
        count(&actions, |a| matches!(
            a,
            Action::Driver(DriverAction::Prompt(..))
        )),
        0,
        "{actions:?}"
    );
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert_eq!(outcome, Outcome::Capped("at the cap".into()));
    assert_eq!((texts(&work), texts(&returned)), (vec!["first"], vec!["second"]));
}

#[test]
fn the_owner_cancel_during_a_merge_gather_still_reprompts_the_merge() {
    let mut rig = Rig::prompting(&["first"]);
    rig.absorb(10, "second", Framing::Interrupt);
    rig.ended(StopReason::Cancelled, &[]);
    let actions = rig.feed(Input::OwnerCancel);
    assert_eq!(
        count(&actions, |a| matches!(
            a,
            Action::Driver(DriverAction::Prompt(..))
        )),
        1,
        "{actions:?}"
    );
}

/// Puts a mention in every role a live prompt can give, beside the
/// prompted one: a steer acknowledged but not folded, a steer not yet
/// answered, and one held behind an owner question or one waiting for a
/// merge (a turn never has both: a pending merge takes everything).
fn crowd(rig: &mut Rig, with_merge: bool) {
    rig.steer_queued(10, "steered", "m");
    rig.absorb(11, "steering", Framing::Steer);
    if with_merge {
        assert_eq!(
            rig.absorb(12, "merging", Framing::Interrupt),
            [
                steered(SteerOutcome::Fallback),
                Action::Driver(DriverAction::Cancel)
            ]
        );
    } else {
        rig.ask_posted("q");
        let actions = rig.absorb(12, "held", Framing::Steer);
        assert!(
            matches!(actions.as_slice(), [Action::Heart(HeartAction::Inform { .. })]),
            "{actions:?}"
        );
    }
}

/// Every way a turn can end, from a crowded turn: every mention leaves in
/// the end, exactly once, and the driver is released last.
#[test]
fn every_exit_answers_or_returns_every_mention() {
    type Exit = fn(&mut Rig) -> Vec<Action>;
    let exits: [(&str, Exit, Outcome); 8] = [
        (
            "answered",
            |rig| {
                rig.ended(StopReason::EndTurn, &[]);
                rig.feed(Input::Published(Ok(())))
            },
            Outcome::Answered,
        ),
        (
            "refused by the agent",
            |rig| {
                let actions = rig.ended(StopReason::Refusal, &[]);
                assert_eq!(published(&actions).2, Publication::Notice);
                rig.feed(Input::Published(Ok(())))
            },
            Outcome::Notified,
        ),
        (
            "reply not stored",
            |rig| {
                rig.ended(StopReason::MaxTokens, &[]);
                rig.feed(Input::Published(Err("disk full".into())))
            },
            Outcome::Failed(TurnFailure::Store("disk full".into())),
        ),
        (
            "agent crashed",
            |rig| rig.feed(Input::PromptEnded(Err(TurnFailure::Agent("exit 3".into())))),
            Outcome::Failed(TurnFailure::Agent("exit 3".into())),
        ),
        (
            "owner cancel",
            |rig| {
                rig.feed(Input::OwnerCancel);
                rig.ended(StopReason::Cancelled, &[])
            },
            Outcome::CancelledByOwner,
        ),
        (
            "capped",
            |rig| {
                rig.feed(Input::CapReached("stopped at the cap".into()));
                rig.ended(StopReason::Cancelled, &[])
            },
            Outcome::Capped("stopped at the cap".into()),
        ),
        (
            "abandoned at shutdown",
            |rig| rig.feed(Input::Abandon),
            Outcome::Abandoned,
        ),
        (
            "abandoned while gathering a merge or cancelled by the agent",
            |rig| {
                let actions = rig.ended(StopReason::Cancelled, &[]);
                if actions
                    .iter()
                    .any(|action| matches!(action, Action::Heart(HeartAction::Finished(_))))
                {
                    return actions;
                }
                rig.feed(Input::Abandon)
            },
            Outcome::Abandoned,
        ),
    ];
    for with_merge in [false, true] {
        for (name, exit, expected) in &exits {
            let mut rig = Rig::prompting(&["prompted"]);
            crowd(&mut rig, with_merge);
            let actions = exit(&mut rig);
            let (outcome, work, returned) = rig.end(&actions, &[]);
            let expected = match (name.starts_with("abandoned while"), with_merge) {
                (true, false) => Outcome::Failed(TurnFailure::Agent(
                    "the agent cancelled the turn by itself".into(),
                )),
                _ => expected.clone(),
            };
            assert_eq!(outcome, expected, "{name}, merge {with_merge}");
            assert!(outcome.ran(), "{name}: a turn with an agent is counted");
            assert!(texts(&work).contains(&"prompted"), "{name}: {work:?}");
            assert!(
                ["steered", "steering"]
                    .iter()
                    .all(|text| texts(&returned).contains(text)),
                "{name}: unconfirmed steers go to the next turn: {returned:?}"
            );
            assert_eq!(
                rig.driver_stops(),
                1,
                "{name}: the driver is stopped once: {:?}",
                rig.log
            );
            assert_eq!(
                rig.absorb(99, "after", Framing::Steer).len(),
                1,
                "{name}: requeued once the turn is over"
            );
        }
    }
}

#[test]
fn a_turn_that_never_got_an_agent_did_not_run() {
    let mut rig = Rig::leasing(&["hello"]);
    let actions = rig.feed(Input::LeaseFailed(LeaseFailure {
        reason: "the agent cannot start: no such binary".into(),
        remedy: Remedy::Operator,
    }));
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert!(
        matches!(outcome, Outcome::Failed(TurnFailure::Pool(_))),
        "{outcome:?}"
    );
    assert!(!outcome.ran(), "neither logged nor counted as a finished turn");
    assert_eq!((texts(&work), returned.len()), (vec!["hello"], 0));
    assert_eq!(rig.driver_stops(), 1, "{:?}", rig.log);
}

#[test]
fn a_full_session_is_rotated_after_its_answer() {
    let mut rig = Rig::prompting(&["big"]);
    let actions = rig.ended(StopReason::MaxTokens, &[]);
    assert_eq!(actions[0], Action::Driver(DriverAction::RotateSession));
    assert_eq!(published(&actions).2, Publication::Answer);
}

#[test]
fn a_question_the_agent_withdraws_is_closed_and_the_held_mentions_go_in() {
    let mut rig = Rig::prompting(&["deploy it"]);
    rig.ask_posted("rm -rf build");
    let held = rig.absorb(10, "status?", Framing::Steer);
    assert!(
        matches!(held.as_slice(), [Action::Heart(HeartAction::Inform { .. })]),
        "{held:?}"
    );
    let actions = rig.feed(Input::QuestionWithdrawn { ticket: 1 });
    assert!(
        matches!(&actions[0], Action::Heart(HeartAction::QuestionNotice { under, text }) if under.content == "deploy it" && text.contains("no longer needs")),
        "{actions:?}"
    );
    assert!(
        matches!(&actions[1], Action::Driver(DriverAction::Steer { text, .. }) if text.contains("> status?")),
        "{actions:?}"
    );
    assert_eq!(rig.machine.waiting_on(), None);
    assert_eq!(rig.machine.question_event(), None);
}

/// A copy of the parts of an action the log checks need.
#[test]
fn a_slash_command_turn_asks_the_driver_to_run_it_and_takes_nothing_else() {
    let mut rig = Rig::leasing(&["nostr:npub1bot /compact now"]);
    let joined = rig.absorb(2, "hello meanwhile", Framing::Steer);
    assert!(joined.is_empty(), "{joined:?}");
    let actions = rig.feed(Input::Leased);
    let [Action::Driver(DriverAction::AgentCommand(command))] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert_eq!(command.prompt(), "/compact now");
    let steered = rig.absorb(3, "and this", Framing::Steer);
    assert!(
        steered.is_empty(),
        "a command's turn is never steered: {steered:?}"
    );
    let actions = rig.ended(StopReason::EndTurn, &[]);
    let (_, text, publication) = published(&actions);
    assert_eq!((text.as_str(), publication), ("the answer", Publication::Answer));
    let actions = rig.feed(Input::Published(Ok(())));
    let (outcome, work, returned) = rig.end(&actions, &[]);
    assert_eq!(outcome, Outcome::Answered);
    assert_eq!(texts(&work), ["nostr:npub1bot /compact now"]);
    assert_eq!(texts(&returned), ["hello meanwhile", "and this"]);
}

/// claude's `/compact` acts and writes nothing: the thread is told the
/// command ran, not that the agent wrote no answer.
#[test]
fn a_slash_command_that_writes_nothing_is_answered_that_it_ran() {
    let mut rig = Rig::leasing(&["/compact"]);
    rig.feed(Input::Leased);
    let actions = rig.feed(Input::PromptEnded(Ok(PromptEnd {
        stop_reason: StopReason::EndTurn,
        message: " \n".into(),
        folded: Vec::new(),
        usage: TurnUsage::default(),
    })));
    let (_, text, publication) = published(&actions);
    assert_eq!(
        (text.as_str(), publication),
        (
            "(Ran /compact: the agent wrote nothing back.)",
            Publication::Answer
        )
    );
}

#[test]
fn a_command_the_session_does_not_offer_ends_in_its_notice() {
    let mut rig = Rig::leasing(&["/nope"]);
    rig.feed(Input::Leased);
    let actions = rig.feed(Input::CommandRefused("not offered".into()));
    let (mentions, text, publication) = published(&actions);
    assert_eq!(
        (texts(&mentions), text.as_str(), publication),
        (vec!["/nope"], "not offered", Publication::Notice)
    );
    let actions = rig.feed(Input::Published(Ok(())));
    assert_eq!(rig.end(&actions, &[]).0, Outcome::Notified);
}

#[test]
fn a_slash_command_mid_turn_waits_for_a_turn_of_its_own() {
    let mut rig = Rig::prompting(&["work on it"]);
    let actions = rig.absorb(2, "/compact", Framing::Interrupt);
    assert!(actions.is_empty(), "neither steered nor merged: {actions:?}");
    let actions = rig.ended(StopReason::EndTurn, &[]);
    assert_eq!(published(&actions).1, "the answer");
    let actions = rig.feed(Input::Published(Ok(())));
    let (_, work, returned) = rig.end(&actions, &[]);
    assert_eq!(
        (texts(&work), texts(&returned)),
        (vec!["work on it"], vec!["/compact"])
    );
}

fn clone_action(action: &Action) -> Action {
    match action {
        Action::Driver(DriverAction::Publish {
            mentions,
            text,
            publication,
        }) => Action::Driver(DriverAction::Publish {
            mentions: mentions.clone(),
            text: text.clone(),
            publication: *publication,
        }),
        Action::Driver(DriverAction::Release) => Action::Driver(DriverAction::Release),
        Action::Driver(DriverAction::Abandon) => Action::Driver(DriverAction::Abandon),
        Action::Driver(DriverAction::Lease) => Action::Driver(DriverAction::Lease),
        _ => Action::Driver(DriverAction::SetTimer(None)),
    }
}
