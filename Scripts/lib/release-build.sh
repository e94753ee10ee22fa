# Sourced by Scripts/bench and Scripts/bench-dnssec: the release build they measure, with the flags of the shipped
# binary (Scripts/release-flags, as debian/rules).
#
# release_build REPO SCRATCH WORKTREE LOG
#   Others edit the working tree while a bench builds, so it builds a snapshot of the committed tree (HEAD) in
#   REPO/.build-bench-src, copying only the files that changed (unchanged ones keep their mtimes and the rebuild
#   in SCRATCH stays incremental); WORKTREE=1 builds the working tree as it is instead. Three attempts (a shared
#   machine can kill a compiler); the build's output goes to LOG. Returns 1 when every attempt failed.
release_build() {
    local repo=$1 scratch=$2 worktree=$3 log=$4 snap="$1/.build-bench-src" pkg f attempt
    pkg=$snap
    if ((worktree)); then
        pkg=$repo
    else
        rm -rf "$snap.new" && mkdir -p "$snap.new" "$snap"
        git -C "$repo" archive HEAD Package.swift Sources Tests | tar -x -C "$snap.new"
        [[ -f $repo/Package.resolved ]] && cp "$repo/Package.resolved" "$snap.new/"
        (cd "$snap.new" && find . -type f) | while IFS= read -r f; do
            cmp -s "$snap.new/$f" "$snap/$f" || { mkdir -p "$(dirname "$snap/$f")"; cp "$snap.new/$f" "$snap/$f"; }
        done
        (cd "$snap" && find . -type f) | while IFS= read -r f; do [[ -e $snap.new/$f ]] || rm -f "$snap/$f"; done
        rm -rf "$snap.new"
    fi
    local text flags
    text="$("$repo/Scripts/release-flags")" || return 1  # (a failure inside < <(...) would go unseen)
    mapfile -t flags <<<"$text"
    printf 'building discoverd (release, package %s, scratch %s)\n' "$pkg" "$scratch" >&2
    for attempt in 1 2 3; do
        swift build -c release "${flags[@]}" --package-path "$pkg" --scratch-path "$scratch" \
            --product discoverd >"$log" 2>&1 && return 0
        printf 'build attempt %s failed (tail of %s):\n' "$attempt" "$log" >&2
        tail -n 5 "$log" >&2
        sleep 20
    done
    return 1
}
