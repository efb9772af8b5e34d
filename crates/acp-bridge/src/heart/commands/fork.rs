//! `!fork TEXT`: a side question, answered in a fork of this conversation's
//! session (`session/fork`): the answer knows the conversation, and the
//! conversation's own session is neither prompted nor changed by it, so
//! its next turn does not see the side question. Where the agent does not
//! fork sessions, the owner is told so.

use super::{Command, Context, Who, words};

pub(crate) struct Fork {
    question: String,
}

impl Command for Fork {
    const NAME: &'static str = "!fork";
    const HELP: &'static str = "!fork TEXT: a side question answered in a fork of this conversation's session, which it leaves as it was.";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        words(args).next()?;
        Some(Fork {
            question: args.to_owned(),
        })
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let pool = context.pool();
        let key = context.key().clone();
        context.answer_later(Box::pin(async move {
            match pool.side_question(&key, &self.question).await {
                Ok(Some(answer)) => format!("(Side answer, from a fork of this conversation's session, which stays as it was.)\n\n{answer}"),
                Ok(None) => "This agent does not fork sessions (no session/fork): ask in the thread instead.".to_owned(),
                Err(error) => format!("The side question failed: {error}."),
            }
        }));
        String::new()
    }
}
