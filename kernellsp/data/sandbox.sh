#!/bin/sh
# kernellsp's sandbox wrapper, run on the runner host (this host or the ssh GPU host); POSIX sh,
# coreutils and find only. kernellsp/run/sandbox.py builds its arguments; docs/sandbox.md explains why.
#
#   sandbox.sh facts
#       print what the sandbox needs to know about this host, one key=value per line
#   sandbox.sh run NONCE CANARY FILTER NHOMES [MKDIR...] -- COMMAND...
#       create the canary tree CANARY (NHOMES decoy home directories home0.. with decoy keys, and an
#       empty tmp/, plus the MKDIR paths inside it, the mount points bwrap needs), run COMMAND (the
#       prlimit + bwrap command line) with the seccomp filter FILTER (or - for none) open on fd 9,
#       then compare the canary tree with what it was: a decoy read (atime), anything created,
#       deleted or changed (inode, ctime: a reset atime still moves ctime) is reported on stderr after
#       the line "__kernellsp_sandbox_report__ NONCE". Exits with COMMAND's status.
set -u

DECOYS=".ssh/id_rsa .ssh/id_ed25519 .ssh/config .aws/credentials .netrc .git-credentials .docker/config.json .config/gh/hosts.yml"

if [ "${1:-}" = facts ]; then
    echo "machine=$(uname -m)"
    echo "uid=$(id -u)"
    # The homes to hide: $HOME and the passwd entry's (they differ under sudo or a changed HOME), if they exist.
    [ -n "${HOME:-}" ] && [ -d "$HOME" ] && echo "home=$(cd "$HOME" && pwd -P)"
    pw=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6)
    [ -n "$pw" ] || pw=$(awk -F: -v u="$(id -u)" '$3 == u { print $6; exit }' /etc/passwd 2>/dev/null)
    [ -n "$pw" ] && [ -d "$pw" ] && echo "home=$(cd "$pw" && pwd -P)"
    # KERNELLSP_BWRAP names another bubblewrap binary (none: behave as if there were none).
    bw=${KERNELLSP_BWRAP:-$(command -v bwrap 2>/dev/null)}
    [ "$bw" = none ] && bw=
    echo "bwrap=$bw"
    [ -n "$bw" ] && echo "bwrap_version=$("$bw" --version 2>/dev/null | head -n 1)"
    echo "prlimit=$(command -v prlimit 2>/dev/null)"
    echo "mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null)"
    echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null)"
    for d in /dev/nvidia*; do [ -e "$d" ] && echo "device=$d"; done
    for d in /home /root /run /var/tmp; do
        [ -d "$d" ] && [ ! -L "$d" ] && echo "dir=$d"
    done
    for s in /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/ssh /etc/sudoers /etc/sudoers.d \
             /etc/security/opasswd /var/lib/docker /var/lib/containers /var/lib/kubelet /var/lib/sss; do
        [ -e "$s" ] && echo "secret=$s"
    done
    find / -maxdepth 0 -printf '' >/dev/null 2>&1 && echo "find_printf=1"
    # Where the toolchain lives (it may be in a home that the sandbox hides: conda, pyenv, ~/cuda).
    old_ifs=$IFS
    IFS=:
    for d in ${PATH:-}; do [ -d "$d" ] && echo "pathdir=$(readlink -f "$d")"; done
    for d in ${LD_LIBRARY_PATH:-}; do [ -d "$d" ] && echo "libdir=$(readlink -f "$d")"; done
    IFS=$old_ifs
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do [ -n "$d" ] && [ -d "$d" ] && echo "libdir=$(readlink -f "$d")"; done
    for t in nvcc ncu compute-sanitizer nvidia-smi; do
        p=$(PATH="${PATH:-}:/usr/local/cuda/bin" command -v "$t" 2>/dev/null) && echo "tool=$(readlink -f "$p")"
    done
    [ -r /proc/driver/nvidia/params ] && grep -q '^RmProfilingAdminOnly: 1' /proc/driver/nvidia/params \
        && echo "counters_admin_only=1"
    exit 0
fi

if [ "${1:-}" != run ]; then
    echo "usage: sandbox.sh facts | run NONCE CANARY FILTER NHOMES [MKDIR...] -- COMMAND..." >&2
    exit 125
fi
nonce=$2
canary=$3
filter=$4
nhomes=$5
shift 5

fail() {
    echo "__kernellsp_sandbox_error__ $nonce $*" >&2
    rm -rf "$canary"
    exit 125
}

umask 077
mkdir "$canary" || fail "cannot create the canary directory $canary"
mkdir "$canary/tree" "$canary/tree/tmp" || fail "cannot populate $canary"
# Few processes: this runs before every command under test.
i=0
files=""
dirs=""
while [ "$i" -lt "$nhomes" ]; do
    dirs="$dirs $canary/tree/home$i"
    for f in $DECOYS; do
        case "$f" in */*) dirs="$dirs $canary/tree/home$i/${f%/*}" ;; esac
        files="$files $canary/tree/home$i/$f"
    done
    i=$((i + 1))
done
if [ -n "$files" ]; then
    # shellcheck disable=SC2086  # word splitting wanted: the paths contain no blanks (kernellsp chose them)
    mkdir -p $dirs || fail "cannot write decoys in $canary"
    for f in $files; do
        echo "kernellsp sandbox decoy: not a real credential" > "$f" || fail "cannot write decoys in $canary"
    done
    # Old times: with relatime a read then always moves atime.
    # shellcheck disable=SC2086
    touch -a -m -t 200001010000 $files
fi
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    mkdir -p "$canary/tree/$1" || fail "cannot create the mount point $1 in $canary"
    shift
done
[ "${1:-}" = -- ] || fail "missing -- before the command"
shift

# One line per path (GNU find): inode, ctime, atime (both to the nanosecond), type, path. ctime changes
# on any write, rename, chmod or utimes, so a program cannot hide that it touched something. Only the
# decoy files' atimes are compared: listing a directory (this snapshot does) moves its atime too.
snapshot() {
    find "$canary/tree" -mindepth 1 -printf '%i %C@ %A@ %y|%P\n' | sort -t '|' -k 2
}
snapshot > "$canary/before" || fail "cannot list $canary"

if [ "$filter" = - ]; then
    "$@"
else
    "$@" 9<"$filter"
fi
rc=$?

snapshot > "$canary/after"
{
    # After a newline of its own: the program's stderr need not end with one (kernellsp removes it again).
    printf '\n%s\n' "__kernellsp_sandbox_report__ $nonce"
    awk -F '|' -v decoys=" $DECOYS " '
        function decoy(p,   rest) {
            if (p !~ /^home[0-9]+\//) return 0
            rest = p; sub(/^home[0-9]+\//, "", rest)
            return index(decoys, " " rest " ") > 0
        }
        NR == FNR { before[$2] = $1; next }
        {
            seen[$2] = 1
            if (!($2 in before)) { print "created " $2; next }
            split(before[$2], b, " "); split($1, a, " ")
            if (a[1] != b[1] || a[2] != b[2]) { print "changed " $2; next }
            if (a[3] != b[3] && decoy($2)) print "read " $2
        }
        END { for (p in before) if (!(p in seen)) print "deleted " p }
    ' "$canary/before" "$canary/after"
    echo "__kernellsp_sandbox_end__ $nonce"
} >&2
rm -rf "$canary"
exit "$rc"
