import CloudSyncCore
import CloudSyncProviders

/// Every command, option and help text of `cloudsync`, in one place.
enum CommandTree {
    static let version = CloudSyncVersion.string

    static let globals: [OptionSpec] = [
        .value("config", "PATH", "Configuration file (default: $CLOUDSYNC_CONFIG, else $XDG_CONFIG_HOME/cloudsync/config.toml)."),
        .flag("verbose", short: "v", "More log output on stderr (repeat is not needed; debug level)."),
        .flag("quiet", short: "q", "Print errors only."),
        .flag("version", "Print the version and exit, wherever it stands (with -v: also libcurl, SQLite and OpenSSL)."),
        .value("log-file", "PATH", "Also append stderr's lines and the log, with local times, to PATH (created 0600): a record for cron."),
        .value("log-level", "LEVEL", "Level of --log-file: error, warning, info (default) or debug; stderr keeps -q or -v."),
    ]

    static let remoteSelection: [OptionSpec] = [
        .value("remote", "NAME", "Only the remote NAME from the config."),
        .value("provider", "P", "Every remote whose provider is P (\(ProviderRegistry.catalog.names.joined(separator: ", ")))."),
    ]

    static let ls = CommandSpec(
        name: "ls",
        abstract: "List the audio files of remotes with their cache state.",
        discussion: """
        Lists live from the provider (and refreshes the index) unless --offline or --m3u is given. When the \
        cloud cannot be reached (no network, DNS failure, connection refused) ls retries once, then prints the \
        index's state with a warning and exits 0. Columns: state (cached, head, partial NN%, missing, outdated, deleted remotely), \
        size, modified (local time, $TZ), duration, path, and "Artist – Title" when tagged; the count of tracks \
        follows on stderr. Tags and durations come from the index (read from each track's start set), so they need \
        no network. A PATH that matches nothing exits 2 with the closest path.
        """,
        options: remoteSelection + [
            .flag("offline", "List from the local index without contacting the provider."),
            .value("retries", "N", "Retries per request on network errors and rate limits (default: pull.retries, 10; when the host cannot be reached at all: 1, then the index is shown)."),
            .flag("json", "Print a JSON array on stdout (keys: remote, path, size, modified, mime, hashes, state, cached_bytes, head_bytes, outdated, deleted_remotely, local_path, duration_s, tags)."),
            .flag("long", "Add album, hash, MIME type and local path lines."),
            .flag("tsv", "One tab-separated line per track for scripts: remote, path, state, size (bytes), cached bytes, modified (ISO 8601 UTC)."),
            .value("artist", "TEXT", "Only tracks whose artist or album artist tag contains TEXT (ignoring case)."),
            .value("album", "TEXT", "Only tracks whose album tag contains TEXT (ignoring case)."),
            .value("sort", "KEY", "Order: path (default), artist (then album, disc, track), album (then disc, track), added (newest first)."),
            .flag("cached", "Only tracks that are completely cached."),
            .flag("missing", "Only tracks that are not completely cached."),
            .flag("m3u", "Print an extended M3U playlist of URLs served by `cloudsync serve` (127.0.0.1, --port or 8765), from the index: no network."),
            .value("port", "N", "With --m3u: the port of `cloudsync serve` (default 8765)."),
        ] + FilterOptions.specs,
        positionals: [PositionalSpec(name: "PATH", help: "Only files under this path (relative to the remote's root, or REMOTE/PATH as ls prints it).", optional: true, repeats: false)]
    )

    static let pull = CommandSpec(
        name: "pull",
        abstract: "Download the audio files of remotes into the cache.",
        discussion: """
        Lists each remote, plans what is new, changed or deleted, downloads with ranged resumable requests, \
        verifies hashes and moves complete tracks into tracks/<remote>/. An interrupted pull resumes where it \
        stopped. One pull per remote runs at a time: a second one exits with code 75 unless --wait is given.
        """,
        options: remoteSelection + [
            .flag("dry-run", "Show what would be moved, fetched (within the cache budget) and removed; change nothing (a cloud that cannot be reached is retried once)."),
            .value("jobs", "N", "Files downloaded at once (default: pull.jobs, 4)."),
            .value("segments", "N", "Concurrent ranged requests per file of pull.segment_threshold (64MiB) or more, and for the parts of a start set (first bytes and tail at once); 1 = one request at a time per file (default: pull.segments, 4)."),
            .value("bwlimit", "RATE", "Total bandwidth limit, e.g. 2MiB/s, or 'off' (default: pull.bwlimit)."),
            .value("retries", "N", "Retries per request on network errors and rate limits (default: pull.retries, 10)."),
            .optionalValue("head-first", "SIZE", "At least SIZE of audio in every track's start set, fetched before whole tracks so each can start at once "
                + "(default SIZE: pull.head_first, 512KiB); cached tracks' start sets follow it; shorter when the library's heads do not fit the budget (pull.shorten_heads). '--head-first 1MiB' works too: "
                + "an argument that reads as a size is taken as SIZE, not PATH.",
                takesNext: { ByteSize.parse($0) != nil }),
            .flag("refetch", "Drop the cached bytes of the PATHs first, so they are downloaded again (needs PATH)."),
            .flag("wait", "Wait for another pull of the same remote to finish instead of exiting with code 75 (Ctrl-C or SIGTERM stops waiting: 130, 143)."),
            .value("order", "KEY", "Order of work: name, size, modified or added, optionally ,asc or ,desc (default: the "
                + "budget's priority; which tracks fit does not change). Defaults: name and size ascending, the others newest first."),
            .value("stats", "DURATION", "Print a one-line summary (files, bytes, speed) on stderr every DURATION, e.g. 1m; for "
                + "journals and logs without a terminal (default: off)."),
            .flag("progress", "Draw the live progress frame even when stderr is not a terminal (width: $COLUMNS, else 80); never with TERM=dumb (default: on a terminal)."),
            .flag("no-progress", "Never draw the live progress frame; print one line per finished file."),
            .flag("json", "Print a JSON summary on stdout."),
            .flag("no-delete", "Keep cached tracks whose remote file is gone (ls shows them as deleted remotely; pull.delete = false always)."),
        ] + FilterOptions.specs,
        positionals: [PositionalSpec(name: "PATH", help: "Only these files or folders (relative to the remote's root, or REMOTE/PATH as ls prints it; "
            + "case-sensitive). A PATH that matches nothing exits 2 naming the closest path; the others are pulled.", optional: true, repeats: true)]
    )

    static let login = CommandSpec(
        name: "login",
        abstract: "Authorize cloudsync for a remote and store its tokens (mode 0600).",
        options: [
            .value("token-json", "FILE", "Import tokens obtained elsewhere from FILE ('-' for stdin) instead of running a flow."),
        ],
        positionals: [PositionalSpec(name: "NAME", help: "The remote's name in the config.", optional: false, repeats: false)]
    )

    static let logout = CommandSpec(
        name: "logout",
        abstract: "Remove the stored tokens of a remote.",
        positionals: [PositionalSpec(name: "NAME", help: "The remote's name in the config.", optional: false, repeats: false)]
    )

    static let cache = CommandSpec(
        name: "cache",
        abstract: "Inspect and manage the local cache.",
        subcommands: [
            CommandSpec(name: "status", abstract: "Entries, complete and partial counts, bytes, limits and path.",
                        options: [.flag("json", "Print JSON on stdout.")]),
            CommandSpec(name: "evict", abstract: "Bring the cache down to its plan now (lowest priority first; tracks keep heads).",
                        options: [.flag("dry-run", "Show what would be removed; remove nothing.")]),
            CommandSpec(name: "verify", abstract: "Check complete tracks: size against the listing, bytes against the provider's hash "
                            + "when it gives one (else size only), mtime drift reported; bad tracks are removed for refetch. "
                            + "In an encrypted cache every block's tag is checked too (partial tracks included); a damaged block "
                            + "is dropped and fetched again.",
                        options: [.flag("json", "Print JSON on stdout (keys: checked, mismatched, wrong_size, vanished, mtime_drift, damaged, skipped_no_hash).")]),
            CommandSpec(name: "encrypt", abstract: "Encrypt the cache in place (ChaCha20-Poly1305, key in $XDG_STATE_HOME/cloudsync/cache.key "
                            + "or from cache.key_command), entry by entry; safe to interrupt, run it again to resume. Then set "
                            + "cache.encrypt = true. Players must then read through 'cloudsync serve'."),
            CommandSpec(name: "decrypt", abstract: "Decrypt an encrypted cache in place, entry by entry (needs its key); safe to interrupt, "
                            + "run it again to resume. Then set cache.encrypt = false."),
            CommandSpec(name: "pin", abstract: "Never evict these tracks.",
                        options: [.value("remote", "NAME", "The remote the paths belong to (default: the only remote).")]
                            + FilterOptions.specs,
                        positionals: [PositionalSpec(name: "PATH", help: "Track or folder paths relative to the remote's root.", optional: false, repeats: true)]),
            CommandSpec(name: "unpin", abstract: "Allow these tracks to be evicted again.",
                        options: [.value("remote", "NAME", "The remote the paths belong to (default: the only remote).")],
                        positionals: [PositionalSpec(name: "PATH", help: "Track or folder paths relative to the remote's root.", optional: false, repeats: true)]),
            CommandSpec(name: "clear", abstract: "Delete cached tracks and partial files (all remotes, or one).",
                        options: [.value("remote", "NAME", "Only this remote."), .flag("yes", "Do not ask for confirmation.")]),
            CommandSpec(name: "rm", abstract: "Drop the cached bytes of tracks or folders (pinned ones too); they stay listed as missing "
                            + "and the next pull fetches them again.",
                        options: [.value("remote", "NAME", "The remote the paths belong to (default: the only remote).")],
                        positionals: [PositionalSpec(name: "PATH", help: "Track or folder paths relative to the remote's root.", optional: false, repeats: true)]),
            CommandSpec(name: "path", abstract: "Print the cache directory, or the local file of a complete track (exit 0). For a track "
                            + "not complete: nothing on stdout, stderr says where its bytes are, exit 1.",
                        positionals: [PositionalSpec(name: "REMOTE", help: "A remote's name.", optional: true, repeats: false),
                                      PositionalSpec(name: "PATH", help: "A track's path relative to the remote's root.", optional: true, repeats: false)]),
        ]
    )

    static let serve = CommandSpec(
        name: "serve",
        abstract: "Serve cached tracks to players over loopback HTTP, fetching missing bytes on demand.",
        discussion: """
        GET/HEAD /tracks/<remote>/<path> with Range; /playlist.m3u (?remote=NAME, ?cached=1); / lists tracks; \
        /dav/ is a read-only WebDAV view of the library (mpd, Kodi, davfs2, rclone). It offers the tracks of the \
        index: run 'cloudsync ls' or a pull first (one made while it runs shows at once). Cached bytes are sent \
        from disk; missing ones are fetched from the cloud, cached and streamed as they arrive (503 at once when \
        it cannot be reached; the next request tries again). Prints 'listening on URL' on stdout; Ctrl-C stops. \
        See docs/serve.md.
        """,
        options: remoteSelection + [
            .value("port", "N", "TCP port (default 8765; 0 picks a free one)."),
            .value("bind", "ADDR", "Address to bind (default 127.0.0.1). A non-loopback address requires --token."),
            .value("token", "TOKEN", "Require this token (16+ characters) on every request: ?token=, Authorization: Bearer, "
                + "or as the Basic-auth password. Give it as env:VAR or file:PATH to keep it out of `ps`. Without it, "
                + "only requests addressed to 127.0.0.1, [::1] or localhost are answered."),
        ]
    )

    static let status = CommandSpec(
        name: "status",
        abstract: "Is my music ready? The last pull, track states and bytes per remote; what runs now.",
        discussion: """
        Per remote: the last pull (when, how it ended, the first failure), tracks complete / head only / partial / \
        missing and bytes; the cache against its budget; the pulls and serves running now. \
        Reads the index and the kernel's lock table only: no network, no lock taken, safe beside a running pull or \
        serve. A last pull shown as 'killed' started and never recorded its end (kill -9, power loss, or a disk too full to \
        write it); the next pull resumes it.
        """,
        options: [
            .value("remote", "NAME", "Only the remote NAME."),
            .flag("json", "Print JSON on stdout (schema in README, 'cloudsync status --json')."),
        ]
    )

    static let config = CommandSpec(
        name: "config",
        abstract: "Check, locate or show the configuration.",
        subcommands: [
            CommandSpec(name: "check", abstract: "Parse and validate the configuration; exit 3 with file:line:column on an error."),
            CommandSpec(name: "path", abstract: "Print the path of the configuration file in use."),
            CommandSpec(name: "show", abstract: "Print the effective configuration with secrets masked."),
        ]
    )

    static let completion = CommandSpec(
        name: "completion",
        abstract: "Print a shell completion script (bash, zsh or fish) generated from this command tree.",
        discussion: """
        Completes commands, options, remote names from the config and track paths from the index (offline). \
        Install: bash: cloudsync completion bash > ~/.local/share/bash-completion/completions/cloudsync; \
        zsh: cloudsync completion zsh > ~/.zfunc/_cloudsync (a folder of $fpath); \
        fish: cloudsync completion fish > ~/.config/fish/completions/cloudsync.fish. `make install` installs all \
        three. The scripts call 'cloudsync completion remotes' and 'cloudsync completion paths [--remote NAME] PREFIX'.
        """,
        options: [.value("remote", "NAME", "With paths: only the tracks of remote NAME.")],
        positionals: [PositionalSpec(name: "SHELL", help: "bash, zsh or fish (or remotes, paths: used by the scripts).", optional: false, repeats: false),
                      PositionalSpec(name: "PREFIX", help: "With paths: the path typed so far.", optional: true, repeats: false)]
    )

    static let man = CommandSpec(
        name: "man",
        abstract: "Print the cloudsync(1) manual page (roff) generated from this command tree.",
        discussion: "Read it with: cloudsync man | man -l -   (make install puts it in PREFIX/share/man/man1)."
    )

    static let help = CommandSpec(
        name: "help",
        abstract: "Show help for a command: 'cloudsync help cache evict' equals 'cloudsync cache evict --help'.",
        positionals: [PositionalSpec(name: "COMMAND", help: "A command (and subcommand).", optional: true, repeats: true)]
    )

    static let root = CommandSpec(
        name: "cloudsync",
        abstract: "Keep your music from cloud storage ready to play offline.",
        discussion: """
        Providers: \(ProviderRegistry.catalog.descriptors.map(\.displayName).joined(separator: ", ")). Tracks land in \
        $XDG_CACHE_HOME/cloudsync/tracks/<remote>/ (cache.dir in the config), where any player can read them.
        """,
        subcommands: [status, ls, pull, login, logout, cache, serve, config, completion, man, help]
    )
}
