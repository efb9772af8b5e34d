//! The mode gate: what a mention does when its conversation already has a
//! turn in flight (`--multiple-event-handling`, `--dedup`).
//!
//! Owns only the decision; carrying it out (steer, cancel + merge, queue)
//! belongs to the turn runner and the queue.

use crate::choice::{Choice, Word};
use crate::mention::Mention;
use crate::prompt::Framing;

/// What happens to a mention that arrives while its conversation's turn
/// runs (`--multiple-event-handling`; each value's help below).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultipleEventHandling {
    Queue,
    Steer,
    Interrupt,
    OwnerInterrupt,
}

impl Choice for MultipleEventHandling {
    const WORDS: &'static [Word<Self>] = &[
        Word {
            value: MultipleEventHandling::Queue,
            word: "queue",
            help: "Wait for the next turn",
        },
        Word {
            value: MultipleEventHandling::Steer,
            word: "steer",
            help: "Fold it into the live turn (native steer, else cancel + merge)",
        },
        Word {
            value: MultipleEventHandling::Interrupt,
            word: "interrupt",
            help: "Cancel the live turn and re-prompt with both, the new request superseding",
        },
        Word {
            value: MultipleEventHandling::OwnerInterrupt,
            word: "owner-interrupt",
            help: "Interrupt when the owner wrote it, else queue",
        },
    ];
}

/// What happens to mid-turn events the mode gate does not take (`--dedup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    Queue,
    Drop,
}

impl Choice for Dedup {
    const WORDS: &'static [Word<Self>] = &[
        Word {
            value: Dedup::Queue,
            word: "queue",
            help: "Keep them for the next turn",
        },
        Word {
            value: Dedup::Drop,
            word: "drop",
            help: "Drop them (with a notice)",
        },
    ];
}

/// What to do with a mention that arrived mid-turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Wait for the next turn.
    Queue,
    /// Fold into the live turn under this framing.
    Absorb(Framing),
    /// Not kept (`--dedup drop`): the person is told.
    Drop,
}

#[derive(Debug, Clone, Copy)]
pub struct ModeGate {
    mode: MultipleEventHandling,
    dedup: Dedup,
}

impl ModeGate {
    /// `dedup` must be `queue` unless `mode` is `queue` (checked at start-up).
    pub fn new(mode: MultipleEventHandling, dedup: Dedup) -> Self {
        ModeGate { mode, dedup }
    }

    pub fn decide(&self, mention: &Mention) -> Decision {
        if crate::slash::is_command(mention) {
            // The agent's slash command is a turn of its own (see `slash`):
            // it waits for the next turn whatever the mode, never dropped.
            return Decision::Queue;
        }
        match self.mode {
            MultipleEventHandling::Steer => Decision::Absorb(Framing::Steer),
            MultipleEventHandling::Interrupt => Decision::Absorb(Framing::Interrupt),
            MultipleEventHandling::OwnerInterrupt if mention.from_owner => {
                Decision::Absorb(Framing::Interrupt)
            }
            MultipleEventHandling::OwnerInterrupt | MultipleEventHandling::Queue => match self.dedup {
                Dedup::Queue => Decision::Queue,
                Dedup::Drop => Decision::Drop,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mention::test_mention;

    fn mention(from_owner: bool) -> Mention {
        test_mention("room", 1, "", from_owner)
    }

    #[test]
    fn each_policy_is_named_by_its_flag_word() {
        assert_eq!(MultipleEventHandling::OwnerInterrupt.word(), "owner-interrupt");
        assert_eq!(Dedup::from_word("drop"), Some(Dedup::Drop));
        assert_eq!(MultipleEventHandling::from_word("Steer"), None, "words are exact");
    }

    #[test]
    fn a_slash_command_waits_for_the_next_turn_whatever_the_mode() {
        let command = test_mention("room", 1, "/compact", false);
        for mode in [
            MultipleEventHandling::Steer,
            MultipleEventHandling::Interrupt,
            MultipleEventHandling::Queue,
        ] {
            assert_eq!(
                ModeGate::new(mode, Dedup::Queue).decide(&command),
                Decision::Queue
            );
        }
        let gate = ModeGate::new(MultipleEventHandling::Queue, Dedup::Drop);
        assert_eq!(gate.decide(&command), Decision::Queue);
    }

    #[test]
    fn each_mode_decides_as_documented() {
        let (owner, other) = (mention(true), mention(false));
        let gate = |mode| ModeGate::new(mode, Dedup::Queue);
        assert_eq!(gate(MultipleEventHandling::Queue).decide(&owner), Decision::Queue);
        assert_eq!(
            gate(MultipleEventHandling::Steer).decide(&other),
            Decision::Absorb(Framing::Steer)
        );
        assert_eq!(
            gate(MultipleEventHandling::Interrupt).decide(&other),
            Decision::Absorb(Framing::Interrupt)
        );
        assert_eq!(
            gate(MultipleEventHandling::OwnerInterrupt).decide(&owner),
            Decision::Absorb(Framing::Interrupt)
        );
        assert_eq!(
            gate(MultipleEventHandling::OwnerInterrupt).decide(&other),
            Decision::Queue
        );
        assert_eq!(
            ModeGate::new(MultipleEventHandling::Queue, Dedup::Drop).decide(&owner),
            Decision::Drop
        );
    }
}
