#!/bin/sh
# An ACP agent on another host over ssh, for --agent-command:
#
#   ACP_BRIDGE_AGENT_COMMAND=/usr/local/lib/acp-bridge/ssh-agent.sh
#   ACP_BRIDGE_AGENT_ARGS=goose acp
#   ACP_BRIDGE_AGENT_ENV=AGENT_HOST,HOME
#
# ssh carries stdio; the remote user's environment (its provider keys) is
# the agent's, and the bot's key never leaves this machine. `-T` (no tty)
# keeps the stream byte-exact. When the daemon ends the agent (stdin closed,
# or the ssh client killed), the connection closes and sshd hangs up the
# remote session: the agent reads EOF or gets SIGHUP and exits.
# ServerAliveInterval notices a dead link within a minute.
set -eu
: "${AGENT_HOST:?set AGENT_HOST (user@host; keys in the daemon user's ~/.ssh)}"
[ $# -gt 0 ] || { echo "ssh-agent.sh: give the agent's command line as arguments" >&2; exit 64; }
exec ssh -T -o BatchMode=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=4 \
    "$AGENT_HOST" -- "$@"
