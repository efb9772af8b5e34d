//! What the heart lends an owner command while it runs (see `commands`):
//! the conversation's live turn (to cancel it, or to rotate its session
//! after it), its own facts for `!status`, and the handles commands act
//! on. The commands themselves live in `commands`, one file each.

use acp_bridge_core::mention::Mention;
use acp_bridge_core::turn::Input;
use acp_client::ControlKind;

use super::{Heart, controls, driver, usage};
use crate::agents::pool::Pool;
use crate::heart::commands::{Context, HereFacts, Later, StatusFacts};
use crate::heart::profiles::ProfileBook;
use crate::heart::schedule::Planner;
use crate::policy::budget::Budget;
use crate::state::store::Approvals;

/// The heart, lent to one command given in `mention`'s conversation.
pub(super) struct CommandDesk<'a> {
    pub heart: &'a mut Heart,
    pub mention: &'a Mention,
    /// The answer, when the command works it out later.
    pub later: Option<Later>,
}

impl Context for CommandDesk<'_> {
    fn mention(&self) -> &Mention {
        self.mention
    }

    fn replier(&self) -> &crate::outbound::reply::Replier {
        &self.heart.services.replier
    }

    fn turn_running(&self) -> bool {
        self.heart.conversations.running(self.key()).is_some()
    }

    fn cancel_turn(&mut self) {
        let key = self.mention.conversation.clone();
        self.heart.step(&key, Input::OwnerCancel);
    }

    fn rotate(&mut self) {
        let key = self.mention.conversation.clone();
        self.heart.rotate_conversation(&key);
    }

    fn schedules(&self) -> Option<&Planner> {
        self.heart.settings.schedules.as_ref()
    }

    fn budget(&self) -> &Budget {
        &self.heart.services.budget
    }

    fn profiles(&self) -> &ProfileBook {
        &self.heart.services.profiles
    }

    fn approvals(&self) -> &Approvals {
        &self.heart.services.approvals
    }

    fn control(&mut self, kind: ControlKind, choice: Option<&str>) -> String {
        let running = self.turn_running();
        controls::command(&self.heart.services.controls, self.key(), kind, choice, running)
    }

    fn pool(&self) -> Pool {
        let profile = self.heart.services.profiles.of(self.key());
        self.heart.services.pool.of_profile(&profile)
    }

    fn answer_later(&mut self, work: Later) {
        self.later = Some(work);
    }

    fn options(&self) -> String {
        controls::options(&self.heart.services.controls, self.key())
    }

    fn set_option(&mut self, words: &[&str]) -> String {
        let running = self.turn_running();
        controls::set(&self.heart.services.controls, self.key(), words, running)
    }

    fn agent_commands(&self) -> String {
        let profile = self.heart.services.profiles.of(self.key());
        controls::commands(&self.heart.services.controls, self.key(), &profile)
    }

    fn status(&self) -> StatusFacts {
        let heart = &*self.heart;
        let key = self.key();
        let blocked = heart
            .conversations
            .running_turns()
            .filter_map(|(key, running)| Some((key.clone(), running.turn.waiting_on()?)))
            .collect();
        let here = HereFacts {
            turn_for: heart
                .conversations
                .running(key)
                .map(|running| running.turn.started().elapsed()),
            work: heart
                .conversations
                .running(key)
                .and_then(|running| driver::lock_work(&running.link.work()).status_text()),
            waiting: heart.conversations.waiting_in(key),
            tasks: heart
                .tasks
                .running_in(key)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            profile: heart.services.profiles.of(key),
            controls: controls::describe(&heart.services.controls, key),
            title: heart.services.sessions.title(key).ok().flatten(),
            session_usage: heart
                .services
                .sessions
                .usage(key)
                .ok()
                .flatten()
                .as_ref()
                .and_then(usage::describe),
        };
        StatusFacts {
            turns_in_flight: heart.conversations.running_count(),
            waiting: heart.conversations.waiting(),
            pool: heart.services.pool.status(),
            alive_by_profile: heart.services.pool.alive_by_profile(),
            turns_started: heart.counters.turns_started,
            absorbed: heart.counters.absorbed,
            queued_mid_turn: heart.counters.queued_mid_turn,
            tool_calls: heart.counters.tool_calls,
            blocked,
            shard: crate::policy::shard::status_text(heart.settings.shard),
            schedules: heart
                .settings
                .schedules
                .as_ref()
                .map_or(0, |planner| planner.board().count()),
            refusals: crate::outbound::reply::publisher::refusals_text(
                &heart.services.outbox,
                self.in_private(),
            ),
            here,
        }
    }
}
