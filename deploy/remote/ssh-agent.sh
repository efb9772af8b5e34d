#!/bin/sh
# An ACP agent on another host over ssh, for --agent-command:
#
#   ACP_BRIDGE_AGENT_COMMAND=/usr/local/lib/acp-bridge/ssh-agent.sh
#   ACP_BRIDGE_AGENT_ARGS=goose acp      (split into words as a shell splits them)
#   ACP_BRIDGE_AGENT_ENV=AGENT_HOST,HOME
#
# ssh carries stdio; the remote user's environment (its provider keys) is
# the agent's, and the bot's key never leaves this machine. `-T` (no tty)
# keeps the stream byte-exact. ServerAliveInterval notices a dead link
# within a minute.
#
# Arguments: ssh joins its command words into one string that the remote
# login shell splits again, so each argument is single-quoted here and
# reaches the agent unchanged (spaces, quotes, `$`, `;`). The remote login
# shell must be a POSIX one (sh, bash, dash, ksh, zsh).
#
# Ending: without a tty sshd sends no SIGHUP when the connection goes; the
# agent would only read EOF, and one busy in a long tool call (or one that
# ignores EOF) would run on, with its children. So the remote side is a
# small sh (see `remote` below) that relays stdin to the agent through
# `cat`. sshd starts the command in a session of its own and `exec` makes
# that sh the leader of its process group, which holds the agent and
# everything it starts, and nothing else (`kill 0` signals exactly that
# group). When the connection's stdin ends (the daemon closed it, or the
# ssh client or the link died), the agent reads EOF and has 3 s to exit
# (the daemon's own grace), then the group gets SIGTERM, then after 2 s
# SIGKILL. When the agent exits first, the rest of the group gets SIGHUP,
# the session closes, and the agent's exit status is ssh's.
set -eu
: "${AGENT_HOST:?set AGENT_HOST (user@host; keys in ~/.ssh of the user running the daemon)}"
[ $# -gt 0 ] || { echo "ssh-agent.sh: give the agent's command line as arguments" >&2; exit 64; }

# Prints $1 single-quoted for a POSIX shell: each ' becomes '\''.
quote() {
    rest=$1 quoted=
    while :; do
        case $rest in
            *"'"*) quoted=$quoted${rest%%"'"*}"'\''"; rest=${rest#*"'"} ;;
            *) quoted=$quoted$rest; break ;;
        esac
    done
    printf "'%s'" "$quoted"
}

# Run remotely as `sh -c "$remote" sh <agent's command line>`. Three parts
# of one process group: the outer sh (survives HUP and TERM to report the
# agent's status), the relay { cat ...; } and the agent's side { "$@" ...; }.
# Traps with an action are reset in subshells and on exec, so the agent
# starts with default signal handling. (No single quote in this text.)
# shellcheck disable=SC2016 # expanded by the remote sh, not here
remote='trap : HUP TERM
{
    trap : TERM        # outlive its own `kill 0`, to send SIGKILL later
    trap exit HUP      # the agent has exited: stop here
    cat                # the connection stdin, to the agent
    exec >&-           # stdin ended: the agent reads EOF
    sleep 3 & wait $!  # (a trap interrupts `wait`, not a foreground sleep)
    kill 0
    sleep 2 & wait $!
    kill -s KILL 0
} 2>/dev/null | {  # keeps shell notices ("Hangup") out of the log
    trap : TERM        # outlive the `kill 0`, to report the status
    "$@"
    status=$?
    trap "" HUP        # (set only now: the agent would inherit it)
    kill -s HUP 0      # ends the relay and what the agent left behind
    exit "$status"
}'

command="exec sh -c $(quote "$remote") sh"
for arg; do command="$command $(quote "$arg")"; done
exec ssh -T -o BatchMode=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=4 \
    "$AGENT_HOST" -- "$command"
