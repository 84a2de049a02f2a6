@testable import CloudSyncCommands
import CloudSyncCore
import Testing

@Suite struct ArgumentParserTests {
    let parser = ArgumentParser(root: CommandTree.root, globals: CommandTree.globals)

    @Test func parsesCommandOptionsAndPositionals() throws {
        let p = try parser.parse(["pull", "--remote", "home", "--jobs=8", "--head-first", "Rock", "Jazz/Miles"])
        #expect(p.commandPath == ["pull"])
        #expect(p.value("remote") == "home")
        #expect(p.value("jobs") == "8")
        #expect(p.has("head-first"))
        #expect(p.value("head-first") == "")
        #expect(p.positionals == ["Rock", "Jazz/Miles"])
    }

    @Test func globalOptionsAreAcceptedBeforeAndAfterTheCommand() throws {
        let before = try parser.parse(["--config", "/tmp/c.toml", "-v", "ls"])
        let after = try parser.parse(["ls", "--config", "/tmp/c.toml", "--verbose"])
        #expect(before.value("config") == "/tmp/c.toml" && before.has("verbose"))
        #expect(after.value("config") == "/tmp/c.toml" && after.has("verbose"))
    }

    @Test func optionalValueTakesItsValueOnlyWithEquals() throws {
        let p = try parser.parse(["pull", "--head-first=1MiB", "Album"])
        #expect(p.value("head-first") == "1MiB")
        #expect(p.positionals == ["Album"])
    }

    @Test func nestedCommands() throws {
        let p = try parser.parse(["cache", "evict", "--dry-run"])
        #expect(p.commandPath == ["cache", "evict"])
        #expect(p.has("dry-run"))
    }

    @Test(arguments: [
        (["pull", "--jbos", "2"], "unknown option '--jbos'. Did you mean '--jobs'?"),
        (["pul"], "unknown command 'pul'. Did you mean 'pull'?"),
        (["pull", "--jobs"], "--jobs N needs a value"),
        (["ls", "a", "b"], "unexpected argument 'b'"),
        (["login"], "missing NAME"),
        (["cache"], "'cloudsync cache' needs a command"),
        ([], "'cloudsync' needs a command"),
        (["ls", "--json=yes"], "--json takes no value"),
        (["cache", "frobnicate"], "unknown command 'frobnicate'"),
    ])
    func usageErrorsSayWhatIsWrong(arguments: [String], expected: String) {
        #expect {
            try parser.parse(arguments)
        } throws: { error in
            guard let usage = error as? UsageError else { return false }
            return usage.message.contains(expected) && usage.exitCode == .usage && usage.hint.contains("--help")
        }
    }

    @Test func helpIsRecognisedAnywhere() throws {
        #expect(try parser.parse(["pull", "--help"]).wantsHelp)
        #expect(try parser.parse(["cache", "-h"]).wantsHelp)
        #expect(try parser.parse(["--help"]).wantsHelp)
    }

    @Test func integerOptionsAreRangeChecked() throws {
        let p = try parser.parse(["pull", "--jobs", "0"])
        #expect(throws: UsageError.self) { try p.integer("jobs", in: 1 ... 64) }
        let q = try parser.parse(["pull", "--jobs", "12"])
        #expect(try q.integer("jobs", in: 1 ... 64) == 12)
    }
}
