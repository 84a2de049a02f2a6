/// Renders `--help` text for a command. Snapshot-tested: change deliberately.
struct HelpRenderer {
    let programName: String
    let globals: [OptionSpec]
    let width = 100

    func render(_ command: CommandSpec, path: [String]) -> String {
        var out = ""
        let fullName = ([programName] + path).joined(separator: " ")
        out += "OVERVIEW: \(command.abstract)\n\n"
        var usage = "USAGE: \(fullName)"
        if !command.subcommands.isEmpty {
            usage += " <command>"
        } else {
            if !command.options.isEmpty { usage += " [options]" }
            for p in command.positionals { usage += " \(p.usageText)" }
        }
        out += usage + "\n"
        if !command.discussion.isEmpty {
            out += "\n" + wrap(command.discussion, width: width).joined(separator: "\n") + "\n"
        }
        if !command.positionals.isEmpty {
            out += "\nARGUMENTS:\n"
            for p in command.positionals { out += row(p.name, p.help) }
        }
        if !command.subcommands.isEmpty {
            out += "\nCOMMANDS:\n"
            for sub in command.subcommands { out += row(sub.name, sub.abstract) }
        }
        if !command.options.isEmpty {
            out += "\nOPTIONS:\n"
            for o in command.options { out += row(optionLabel(o), o.help) }
        }
        out += "\nGLOBAL OPTIONS:\n"
        for o in globals { out += row(optionLabel(o), o.help) }
        out += row("-h, --help", "Show help for this command.")
        if !command.subcommands.isEmpty {
            out += "\nSee '\(fullName) <command> --help' for a command's options.\n"
        }
        return out
    }

    private func optionLabel(_ o: OptionSpec) -> String {
        (o.short.map { "-\($0), " } ?? "") + o.usageText
    }

    private func row(_ label: String, _ help: String) -> String {
        let indent = 26
        let lead = "  " + label
        let textWidth = width - indent
        let lines = wrap(help, width: textWidth)
        var out = ""
        if lead.count + 2 > indent {
            out += lead + "\n"
            for line in lines { out += String(repeating: " ", count: indent) + line + "\n" }
        } else {
            let pad = String(repeating: " ", count: indent - lead.count)
            out += lead + pad + (lines.first ?? "") + "\n"
            for line in lines.dropFirst() { out += String(repeating: " ", count: indent) + line + "\n" }
        }
        return out
    }

    private func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if current.isEmpty {
                current = String(word)
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = String(word)
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }
}
