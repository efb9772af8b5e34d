//! The acp-bridge daemon (under construction).
