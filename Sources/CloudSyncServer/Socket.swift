#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

/// An error starting the server, with what to do about it.
public struct ServerError: Error, Sendable, CustomStringConvertible, ExitCodeProviding {
    public enum Code: Sendable { case usage, bind }
    public var code: Code
    public var message: String
    public var description: String { message }
    /// `.usage` (2) for bad options, `.ioError` (74) when the address cannot be bound.
    public var exitCode: ExitCode { code == .usage ? .usage : .ioError }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// A listening TCP socket on one address. Owns its descriptor.
final class ListeningSocket: Sendable {
    let fd: Int32
    let port: Int

    /// Binds `address` (a numeric IPv4 or IPv6 address, or `localhost`) and `port` (0 = any free port).
    init(address: String, port: Int, backlog: Int32 = 512) throws {
        let host = address == "localhost" ? "127.0.0.1" : address
        var v4 = in_addr()
        var v6 = in6_addr()
        let isV4 = inet_pton(AF_INET, host, &v4) == 1
        let isV6 = !isV4 && inet_pton(AF_INET6, host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), &v6) == 1
        guard isV4 || isV6 else {
            throw ServerError(.usage, "--bind expects a numeric IPv4 or IPv6 address (e.g. 127.0.0.1 or ::1), got '\(address)'")
        }
        guard (0 ... 65535).contains(port) else { throw ServerError(.usage, "--port must be from 0 to 65535, got \(port)") }
        let fd = socket(isV4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError(.bind, "cannot create a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var bound: Int32
        if isV4 {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr = v4
            bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } else {
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = in_port_t(UInt16(port).bigEndian)
            addr.sin6_addr = v6
            bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let e = errno
            Glibc.close(fd)
            let hint = e == EADDRINUSE ? "; another program (or another `cloudsync serve`) uses it: choose another --port"
                : e == EADDRNOTAVAIL ? "; that address is not one of this machine's" : ""
            throw ServerError(.bind, "cannot listen on \(address) port \(port): \(String(cString: strerror(e)))\(hint)")
        }
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let actual: UInt16 = withUnsafePointer(to: &storage) { p in
            isV4 ? p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
                : p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        }
        self.fd = fd
        self.port = Int(actual)
    }

    /// Whether `address` is a loopback address (127.0.0.0/8, ::1, localhost).
    static func isLoopback(_ address: String) -> Bool {
        if address == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, address.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) } == Array(repeating: 0, count: 15) + [1]
        }
        return false
    }

    /// Unblocks `accept` and closes the descriptor.
    func shutdownAndClose() {
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }
}

/// Blocking I/O on one accepted connection, with deadlines. Sends use MSG_NOSIGNAL: a vanished client is an
/// error return, never SIGPIPE.
struct ConnectionIO {
    let fd: Int32

    enum ReadResult { case data(Int), closed, timeout, failed }

    /// Waits up to `deadline` for bytes and reads at most `buffer.count`.
    func read(into buffer: inout [UInt8], deadline: ContinuousClock.Instant) -> ReadResult {
        while true {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { return .timeout }
            let ms = Int32(min(Double(Int32.max), max(1, (Double(remaining.components.seconds) * 1000) + Double(remaining.components.attoseconds) / 1e15)))
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, ms)
            if r < 0 { if errno == EINTR { continue }; return .failed }
            if r == 0 { return .timeout }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { return .data(n) }
            if n == 0 { return .closed }
            if errno == EINTR || errno == EAGAIN { continue }
            return .failed
        }
    }

    /// Sends every byte; false when the client went away or the send timed out (SO_SNDTIMEO).
    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = Glibc.send(fd, bytes.baseAddress.map { $0 + done }, bytes.count - done, Int32(MSG_NOSIGNAL))
            if n > 0 { done += n; continue }
            if n < 0, errno == EINTR { continue }
            return false
        }
        return true
    }

    func send(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { send($0) } }
    func send(_ data: Data) -> Bool { data.withUnsafeBytes { send($0) } }

    /// Whether the peer has closed its side or reset (a waiting response is no longer wanted). Pipelined bytes
    /// do not count as gone.
    func peerClosed() -> Bool {
        // POLLRDHUP (Linux, 0x2000): the peer shut down its writing half.
        let rdhup: Int16 = 0x2000
        var p = pollfd(fd: fd, events: rdhup, revents: 0)
        guard poll(&p, 1, 0) > 0 else { return false }
        return p.revents & (rdhup | Int16(POLLHUP) | Int16(POLLERR)) != 0
    }

    /// Waits up to `timeout` for the peer to close its side (or reset); true when it did.
    func waitForPeerClose(timeout: Duration) -> Bool {
        let rdhup: Int16 = 0x2000
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return false }
            var p = pollfd(fd: fd, events: rdhup, revents: 0)
            let (seconds, attoseconds) = left.components
            let ms = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            let n = poll(&p, 1, ms)
            if n < 0, errno == EINTR { continue }
            // Only a close, a hang-up or an error wakes the poll (readable bytes are not asked for).
            return n > 0 && p.revents & (rdhup | Int16(POLLHUP) | Int16(POLLERR)) != 0
        }
    }

    /// The text of a NUL-terminated C buffer (what `inet_ntop` wrote).
    static func cText(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `http://ADDRESS:PORT` of the local end of this connection (the address the client connected to), for
    /// URLs in playlists: never taken from the request's Host, which a rebinding page controls.
    func localBaseURL() -> String? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard ok == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer -> String? in
            if family == sa_family_t(AF_INET) {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    var address = v4.pointee.sin_addr
                    guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return nil }
                    return "http://\(Self.cText(text)):\(UInt16(bigEndian: v4.pointee.sin_port))"
                }
            }
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                    var address = v6.pointee.sin6_addr
                    guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return nil }
                    return "http://[\(Self.cText(text))]:\(UInt16(bigEndian: v6.pointee.sin6_port))"
                }
            }
            return nil
        }
    }

    func configure(sendTimeout: Duration) {
        var tv = timeval(tv_sec: Int(sendTimeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}
