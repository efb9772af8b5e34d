//! acp-bridge's end-to-end tests (the real binary, a real relay, real
//! agents) and the checks that read the repository, in one test binary
//! (issue 36): each former `tests/NAME.rs` is the module `NAME`, its tests
//! named `NAME::test_name` (`cargo test -p acp-bridge --test e2e --
//! faults::`). Each test binary links the whole daemon; 42 of them were
//! most of a cold build's time and disk.
//!
//! Tests of every module run together on this process's test threads, so
//! none changes process-wide state (environment, current directory, signal
//! dispositions; `metrics_endpoint` only raises the descriptor limit), and
//! what a test counts (processes, descriptors, log lines) it scopes to the
//! daemons it started, never to the test process.

mod support;

mod agent_commands;
mod agent_uids;
mod announcements;
mod approvals;
mod ask_owner;
mod author_gate;
mod budgets;
mod cli;
mod comments;
mod delegate;
mod docs;
mod durability;
mod faults;
mod groups;
mod heart;
mod hostile;
mod identity;
mod intake_bounds;
mod interop_relay;
mod isolation;
mod live_sessions;
mod long_replies;
mod marmot;
mod mcp;
mod mcp_servers;
mod mcp_stdio;
mod media;
mod metrics_endpoint;
mod misbehaving_agent;
mod module_graph;
mod operability;
mod owner_controls;
mod pool;
mod profiles;
mod progress;
mod publishing;
mod pure_core;
mod read_thread;
mod real_agents;
mod relay_auth;
mod remote_agent;
mod remote_signer;
mod replies;
mod routes;
mod schedules;
mod send_file;
mod sessions;
mod shards;
mod thread_context;
mod turn_prep;
mod waiting;
mod work_view;
mod workspaces;
