//! `!sessions`: this conversation's sessions, as its agent lists them
//! (`session/list` with the conversation's workspace as `cwd`), each with
//! its title, last activity and a short id, the live one marked. Only
//! sessions this conversation has had are shown: in a shared workspace the
//! agent lists every conversation's, and a thread is read by others, so
//! one conversation must never see another's (nor `!resume` it).

use acp_bridge_core::prompt::title_line;
use chrono::{DateTime, Utc};

use super::{Command, Context, Who, no_args};
use crate::agents::pool::{ListedPast, SessionsView};

pub(crate) struct Sessions;

impl Command for Sessions {
    const NAME: &'static str = "!sessions";
    const HELP: &'static str = "!sessions: this conversation's sessions as the agent lists them (title, last activity, id; the live one marked).";
    const WHO: Who = Who::Owner;

    fn parse(args: &str) -> Option<Self> {
        no_args(args).then_some(Sessions)
    }

    fn apply(self, context: &mut dyn Context) -> String {
        let pool = context.pool();
        let key = context.key().clone();
        context.answer_later(Box::pin(async move {
            match pool.sessions_view(&key).await {
                Ok(view) => describe(&view),
                Err(error) => format!("Cannot list this conversation's sessions: {error}."),
            }
        }));
        String::new()
    }
}

/// `!sessions`' answer.
fn describe(view: &SessionsView) -> String {
    let Some(listed) = &view.listed else {
        return "This agent does not list its sessions (no session/list): there is nothing to show or resume; !new starts a fresh session.".to_owned();
    };
    if listed.is_empty() {
        return format!(
            "The agent lists none of this conversation's sessions yet (its live one, {}, is listed once it holds a turn).",
            view.live
        );
    }
    let ids: Vec<&str> = listed.iter().map(|past| past.id.as_str()).collect();
    let lines = listed.iter().map(|past| {
        let mark = if past.id == view.live.as_str() { '*' } else { '-' };
        format!(
            "{mark} {}: {}, last active {}",
            short_id(&past.id, &ids),
            past.title
                .as_deref()
                .and_then(title_line)
                .unwrap_or_else(|| "(untitled)".to_owned()),
            last_active(past)
        )
    });
    std::iter::once(
        "This conversation's sessions (* the live one; `!resume ID` goes back to one):".to_owned(),
    )
    .chain(lines)
    .collect::<Vec<_>>()
    .join("\n")
}

/// The agent's word for a session's last activity, else when the
/// conversation last took it up.
fn last_active(past: &ListedPast) -> String {
    let agents = past
        .updated_at
        .as_deref()
        .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
        .map(|at| at.with_timezone(&Utc));
    agents
        .or_else(|| DateTime::from_timestamp(past.used_at, 0))
        .map_or_else(
            || "unknown".to_owned(),
            |at| at.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
}

/// The shortest prefix of `id` (8 characters at least) that no other of
/// `ids` starts with: what `!resume` needs.
pub(super) fn short_id<'a>(id: &'a str, ids: &[&str]) -> &'a str {
    let mut ends = id.char_indices().map(|(at, _)| at).skip(8).chain([id.len()]);
    ends.find(|&end| {
        let prefix = &id[..end];
        ids.iter().filter(|other| other.starts_with(prefix)).count() == 1
    })
    .map_or(id, |end| &id[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_id_is_the_shortest_unique_prefix_of_eight_characters_at_least() {
        let ids = ["0fea55e9-1111", "0fea55e9-2222", "7b1c2d3e-3333"];
        assert_eq!(short_id(ids[0], &ids), "0fea55e9-1");
        assert_eq!(short_id(ids[2], &ids), "7b1c2d3e");
        assert_eq!(short_id("abc", &["abc"]), "abc");
        let scripted = ["sess_0000abcd_1", "sess_0000abcd_12"];
        assert_eq!(short_id(scripted[0], &scripted), "sess_0000abcd_1");
    }
}
