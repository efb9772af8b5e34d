//! Process groups of the agents that run now, so that the next start can
//! end what a killed daemon left behind (see `pool::reaper`).
//!
//! A group is recorded by its id (the leader's pid) with what tells that
//! leader apart from a later process that got the same pid: the boot it
//! ran in and its start time in clock ticks since boot.

use std::sync::Arc;

use rusqlite::params;

use super::{Result, Store, sql_now};

/// One recorded agent process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentGroup {
    /// The process group id, which is the leader's pid.
    pub pgid: i32,
    /// `/proc/sys/kernel/random/boot_id` when the leader started.
    pub boot_id: String,
    /// The leader's start time, clock ticks after boot (`/proc/<pid>/stat`).
    pub start_ticks: u64,
}

/// The door to the recorded agent process groups: the pool records and
/// forgets them, the start-up sweep reads them. The only way to the table.
#[derive(Debug, Clone)]
pub(crate) struct AgentGroups {
    store: Arc<Store>,
}

impl AgentGroups {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        AgentGroups { store }
    }

    /// Records the group of an agent that just started.
    pub(crate) fn record(&self, group: &AgentGroup) -> Result<()> {
        self.store.agent_group_record(group, sql_now())
    }

    /// Forgets a group (its agent ended, or the sweep dealt with it).
    pub(crate) fn forget(&self, pgid: i32) -> Result<()> {
        self.store.agent_group_forget(pgid)
    }

    /// Every recorded group, oldest first.
    pub(crate) fn all(&self) -> Result<Vec<AgentGroup>> {
        self.store.agent_groups()
    }
}

impl Store {
    /// Records the group of an agent that just started.
    pub(super) fn agent_group_record(&self, group: &AgentGroup, now: i64) -> Result<()> {
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO agent_group (pgid, boot_id, start_ticks, started_at)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                group.pgid,
                group.boot_id,
                i64::try_from(group.start_ticks).unwrap_or(i64::MAX),
                now
            ])?;
        Ok(())
    }

    /// Forgets a group (its agent ended, or the sweep dealt with it).
    pub(super) fn agent_group_forget(&self, pgid: i32) -> Result<()> {
        self.conn()
            .prepare_cached("DELETE FROM agent_group WHERE pgid = ?1")?
            .execute(params![pgid])?;
        Ok(())
    }

    /// Every recorded group, oldest first.
    pub(super) fn agent_groups(&self) -> Result<Vec<AgentGroup>> {
        let conn = self.conn();
        let mut statement =
            conn.prepare_cached("SELECT pgid, boot_id, start_ticks FROM agent_group ORDER BY started_at")?;
        let rows = statement.query_map([], |row| {
            Ok(AgentGroup {
                pgid: row.get(0)?,
                boot_id: row.get(1)?,
                start_ticks: u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch::ScratchDir;
    use super::*;

    #[test]
    fn recorded_groups_survive_a_reopen_until_forgotten() {
        let dir = ScratchDir::new("agent-groups");
        let store = Store::open(dir.path()).unwrap();
        let group = |pgid| AgentGroup {
            pgid,
            boot_id: "boot".to_owned(),
            start_ticks: 42,
        };
        store.agent_group_record(&group(7), 10).unwrap();
        store.agent_group_record(&group(9), 11).unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.agent_groups().unwrap(), vec![group(7), group(9)]);
        store.agent_group_forget(7).unwrap();
        assert_eq!(store.agent_groups().unwrap(), vec![group(9)]);
    }
}
