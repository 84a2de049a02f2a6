import CloudSyncAuth
import CloudSyncConfig
import CloudSyncCore
import CloudSyncHTTP
import CloudSyncProviders
import Foundation

/// `cloudsync login NAME [--token-json FILE|-]`: runs the remote's login flow (or imports tokens), proves
/// the credentials with one request and stores them under `$XDG_STATE_HOME/cloudsync/tokens/` (0600).
/// Instructions go to stderr, the summary to stdout; never a token.
struct LoginCommand {
    let context: CommandContext

    func run() async throws -> ExitCode {
        guard let name = context.arguments.positionals.first else {
            throw UsageError(message: "cloudsync login: missing NAME", hint: "Run 'cloudsync login --help' for usage.")
        }
        let config = try Setup(context: context).configuration()
        try Setup.checkRemoteName(name, in: config, option: "")
        guard let remote = try config.select(remote: name, provider: nil).first else { return .config }
        try remote.requireSecrets()
        guard let provider = ProviderRegistry.catalog.descriptor(remote.provider) else { return .config }
        var login = LoginRemote(name: remote.name, provider: provider, clientID: remote.clientID,
                                clientSecret: remote.clientSecret, tokenURL: remote.tokenURL, authURL: remote.authURL,
                                deviceURL: remote.deviceURL, apiURL: remote.apiURL, url: remote.url, user: remote.user,
                                options: remote.options)
        if provider.credential(remote.options) == .password {
            login.configuredPassword = try remote.password ?? remote.passwordCommand.map { try runPasswordCommand($0, remote: remote.name) }
        }
        let store = TokenStore(stateDirectory: StateLocation.resolve(environment: context.environment))
        var transportOptions = CurlTransportOptions()
        transportOptions.caFile = remote.caFile?.path
        let transport = try CurlTransport(options: transportOptions, logger: context.logger)
        let flow = Login(remote: login, store: store, transport: transport, logger: context.logger)
        let outcome: LoginOutcome
        if let source = context.arguments.value("token-json") {
            outcome = try await flow.importTokens(try readTokenJSON(source))
        } else {
            outcome = try await flow.run(interaction: TerminalInteraction(console: context.console))
        }
        context.console.out(summary(outcome, remote: remote))
        return .ok
    }

    private func readTokenJSON(_ source: String) throws -> String {
        let data: Data
        if source == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            do {
                data = try WholeFile.read(source, limit: 1 << 20)
            } catch {
                throw AuthError(.configuration, "cannot read the token file \(source): \(error.reason); check the path")
            }
        }
        return String(decoding: data, as: UTF8.self)
    }

    private func summary(_ outcome: LoginOutcome, remote: RemoteConfig) -> String {
        var lines = ["Logged in remote '\(remote.name)' (\(remote.provider.rawValue))\(outcome.account.map { " as \($0)" } ?? "") with \(outcome.method)."]
        if let path = outcome.storedAt {
            lines.append("Stored in \(path.path) (mode 0600).")
        } else {
            lines.append("Nothing stored: the config supplies the password.")
        }
        if let expiry = outcome.expiresAt {
            lines.append("Access token valid until \(RFC3339.format(expiry))"
                + (outcome.hasRefreshToken ? "; cloudsync refreshes it with the stored refresh token." : "; there is no refresh token, so log in again then."))
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// `cloudsync logout NAME`: removes the remote's stored tokens (or password).
struct LogoutCommand {
    let context: CommandContext

    func run() async throws -> ExitCode {
        guard let name = context.arguments.positionals.first else {
            throw UsageError(message: "cloudsync logout: missing NAME", hint: "Run 'cloudsync logout --help' for usage.")
        }
        let store = TokenStore(stateDirectory: StateLocation.resolve(environment: context.environment))
        // The refresh lock only where there are tokens to remove: a typo leaves no `tokens/NAME.lock` behind.
        if FileManager.default.fileExists(atPath: store.fileURL(for: name).path) {
            let lock = try await store.lock(name)
            defer { lock.unlock() }
            if try store.delete(name) {
                context.console.out("Removed the stored tokens of remote '\(name)' (\(store.fileURL(for: name).path)).\n")
                return .ok
            }
        }
        // Tokens of a remote since removed from the config are still deleted above; a name that is neither
        // stored nor configured is a typo.
        if let config = try? Setup(context: context).configuration() {
            try Setup.checkRemoteName(name, in: config, option: "")
        }
        context.console.out("Remote '\(name)' had no stored tokens.\n")
        return .ok
    }
}

/// Shows login instructions on stderr and reads answers from stdin: lines with echo, secrets without
/// (termios, when stdin is a terminal). Reads poll stdin so a cancelled read returns at once.
struct TerminalInteraction: LoginInteraction {
    let console: Console

    func show(_ text: String) { console.toPerson(text + "\n") }

    func readLine(prompt: String) async throws -> String? {
        if console.stdinIsTTY { console.toPerson(prompt) }
        return try await Self.readStdinLine()
    }

    func readSecret(prompt: String) async throws -> String? {
        console.err(prompt)
        guard console.stdinIsTTY else { return try await Self.readStdinLine() }
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { return try await Self.readStdinLine() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer {
            _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            console.err("\n")
        }
        return try await Self.readStdinLine()
    }

    /// One line from stdin without buffering past its newline; nil at end of input.
    static func readStdinLine() async throws -> String? {
        var bytes: [UInt8] = []
        while true {
            try Task.checkCancellation()
            var pfd = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 0) <= 0 {
                try await Task.sleep(nanoseconds: 100_000_000)
                continue
            }
            var byte: UInt8 = 0
            let n = read(STDIN_FILENO, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == 10 { break }
            bytes.append(byte)
        }
        if bytes.last == 13 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
