import CloudSyncCore

/// One option a command accepts.
struct OptionSpec: Sendable {
    enum Kind: Sendable {
        /// `--json`: present or not.
        case flag
        /// `--jobs N` or `--jobs=N`; may be repeated when `repeats`.
        case value(name: String)
        /// `--head-first` or `--head-first=SIZE`; also `--head-first SIZE` when the next argument is accepted by
        /// `takesNext` (it looks like a SIZE, not a PATH).
        case optionalValue(name: String)
    }

    var long: String
    var short: Character?
    var kind: Kind
    var help: String
    var repeats = false
    /// For an optional value: whether the argument after the option is its value (else it is left alone).
    var takesNext: (@Sendable (String) -> Bool)?

    static func flag(_ long: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, kind: .flag, help: help)
    }

    static func value(_ long: String, _ valueName: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(long: long, short: short, kind: .value(name: valueName), help: help)
    }

    static func optionalValue(_ long: String, _ valueName: String, _ help: String,
                              takesNext: (@Sendable (String) -> Bool)? = nil) -> OptionSpec {
        OptionSpec(long: long, short: nil, kind: .optionalValue(name: valueName), help: help, takesNext: takesNext)
    }

    var usageText: String {
        switch kind {
        case .flag: "--\(long)"
        case .value(let name): "--\(long) \(name)"
        case .optionalValue(let name): "--\(long)[=\(name)]"
        }
    }
}

/// A positional argument.
struct PositionalSpec: Sendable {
    var name: String
    var help: String
    var optional: Bool
    var repeats: Bool

    var usageText: String {
        let base = repeats ? "\(name)..." : name
        return optional ? "[\(base)]" : base
    }
}

/// What a command is: its name, help and arguments, or its subcommands.
struct CommandSpec: Sendable {
    var name: String
    var abstract: String
    var discussion: String = ""
    var options: [OptionSpec] = []
    var positionals: [PositionalSpec] = []
    var subcommands: [CommandSpec] = []
}

/// A usage error: exit code 2, message and a one-line hint.
struct UsageError: Error, ExitCodeProviding, CustomStringConvertible {
    var message: String
    var hint: String

    var exitCode: ExitCode { .usage }
    var description: String { "\(message)\n\(hint)" }
}

/// The parsed arguments of one command.
struct ParsedArguments: Sendable {
    /// Path of command names, e.g. ["cache", "evict"].
    var commandPath: [String] = []
    var flags: Set<String> = []
    var values: [String: [String]] = [:]
    var positionals: [String] = []
    var wantsHelp = false

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    func value(_ name: String) -> String? { values[name]?.last }

    /// An integer option within `range`, or nil when absent.
    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let n = Int(text), range.contains(n) else {
            throw UsageError(message: "cloudsync: --\(name) expects a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'",
                             hint: "Run 'cloudsync \(commandPath.joined(separator: " ")) --help' for usage.")
        }
        return n
    }
}

/// Parses a command line against a tree of `CommandSpec`s. Global options are accepted anywhere.
struct ArgumentParser {
    let root: CommandSpec
    let globals: [OptionSpec]

    func parse(_ arguments: [String]) throws -> ParsedArguments {
        var result = ParsedArguments()
        var command = root
        var index = 0
        var onlyPositionals = false
        var options = globals + command.options

        func hint() -> String {
            "Run '\(([root.name] + result.commandPath).joined(separator: " ")) --help' for usage."
        }
        func lookup(long: String) -> OptionSpec? { options.first { $0.long == long } }
        func lookup(short: Character) -> OptionSpec? { options.first { $0.short == short } }
        func needValue(_ spec: OptionSpec) throws -> String {
            index += 1
            guard index < arguments.count else {
                throw UsageError(message: "cloudsync: \(spec.usageText) needs a value", hint: hint())
            }
            return arguments[index]
        }
        func store(_ spec: OptionSpec, _ value: String?) throws {
            switch spec.kind {
            case .flag:
                if value != nil {
                    throw UsageError(message: "cloudsync: --\(spec.long) takes no value", hint: hint())
                }
                result.flags.insert(spec.long)
            case .value, .optionalValue:
                if spec.repeats {
                    result.values[spec.long, default: []].append(value ?? "")
                } else {
                    result.values[spec.long] = [value ?? ""]
                }
                result.flags.insert(spec.long)
            }
        }

        while index < arguments.count {
            let arg = arguments[index]
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                if !onlyPositionals, result.positionals.isEmpty, !command.subcommands.isEmpty {
                    guard let sub = command.subcommands.first(where: { $0.name == arg }) else {
                        let names = command.subcommands.map(\.name)
                        let near = nearest(arg, in: names).map { " Did you mean '\($0)'?" } ?? ""
                        throw UsageError(message: "cloudsync: unknown command '\(arg)'.\(near)",
                                         hint: "Commands: \(names.joined(separator: ", ")). \(hint())")
                    }
                    command = sub
                    result.commandPath.append(sub.name)
                    options = globals + command.options
                } else {
                    result.positionals.append(arg)
                }
            } else if arg == "--" {
                onlyPositionals = true
            } else if arg.hasPrefix("--") {
                let body = arg.dropFirst(2)
                let name = body.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                let inline = body.contains("=") ? String(body.drop(while: { $0 != "=" }).dropFirst()) : nil
                if name == "help" { result.wantsHelp = true; index += 1; continue }
                guard let spec = lookup(long: name) else {
                    let near = nearest(name, in: options.map(\.long) + ["help"]).map { " Did you mean '--\($0)'?" } ?? ""
                    throw UsageError(message: "cloudsync: unknown option '--\(name)'.\(near)", hint: hint())
                }
                switch spec.kind {
                case .flag: try store(spec, inline)
                case .value: try store(spec, inline ?? needValue(spec))
                case .optionalValue:
                    if inline == nil, index + 1 < arguments.count, let takesNext = spec.takesNext, takesNext(arguments[index + 1]) {
                        index += 1
                        try store(spec, arguments[index])
                    } else {
                        try store(spec, inline)
                    }
                }
            } else {
                // Short options, possibly bundled: -vq
                let letters = Array(arg.dropFirst())
                for (i, letter) in letters.enumerated() {
                    if letter == "h" { result.wantsHelp = true; continue }
                    guard let spec = lookup(short: letter) else {
                        throw UsageError(message: "cloudsync: unknown option '-\(letter)'", hint: hint())
                    }
                    if case .value = spec.kind {
                        let rest = String(letters[(i + 1)...])
                        try store(spec, rest.isEmpty ? needValue(spec) : rest)
                        break
                    }
                    try store(spec, nil)
                }
            }
            index += 1
        }

        // Like --help, --version stands anywhere and needs nothing else.
        if result.wantsHelp || result.flags.contains("version") { return result }
        if !command.subcommands.isEmpty, command.positionals.isEmpty {
            throw UsageError(message: "cloudsync: '\(([root.name] + result.commandPath).joined(separator: " "))' needs a command: \(command.subcommands.map(\.name).joined(separator: ", "))",
                             hint: hint())
        }
        let required = command.positionals.filter { !$0.optional }
        if result.positionals.count < required.count {
            throw UsageError(message: "cloudsync: missing \(required[result.positionals.count].name)", hint: hint())
        }
        let takesMany = command.positionals.contains { $0.repeats }
        if !takesMany, result.positionals.count > command.positionals.count {
            throw UsageError(message: "cloudsync: unexpected argument '\(result.positionals[command.positionals.count])'", hint: hint())
        }
        return result
    }

    /// The spec of the command at `path`.
    func spec(at path: [String]) -> CommandSpec {
        var command = root
        for name in path {
            if let sub = command.subcommands.first(where: { $0.name == name }) { command = sub }
        }
        return command
    }
}

/// The candidate closest to `word`, when close enough to be a plausible typo (``Suggestion/closest(to:among:)``).
func nearest(_ word: String, in candidates: [String]) -> String? {
    Suggestion.closest(to: word, among: candidates)
}
