import Foundation

/// Starts `body` on a new thread that the system knows by `name` (at most 15 bytes show in /proc, `top -H` and
/// `perf`), with `stackSize` bytes of stack when given. Named from inside: on Linux, Foundation gives the OS
/// thread a name set before `Thread.start()` only to `Thread.name`, so such threads showed their creator's name
/// ("oot.default-qos").
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        Thread.current.name = name
        body()
    }
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}
