//! ACP's method names on the wire, one constant each, so a typo is a
//! compile error rather than a request the agent never answers.

pub const INITIALIZE: &str = "initialize";
pub const SESSION_NEW: &str = "session/new";
pub const SESSION_PROMPT: &str = "session/prompt";
pub const SESSION_CANCEL: &str = "session/cancel";
pub const SESSION_UPDATE: &str = "session/update";
pub const REQUEST_PERMISSION: &str = "session/request_permission";
/// The agent asks its user a structured question (form mode).
pub const ELICITATION_CREATE: &str = "elicitation/create";
pub const AUTHENTICATE: &str = "authenticate";
pub const SESSION_LOAD: &str = "session/load";
pub const SESSION_RESUME: &str = "session/resume";
pub const SESSION_CLOSE: &str = "session/close";
/// The agent's sessions of one `cwd` (`sessionCapabilities.list`).
pub const SESSION_LIST: &str = "session/list";
/// A new session with another's history (`sessionCapabilities.fork`).
pub const SESSION_FORK: &str = "session/fork";
/// The cross-vendor steer into a running turn (claude-agent-acp, codex-acp).
pub const SESSION_STEERING: &str = "_session/steering";
/// The agent withdraws one of its own pending requests.
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// goose's non-standard mid-turn steer.
pub const GOOSE_STEER: &str = "_goose/unstable/session/steer";
pub const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
/// The older way to set a mode, for agents without config options.
pub const SESSION_SET_MODE: &str = "session/set_mode";
/// The unstable way to set a model, for agents without config options.
pub const SESSION_SET_MODEL: &str = "session/set_model";
