//! The agent's plan (ACP `plan` updates): each update is the whole list,
//! so it replaces the one before; what changed decides whether the plan
//! moved on (a milestone) or was merely restated.

use serde_json::Value;

use super::clip;

/// Most plan entries kept; an agent's longer list is cut.
pub(super) const MAX_PLAN_ENTRIES: usize = 100;
/// Longest text of one entry kept, in bytes.
const MAX_ENTRY_BYTES: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

impl PlanStatus {
    /// An unknown or missing status reads as pending.
    fn parse(status: Option<&str>) -> Self {
        match status {
            Some("in_progress") => PlanStatus::InProgress,
            Some("completed") => PlanStatus::Completed,
            _ => PlanStatus::Pending,
        }
    }

    /// The checklist box: ☑ done, ▶ in progress, ☐ pending.
    pub fn mark(self) -> char {
        match self {
            PlanStatus::Pending => '☐',
            PlanStatus::InProgress => '▶',
            PlanStatus::Completed => '☑',
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    pub content: String,
    pub status: PlanStatus,
}

/// Reads a `plan` update's `entries`; anything but an array reads as no
/// change (`None`), an entry that is not an object as an empty one.
pub(super) fn parse(entries: &Value) -> Option<Vec<PlanEntry>> {
    let entries = entries.as_array()?;
    Some(
        entries
            .iter()
            .take(MAX_PLAN_ENTRIES)
            .map(|entry| PlanEntry {
                content: clip(
                    entry.get("content").and_then(Value::as_str).unwrap_or_default(),
                    MAX_ENTRY_BYTES,
                ),
                status: PlanStatus::parse(entry.get("status").and_then(Value::as_str)),
            })
            .collect(),
    )
}

/// Whether `new` advances on `old`: entries added, removed or reworded,
/// or one that started or completed. A restated plan, or one whose entry
/// went back to pending, is not.
pub(super) fn advances(old: &[PlanEntry], new: &[PlanEntry]) -> bool {
    old.len() != new.len()
        || old.iter().zip(new).any(|(old, new)| {
            old.content != new.content || (old.status != new.status && new.status != PlanStatus::Pending)
        })
}
