// transport-bench: downloads every path listed in a file from a base URL through CurlTransport, N at a time,
// writing each body with pwrite into a file of the same name under an output directory. Prints one line:
// "files=<n> bytes=<b> seconds=<s> MiB/s=<r>". The tasks run on Swift's cooperative pool, like the engine's.
// Used by bench/transport.sh; not part of the product.
import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Writes received bytes at their offsets with pwrite(2).
final class PwriteSink: ByteSink {
    let fd: Int32
    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
    deinit { close(fd) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            done += n
        }
    }
}

func argument(_ name: String, _ fallback: String? = nil) -> String {
    let args = CommandLine.arguments
    if let i = args.firstIndex(of: name), i + 1 < args.count { return args[i + 1] }
    if let fallback { return fallback }
    FileHandle.standardError.write(Data("usage: transport-bench --base URL --list FILE --out DIR [--jobs 4] [--buffer-kib 256]\n".utf8))
    exit(2)
}

let base = argument("--base")
let paths = try String(contentsOfFile: argument("--list"), encoding: .utf8).split(separator: "\n").map(String.init)
let out = argument("--out")
let jobs = Int(argument("--jobs", "4")) ?? 4
var options = CurlTransportOptions()
options.receiveBufferSize = (Int(argument("--buffer-kib", "256")) ?? 256) * 1024
let transport = try CurlTransport(options: options)

let started = Date()
/// Downloads every path, `jobs` at once. Not main-actor isolated, so that the scheduling loop runs on the pool.
nonisolated func downloadAll() async throws -> Int64 {
  try await withThrowingTaskGroup(of: Int64.self) { group in
    var next = 0
    var sum: Int64 = 0
    func launch() {
        guard next < paths.count else { return }
        let path = paths[next]
        next += 1
        group.addTask {
            let sink = try PwriteSink(path: out + "/" + path.split(separator: "/").joined(separator: "_"))
            guard let url = URL(string: base + path) else { throw ProviderError(.configuration, "bad URL \(base + path)") }
            let outcome = try await transport.download(HTTPRequest(url: url), range: nil, ifRange: nil, into: sink)
            guard outcome.head.status == 200 else {
                throw ProviderError(.invalidResponse, "\(path): HTTP \(outcome.head.status)")
            }
            return Int64(outcome.delivered.count)
        }
    }
    for _ in 0..<jobs { launch() }
    for try await bytes in group {
        sum += bytes
        launch()
    }
    return sum
  }
}
let total = try await downloadAll()
let seconds = Date().timeIntervalSince(started)
print("files=\(paths.count) bytes=\(total) seconds=\(String(format: "%.3f", seconds)) MiB/s=\(String(format: "%.1f", Double(total) / 1_048_576 / seconds))")
