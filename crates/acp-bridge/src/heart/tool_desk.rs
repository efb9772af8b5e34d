//! What the heart lends an MCP tool while it carries a call out (see
//! `tools`): the conversation's turn in flight (the mention a message
//! posted now goes under), its journaled mentions, its rate limits, the
//! handles tools act through, and the delegated tasks it keeps. The tools
//! themselves live in `tools`, one file each. The heart owns the turns, so
//! only it knows which mention a message posted mid-turn belongs under.

use acp_bridge_core::mention::{ConversationKey, Mention};
use nostr_sdk::prelude::EventId;

use super::Heart;
use crate::intake::thread_context::ThreadContext;
use crate::outbound::reply::Replier;
use crate::policy::rate_limit::RateLimiter;
use crate::tools::upload::FileSender;
use crate::tools::{Answer, Context, DelegateCall, ToolRequest};

impl Heart {
    /// Carries out a call of a tool for the conversation of its token.
    pub(super) fn on_tool_request(&mut self, request: ToolRequest) {
        self.counters.tool_calls += 1;
        let conversation = request.conversation.clone();
        request.carry_out(&mut ToolDesk {
            heart: self,
            conversation,
        });
    }
}

/// The heart, lent to one tool call of `conversation`'s agent.
struct ToolDesk<'a> {
    heart: &'a mut Heart,
    conversation: ConversationKey,
}

impl Context for ToolDesk<'_> {
    fn conversation(&self) -> &ConversationKey {
        &self.conversation
    }

    fn turn_mention(&self) -> Option<Mention> {
        self.heart
            .conversations
            .running(&self.conversation)
            .map(|running| running.turn.working_on().clone())
    }

    fn journaled_mention(&self, id: &EventId) -> Option<Mention> {
        self.heart.ledger.mention_in(id, &self.conversation)
    }

    fn post_budget(&mut self) -> &mut RateLimiter<ConversationKey> {
        &mut self.heart.tool_posts
    }

    fn read_budget(&mut self) -> &mut RateLimiter<ConversationKey> {
        &mut self.heart.tool_reads
    }

    fn max_text_bytes(&self) -> usize {
        self.heart.services.options.max_text_bytes
    }

    fn replier(&self) -> &Replier {
        &self.heart.services.replier
    }

    fn files(&self) -> &FileSender {
        &self.heart.services.files
    }

    fn thread_context(&self) -> Option<&ThreadContext> {
        self.heart.services.context.as_ref()
    }

    fn delegate(&mut self, call: DelegateCall, answer: Answer) {
        self.heart.delegate(&self.conversation, call, answer);
    }

    fn task_status(&mut self, id: &str) -> Result<String, String> {
        self.heart.task_status(&self.conversation, id)
    }

    fn task_stop(&mut self, id: &str) -> Result<String, String> {
        self.heart.task_stop(&self.conversation, id)
    }
}
