import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncProviders
import Foundation

/// `cloudsync completion bash|zsh|fish` prints a completion script generated from ``CommandTree``, so that
/// completion can never disagree with `--help`. The scripts ask the binary for the dynamic parts:
/// `cloudsync completion remotes` (remote names from the config) and `cloudsync completion paths [--remote NAME]
/// PREFIX` (indexed folders and tracks one level below PREFIX, offline).
struct CompletionCommand {
    let context: CommandContext

    func run() throws -> ExitCode {
        let words = context.arguments.positionals
        switch words.first ?? "" {
        case "bash": context.console.out(CompletionScripts(root: CommandTree.root, globals: CommandTree.globals).bash())
        case "zsh": context.console.out(CompletionScripts(root: CommandTree.root, globals: CommandTree.globals).zsh())
        case "fish": context.console.out(CompletionScripts(root: CommandTree.root, globals: CommandTree.globals).fish())
        case "remotes":
            // Completion must never print an error into the user's prompt: a broken config completes nothing.
            guard let config = try? Setup(context: context).configuration() else { return .ok }
            context.console.out(config.remotes.map { $0.name + "\n" }.joined())
        case "paths":
            guard let config = try? Setup(context: context).configuration(),
                  let cache = try? Setup(context: context).openCache(config) else { return .ok }
            let prefix = words.dropFirst().first ?? ""
            let remotes = context.arguments.value("remote").map { [$0] } ?? config.remotes.map(\.name)
            var paths: [String] = []
            for remote in remotes { paths += (try? cache.entries(remote: remote).map(\.path)) ?? [] }
            context.console.out(CompletionScripts.candidates(paths: paths, prefix: prefix).map { $0 + "\n" }.joined())
        default:
            let near = nearest(words.first ?? "", in: ["bash", "zsh", "fish"]).map { " Did you mean '\($0)'?" } ?? ""
            throw UsageError(message: "cloudsync: completion expects bash, zsh or fish, got '\(words.first ?? "")'.\(near)",
                             hint: "Run 'cloudsync completion --help' for how to install the script.")
        }
        return .ok
    }
}

/// The three completion scripts, rendered from a command tree.
struct CompletionScripts {
    let root: CommandSpec
    let globals: [OptionSpec]

    /// Every command path with its spec, root first (`[]`, `["ls"]`, `["cache"]`, `["cache", "evict"]`, …).
    var commands: [(path: [String], spec: CommandSpec)] {
        var out: [([String], CommandSpec)] = []
        func walk(_ spec: CommandSpec, _ path: [String]) {
            out.append((path, spec))
            for sub in spec.subcommands { walk(sub, path + [sub.name]) }
        }
        walk(root, [])
        return out
    }

    /// Options that take a value (the next word is theirs, not a command or a PATH).
    private func valued(_ spec: CommandSpec) -> [OptionSpec] {
        (globals + spec.options).filter { if case .value = $0.kind { return true } else { return false } }
    }

    /// Fixed words the first positional completes to: shells, or command names for `help`.
    private func fixedWords(_ spec: CommandSpec) -> [String] {
        switch spec.positionals.first?.name {
        case "SHELL": ["bash", "zsh", "fish"]
        case "COMMAND": root.subcommands.map(\.name)
        default: []
        }
    }

    private func takesPaths(_ spec: CommandSpec) -> Bool {
        spec.positionals.contains { $0.name == "PATH" }
    }

    /// The values an option completes to: a word list, a file, a remote, or nothing (free text).
    private enum ValueKind { case remote, file, words([String]), free }

    private func valueKind(_ option: OptionSpec) -> ValueKind {
        switch option.long {
        case "remote": .remote
        case "config", "filter-from", "log-file", "token-json": .file
        case "provider": .words(ProviderRegistry.catalog.names)
        case "sort": .words(["path", "artist", "album", "added"])
        case "order": .words(["name", "size", "modified", "added"])
        case "log-level": .words(["error", "warning", "info", "debug"])
        default: .free
        }
    }

    /// Candidates for `prefix` among `paths`: entries one level below the prefix's folder; folders end in `/`.
    static func candidates(paths: [String], prefix: String) -> [String] {
        let folder = prefix.lastIndex(of: "/").map { String(prefix[...$0]) } ?? ""
        var seen = Set<String>()
        var out: [String] = []
        for path in paths where path.hasPrefix(prefix) {
            let rest = path.dropFirst(folder.count)
            let item = rest.firstIndex(of: "/").map { folder + rest[...$0] } ?? path
            if seen.insert(item).inserted { out.append(item) }
        }
        return out.sorted()
    }

    private func key(_ path: [String]) -> String { path.joined(separator: " ") }

    /// The `case "$cmd|$w"` arms both shells use to follow the words typed so far down the command tree:
    /// `"cache|evict") cmd="cache evict" ;;`.
    private var commandCases: String {
        commands.dropFirst().map { entry in
            "                \"\(key(Array(entry.path.dropLast())))|\(entry.path.last ?? "")\") cmd=\"\(key(entry.path))\" ;;"
        }.joined(separator: "\n")
    }

    // MARK: bash

    func bash() -> String {
        var s = """
        # bash completion for cloudsync, generated by `cloudsync completion bash` from the command tree.
        # Install: cloudsync completion bash > ~/.local/share/bash-completion/completions/cloudsync

        _cloudsync() {
            local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
            local cmd="" remote="" i w skip=0
            for ((i = 1; i < COMP_CWORD; i++)); do
                w="${COMP_WORDS[i]}"
                if ((skip)); then skip=0; [[ "${COMP_WORDS[i-1]}" == --remote ]] && remote="$w"; continue; fi
                case "$w" in
                    --*=*) ;;
                    -*) case " $(_cloudsync_valued "$cmd") " in *" $w "*) skip=1 ;; esac ;;
                    *) case "$cmd|$w" in
        \(commandCases)
                       esac ;;
                esac
            done
            local IFS=$'\\n'
            case "$prev" in

        """
        var valueCases: [String: ValueKind] = [:]
        for (_, spec) in commands { for o in valued(spec) { valueCases["--" + o.long] = valueKind(o) } }
        for (name, kind) in valueCases.sorted(by: { $0.key < $1.key }) {
            switch kind {
            case .remote:
                s += "        \(name)) COMPREPLY=($(compgen -W \"$(cloudsync completion remotes 2>/dev/null)\" -- \"$cur\")); return ;;\n"
            case .file:
                s += "        \(name)) compopt -o filenames; COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
            case .words(let words):
                s += "        \(name)) COMPREPLY=($(IFS=' '; compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\")); return ;;\n"
            case .free:
                s += "        \(name)) return ;;\n"
            }
        }
        s += """
            esac
            local words="" opts="" paths=0
            case "$cmd" in

        """
        for (path, spec) in commands {
            let options = (globals + spec.options).map { "--" + $0.long } + ["--help"]
            let subs = spec.subcommands.map(\.name)
            let first = fixedWords(spec)
            s += "        \"\(key(path))\") words=\"\((subs + first).joined(separator: " "))\"; "
                + "opts=\"\(options.joined(separator: " "))\"; paths=\(takesPaths(spec) ? 1 : 0) ;;\n"
        }
        s += """
            esac
            if [[ "$cur" == -* ]]; then
                COMPREPLY=($(IFS=' '; compgen -W "$opts" -- "$cur"))
            elif [[ -n "$words" ]]; then
                COMPREPLY=($(IFS=' '; compgen -W "$words" -- "$cur"))
            elif ((paths)); then
                compopt -o filenames -o nospace
                COMPREPLY=($(cloudsync completion paths ${remote:+--remote "$remote"} -- "$cur" 2>/dev/null))
            fi
        }

        _cloudsync_valued() {
            case "$1" in

        """
        for (path, spec) in commands {
            s += "        \"\(key(path))\") echo \"\(valued(spec).map { "--" + $0.long }.joined(separator: " "))\" ;;\n"
        }
        s += """
            esac
        }

        complete -F _cloudsync cloudsync

        """
        return s
    }

    // MARK: zsh

    func zsh() -> String {
        func quote(_ text: String) -> String {
            "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }
        func described(_ name: String, _ help: String) -> String {
            quote(name.replacingOccurrences(of: ":", with: "\\:") + ":" + oneLine(help))
        }
        var s = """
        #compdef cloudsync
        # zsh completion for cloudsync, generated by `cloudsync completion zsh` from the command tree.
        # Install: cloudsync completion zsh > "${fpath[1]}/_cloudsync" (or any folder of $fpath), then compinit.

        _cloudsync() {
            local cmd="" remote="" w skip=0 i
            for ((i = 2; i < CURRENT; i++)); do
                w=${words[i]}
                if ((skip)); then skip=0; [[ ${words[i-1]} == --remote ]] && remote=$w; continue; fi
                case $w in
                    --*=*) ;;
                    -*) [[ " $(_cloudsync_valued "$cmd") " == *" $w "* ]] && skip=1 ;;
                    *) case "$cmd|$w" in
        \(commandCases)
                       esac ;;
                esac
            done
            case ${words[CURRENT-1]} in

        """
        var valueCases: [String: ValueKind] = [:]
        for (_, spec) in commands { for o in valued(spec) { valueCases["--" + o.long] = valueKind(o) } }
        for (name, kind) in valueCases.sorted(by: { $0.key < $1.key }) {
            switch kind {
            case .remote: s += "        \(name)) compadd -- ${(f)\"$(cloudsync completion remotes 2>/dev/null)\"}; return ;;\n"
            case .file: s += "        \(name)) _files; return ;;\n"
            case .words(let words): s += "        \(name)) compadd -- \(words.joined(separator: " ")); return ;;\n"
            case .free: s += "        \(name)) _message 'value'; return ;;\n"
            }
        }
        s += """
            esac
            local -a subs opts
            local paths=0
            case $cmd in

        """
        for (path, spec) in commands {
            let subs = spec.subcommands.map { described($0.name, $0.abstract) }
                + fixedWords(spec).map { quote($0) }
            let opts = (globals + spec.options).map { described("--" + $0.long, $0.help) } + [described("--help", "Show help for this command.")]
            s += "        \(quote(key(path)))) subs=(\(subs.joined(separator: " "))); opts=(\(opts.joined(separator: " "))); paths=\(takesPaths(spec) ? 1 : 0) ;;\n"
        }
        s += """
            esac
            if [[ $PREFIX == -* ]]; then
                _describe -t options option opts
            elif ((${#subs})); then
                _describe -t commands command subs
            elif ((paths)); then
                local -a found
                found=(${(f)"$(cloudsync completion paths ${remote:+--remote $remote} -- "$PREFIX" 2>/dev/null)"})
                compadd -S '' -- $found
            fi
        }

        _cloudsync_valued() {
            case $1 in

        """
        for (path, spec) in commands {
            s += "        \(quote(key(path)))) print -r -- \(quote(valued(spec).map { "--" + $0.long }.joined(separator: " "))) ;;\n"
        }
        s += """
            esac
        }

        if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
            _cloudsync "$@"
        else
            compdef _cloudsync cloudsync
        fi

        """
        return s
    }

    // MARK: fish

    func fish() -> String {
        func quote(_ text: String) -> String {
            "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
        var s = """
        # fish completion for cloudsync, generated by `cloudsync completion fish` from the command tree.
        # Install: cloudsync completion fish > ~/.config/fish/completions/cloudsync.fish

        complete -c cloudsync -f

        """
        let top = root.subcommands.map(\.name).joined(separator: " ")
        for o in globals {
            s += "complete -c cloudsync -l \(o.long)\(o.short.map { " -s \($0)" } ?? "")\(fishValue(o)) -d \(quote(oneLine(o.help)))\n"
        }
        for sub in root.subcommands {
            s += "complete -c cloudsync -n 'not __fish_seen_subcommand_from \(top)' -a \(sub.name) -d \(quote(oneLine(sub.abstract)))\n"
        }
        for (path, spec) in commands where path.count >= 1 {
            var condition = "__fish_seen_subcommand_from \(path[0])"
            if path.count == 2 { condition += "; and __fish_seen_subcommand_from \(path[1])" }
            if !spec.subcommands.isEmpty {
                let names = spec.subcommands.map(\.name).joined(separator: " ")
                for sub in spec.subcommands {
                    s += "complete -c cloudsync -n '\(condition); and not __fish_seen_subcommand_from \(names)' -a \(sub.name) -d \(quote(oneLine(sub.abstract)))\n"
                }
            }
            let words = fixedWords(spec)
            if !words.isEmpty {
                s += "complete -c cloudsync -n '\(condition)' -a \(quote(words.joined(separator: " ")))\n"
            }
            if takesPaths(spec) {
                s += "complete -c cloudsync -n '\(condition)' -a '(cloudsync completion paths -- (commandline -ct) 2>/dev/null)'\n"
            }
            for o in spec.options {
                s += "complete -c cloudsync -n '\(condition)' -l \(o.long)\(o.short.map { " -s \($0)" } ?? "")\(fishValue(o)) -d \(quote(oneLine(o.help)))\n"
            }
        }
        return s
    }

    private func fishValue(_ option: OptionSpec) -> String {
        guard case .value = option.kind else { return "" }
        switch valueKind(option) {
        case .remote: return " -x -a '(cloudsync completion remotes 2>/dev/null)'"
        case .file: return " -r -F"
        case .words(let words): return " -x -a '\(words.joined(separator: " "))'"
        case .free: return " -x"
        }
    }

    /// The first sentence of a help text, for a one-line description.
    private func oneLine(_ text: String) -> String {
        let line = text.replacingOccurrences(of: "\n", with: " ")
        if let end = line.range(of: ". ") { return String(line[..<end.lowerBound]) }
        return line.hasSuffix(".") ? String(line.dropLast()) : line
    }
}
