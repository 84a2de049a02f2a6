import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The whole contents of a file a user named, read with read(2) until its end: pipes, process substitution
/// (`--config <(pass show cloudsync)`), `/dev/stdin` and /proc files work as regular files do. (Foundation's
/// readers return nothing for a pipe and only the first 4 KiB of a /proc file, whose size says 0.)
public enum WholeFile {
    public struct Failure: Error, Sendable {
        /// The failed call's errno; nil when the file is larger than the limit.
        public let errno: Int32?
        /// `No such file or directory`, or `larger than 1.0 MiB`.
        public let reason: String
    }

    /// At most `limit` bytes; a longer file is a failure, not cut.
    public static func read(_ path: String, limit: Int) throws(Failure) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(errno) }
        defer { close(fd) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if n == 0 { return data }
            guard n <= limit - data.count else {
                throw Failure(errno: nil, reason: "larger than \(ByteSize.format(Int64(limit)))")
            }
            data.append(contentsOf: chunk[..<n])
        }
    }

    private static func failure(_ code: Int32) -> Failure {
        Failure(errno: code, reason: String(cString: strerror(code)))
    }
}
