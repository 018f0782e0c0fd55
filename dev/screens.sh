#!/bin/bash
# Capture envcheck's screens in a real terminal (tmux, 80 columns) for docs/screens.md.
#
#   dev/screens.sh OUTDIR        # writes OUTDIR/{run,run-live,unexpected,verbose,probes,
#                                #   check,suggest}.txt
#
# Each command runs in a fresh detached tmux session 80 columns wide and 50 lines high,
# started with `envcheck` on PATH (activate the venv first); the whole pane, scrollback
# included, is saved as plain text (tmux capture-pane without -e: no colour escapes).
set -eu
out=${1:?usage: dev/screens.sh OUTDIR}
mkdir -p "$out"


capture() {  # capture NAME LIVE_TRIES COMMAND (LIVE_TRIES: half seconds to wait for the live view, 0: none)
    local name=$1 midway=$2 cmd=$3 last
    local server=envcheck-screens-$$-$name
    tmux -L "$server" new-session -d -x 80 -y 50 -s cap "bash --norc --noprofile"
    tmux -L "$server" send-keys -t cap "export PS1='$ ' && cd '$PWD' && clear" Enter
    sleep 1
    tmux -L "$server" clear-history -t cap
    tmux -L "$server" send-keys -t cap "$cmd" Enter
    if [ "$midway" != 0 ]; then  # the live view, once two probes are done and one runs
        for _ in $(seq 1 "$midway"); do
            sleep 0.5
            tmux -L "$server" capture-pane -p -t cap > "$out/$name-live.txt"
            [ "$(grep -c '^✓ ' "$out/$name-live.txt")" -ge 2 ] \
                && grep -q ' probe .* · ' "$out/$name-live.txt" && break
        done
        sed -i -e '/^$/d' "$out/$name-live.txt"
    fi
    for _ in $(seq 1 300); do  # until the prompt is back
        sleep 1
        last=$(tmux -L "$server" capture-pane -p -t cap | sed -e '/^$/d' | tail -1)
        [ "$last" = "$" ] && break
    done
    # The whole pane, without the trailing blank lines and the prompt that came back.
    tmux -L "$server" capture-pane -p -t cap -S - | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' \
        | sed -e '${/^\$ *$/d}' > "$out/$name.txt"
    tmux -L "$server" kill-server || true
}

# One UNEXPECTED: a check the team's matrix expects to pass fails (docs/screens.md).
mkdir -p "$out/team/expectations"
cat > "$out/ours.py" <<'PY'
CHECKS = ("sums",)


def probe_ours(ctx):
    """a check our cluster expects to pass"""
    with ctx.check("sums") as c:
        c.fail("rank 1 sums to 7, rank 0 to 6")
PY
printf '[[expectation]]\ncheck = "ours.sums"\ntorch = ">=1.0"\noutcome = "passed"\nsource = "our cluster, every week"\n' \
    > "$out/team/expectations/ours.toml"

capture run 240 "envcheck run"
capture unexpected 0 "envcheck run --probe-path $out/ours.py --matrix $out/team"
capture verbose 0 "envcheck run -v -p collectives -p nccl"
capture probes 0 "envcheck probes"
capture check 0 "envcheck check torch==2.4.1+cu124 --driver 470.82.01 --gpu sm_80"
capture suggest 0 "envcheck check --suggest --driver 535.104.05 --gpu sm_80"
