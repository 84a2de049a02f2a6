import Foundation
import Synchronization

/// A tiny HTTP listener on 127.0.0.1 (an ephemeral port) that receives the OAuth redirect of an
/// installed-app login. Answers each request with a short page and hands back its request target.
/// Owns its socket; `close()` once no `waitForRequest` is running.
final class LoopbackListener: Sendable {
    let port: UInt16
    private let fd: Int32
    private let closed = Mutex(false)

    init() throws(AuthError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Self.failure("create a socket") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            let error = Self.failure("listen on 127.0.0.1")
            Foundation.close(fd)
            throw error
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let error = Self.failure("read the listening port")
            Foundation.close(fd)
            throw error
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close() }

    func close() {
        closed.withLock { isClosed in
            if !isClosed { Foundation.close(fd); isClosed = true }
        }
    }

    /// Waits for the next request and returns its target (`/?code=…&state=…`). Polls so that task
    /// cancellation ends the wait within a fifth of a second. With `state`, a request carrying another state (not
    /// this login's redirect: another attempt, or any local process) is answered 400 and the wait goes on, so it
    /// cannot end the login.
    func waitForRequest(state: String? = nil) async throws -> String {
        while true {
            try Task.checkCancellation()
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 0)
            if ready <= 0 {
                try await Task.sleep(nanoseconds: 200_000_000)
                continue
            }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            defer { Foundation.close(client) }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            _ = setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var head = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while head.count < 16384 {
                let n = read(client, &buffer, buffer.count)
                if n <= 0 { break }
                head += buffer[0..<n]
                if head.firstIndex(of: 10) != nil { break }
            }
            let line = String(decoding: head.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
            let parts = line.split(separator: " ")
            guard parts.count >= 2, parts[0] == "GET" else { respond(client, status: "400 Bad Request", text: "Bad request"); continue }
            let target = String(parts[1])
            if let state, target.contains("code=") || target.contains("error="),
               URLComponents(string: "http://127.0.0.1" + target)?.queryItems?.first(where: { $0.name == "state" })?.value != state {
                respond(client, status: "400 Bad Request", text: "This address belongs to another login attempt; cloudsync is still waiting for its own.")
                continue
            }
            if target.contains("code=") {
                respond(client, status: "200 OK", text: "cloudsync received the authorization. You can close this tab.")
            } else if target.contains("error=") {
                respond(client, status: "200 OK", text: "Access was not granted. You can close this tab; cloudsync stops.")
            } else {
                respond(client, status: "404 Not Found", text: "Not found")
                continue
            }
            return target
        }
    }

    private func respond(_ client: Int32, status: String, text: String) {
        let body = "<!doctype html><meta charset=utf-8><title>cloudsync</title><p>\(text)</p>\n"
        let reply = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        let bytes = Array(reply.utf8)
        _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
    }

    private static func failure(_ what: String) -> AuthError {
        AuthError(.network, "cannot \(what) for the login redirect: \(String(cString: strerror(errno))); paste the code instead")
    }
}
